#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the krew plugin manifest of kubectl-sandbox (kubectl krew install --manifest=...).

Usage: krew_manifest.py --version VERSION --url RELEASE_URL --homepage URL TARBALL...

Each TARBALL is kubectl-sandbox_VERSION_linux_ARCH.tar.gz (hack/dist.sh); its platform
entry downloads RELEASE_URL/NAME and carries the tarball's sha256.
"""

import argparse
import hashlib
import os
import re
import sys

import yaml

DESCRIPTION = """\
Agent Sandbox's CLI: claim sandboxes from warm pools, exec, shell, port-forward,
run code, copy files, list and kill processes, follow logs, watch (docs/cli.md).
Needs the shared libraries libcurl4, libjansson4, libyaml-0-2, libuv1, libssl3 and
libzstd1 (Debian/Ubuntu package names).
"""


def _block(dumper, s):
    style = "|" if "\n" in s else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style=style)


def platform(path, version, url):
    name = os.path.basename(path)
    m = re.fullmatch(r"kubectl-sandbox_(.+)_linux_(amd64|arm64)\.tar\.gz", name)
    if not m or m.group(1) != version:
        sys.exit(f"krew_manifest.py: unexpected tarball name {name}")
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return {
        "selector": {"matchLabels": {"os": "linux", "arch": m.group(2)}},
        "uri": "{}/{}".format(url.rstrip("/"), name),
        "sha256": digest,
        "bin": "kubectl-sandbox",
        "files": [{"from": "kubectl-sandbox", "to": "."}],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--homepage", required=True)
    ap.add_argument("tarballs", nargs="+")
    a = ap.parse_args()
    manifest = {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "sandbox"},
        "spec": {
            "version": "v" + a.version,
            "homepage": a.homepage,
            "shortDescription": "Claim and use Agent Sandbox sandboxes",
            "description": DESCRIPTION,
            "platforms": [platform(p, a.version, a.url) for p in sorted(a.tarballs)],
        },
    }
    yaml.SafeDumper.add_representer(str, _block)
    yaml.safe_dump(manifest, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
