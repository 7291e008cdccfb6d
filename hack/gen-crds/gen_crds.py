#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Generate the v1beta1 CRDs (api/crds/) and the field tables of docs/api.md.

    hack/gen-crds/gen_crds.py            regenerate api/crds/*.yaml and docs/api.md
    hack/gen-crds/gen_crds.py --check    regenerate into a temp dir and compare;
                                         exit 1 with a diff summary when stale
    options: --refresh (fetch the OpenAPI again), --verbose

Inputs: hack/gen-crds/types.yaml (our types) and the OpenAPI v3 documents of
core/v1 and networking.k8s.io/v1 served by a throwaway kube-apiserver started
from .cache/bin (see localapi.py). The fetched documents are cached in
.cache/openapi/<k8s version>-<apiserver binary hash>/ so later runs, including
--check, need no API server; the output is always regenerated in full.
"""

import argparse
import copy
import difflib
import hashlib
import json
import os
import re
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep the source tree clean

import docs  # noqa: E402
import localapi  # noqa: E402
import openapi  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
TYPES = os.path.join(HERE, "types.yaml")
DOCS = os.path.join("docs", "api.md")
VERSION = "v1beta1"
PART_OF = "agent-sandbox"

DOCUMENTS = {
    "api_v1.json": "/openapi/v3/api/v1",
    "networking_v1.json": "/openapi/v3/apis/networking.k8s.io/v1",
}


def log(msg):
    print(f"gen-crds: {msg}", file=sys.stderr)


# --- OpenAPI input ---------------------------------------------------------------


def k8s_version():
    """The Kubernetes release of the local binaries (K8S_VERSION, as in hack/lib.sh)."""
    if os.environ.get("K8S_VERSION"):
        return os.environ["K8S_VERSION"]
    with open(os.path.join(ROOT, "hack", "lib.sh")) as f:
        m = re.search(r"K8S_VERSION=\$\{K8S_VERSION:-(v[0-9][^}]*)\}", f.read())
    if not m:
        raise SystemExit("gen-crds: cannot find K8S_VERSION in hack/lib.sh")
    return m.group(1)


def cache_dir(bindir, version):
    cache_root = os.environ.get("AGENT_SANDBOX_CACHE", os.path.join(ROOT, ".cache"))
    apiserver = os.path.realpath(os.path.join(bindir, "kube-apiserver"))
    try:
        h = hashlib.sha256()
        with open(apiserver, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        key = f"{version}-{h.hexdigest()[:12]}"
    except OSError:
        key = None
    return cache_root, key


def load_openapi(bindir, refresh, verbose):
    """Return the OpenAPI documents, from the cache or from a fresh API server."""
    version = k8s_version()
    cache_root, key = cache_dir(bindir, version)
    if key is None:
        raise SystemExit(
            f"gen-crds: {bindir}/kube-apiserver not found: "
            "run hack/build-k8s.sh etcd kube-apiserver"
        )
    cdir = os.path.join(cache_root, "openapi", key)
    paths = {name: os.path.join(cdir, name) for name in DOCUMENTS}
    if refresh or not all(os.path.exists(p) for p in paths.values()):
        fetch_openapi(bindir, cdir, verbose)
    docs_ = []
    for name in sorted(paths):
        with open(paths[name]) as f:
            docs_.append(json.load(f))
    return version, docs_


def fetch_openapi(bindir, cdir, verbose):
    log(f"starting a throwaway kube-apiserver to fetch OpenAPI into {cdir}")
    os.makedirs(cdir, exist_ok=True)
    with localapi.LocalAPIServer(bindir, log=log if verbose else None) as api:
        for name, path in DOCUMENTS.items():
            status, _, body = api.request("GET", path)
            if status != 200:
                raise SystemExit(f"gen-crds: GET {path}: HTTP {status}: {body[:200]!r}")
            json.loads(body)  # must parse before it is cached
            tmp = os.path.join(cdir, name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(body)
            os.replace(tmp, os.path.join(cdir, name))


# --- schema assembly -------------------------------------------------------------


class Expander:
    """Expands $use (local definitions) and $embed (Kubernetes components)."""

    def __init__(self, definitions, resolver):
        self.definitions = definitions
        self.resolver = resolver

    def expand(self, node, path="", docs_mode=False):
        if isinstance(node, list):
            return [self.expand(v, path, docs_mode) for v in node]
        if not isinstance(node, dict):
            return node
        node = dict(node)
        base = {}
        if "$use" in node:
            name = node.pop("$use")
            if name not in self.definitions:
                raise SystemExit(f"gen-crds: {path}: unknown definition {name}")
            base = self.expand(self.definitions[name], path, docs_mode)
        elif "$embed" in node:
            ident = node.pop("$embed")
            if docs_mode:
                base = {"type": "object", "x-as-embed": ident}
            else:
                base = self.resolver.resolve(ident)
        for key, value in node.items():
            if key in ("properties",):
                base[key] = {p: self.expand(s, f"{path}.{p}", docs_mode) for p, s in value.items()}
            elif key in ("items", "additionalProperties"):
                base[key] = self.expand(value, path + "[]", docs_mode)
            else:
                base[key] = copy.deepcopy(value)
        return base


def canonical(node):
    """Sort mapping keys recursively; list order is kept (it can be meaningful)."""
    if isinstance(node, dict):
        return {k: canonical(node[k]) for k in sorted(node)}
    if isinstance(node, list):
        return [canonical(v) for v in node]
    return node


def root_schema(kind, expander, docs_mode=False):
    props = {
        "apiVersion": {
            "type": "string",
            "description": "Versioned schema of this representation of an object.",
        },
        "kind": {"type": "string", "description": "REST resource this object represents."},
        "metadata": {"type": "object"},
        "spec": expander.expand(kind["spec"], "spec", docs_mode),
    }
    if "status" in kind:
        props["status"] = expander.expand(kind["status"], "status", docs_mode)
    return {
        "type": "object",
        "description": kind["description"],
        "required": ["spec"],
        "properties": props,
    }


def build_crd(kind, expander):
    group, plural = kind["group"], kind["plural"]
    version = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": canonical(root_schema(kind, expander))},
    }
    if "subresources" in kind:
        version["subresources"] = canonical(kind["subresources"])
    if "printerColumns" in kind:
        version["additionalPrinterColumns"] = [canonical(c) for c in kind["printerColumns"]]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "labels": {"app.kubernetes.io/part-of": PART_OF},
        },
        "spec": {
            "group": group,
            "names": {
                "kind": kind["kind"],
                "listKind": kind["kind"] + "List",
                "plural": plural,
                "singular": kind["singular"],
                "shortNames": list(kind["shortNames"]),
            },
            "scope": "Namespaced",
            "versions": [version],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Pure-Python emitter (identical output with or without libyaml)."""


def to_yaml(obj, header):
    body = yaml.dump(
        obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1 << 16
    )
    return header + body


def load_types():
    with open(TYPES) as f:
        return yaml.safe_load(f)


def generate(openapi_docs, k8s_ver, root):
    """Return {relative path: content} for every generated file under root."""
    types = load_types()
    resolver = openapi.Resolver(openapi_docs, keep_descriptions=False)
    expander = Expander(types["definitions"], resolver)
    header = (
        "# SPDX-License-Identifier: Apache-2.0\n"
        "# Generated by hack/gen-crds/gen_crds.py from hack/gen-crds/types.yaml and the\n"
        f"# OpenAPI of Kubernetes {k8s_ver}. DO NOT EDIT.\n"
    )
    out = {}
    for kind in types["kinds"]:
        crd = build_crd(kind, expander)
        name = f"{kind['group']}_{kind['plural']}.yaml"
        out[os.path.join("api", "crds", name)] = to_yaml(crd, header)
    tables = docs.render(types["kinds"], lambda k: root_schema(k, expander, docs_mode=True))
    out[DOCS] = docs.splice(read(os.path.join(root, DOCS)), tables)
    return out


# --- output ----------------------------------------------------------------------


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_all(files, root):
    for rel, content in sorted(files.items()):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(content)
        os.replace(tmp, path)


def stale_files(files, root):
    """Compare generated content with the tree at root; return diff summaries."""
    problems = []
    for rel, want in sorted(files.items()):
        have = read(os.path.join(root, rel))
        if have is None:
            problems.append(f"{rel}: missing")
            continue
        if have == want:
            continue
        diff = list(
            difflib.unified_diff(
                have.splitlines(), want.splitlines(), f"a/{rel}", f"b/{rel}", n=1, lineterm=""
            )
        )
        added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
        removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
        shown = "\n".join(diff[:40]) + ("\n..." if len(diff) > 40 else "")
        problems.append(f"{rel}: stale (+{added} -{removed} lines)\n{shown}")
    crd_dir = os.path.join(root, "api", "crds")
    for path in sorted(os.listdir(crd_dir)) if os.path.isdir(crd_dir) else []:
        rel = os.path.join("api", "crds", path)
        if path.endswith(".yaml") and rel not in files:
            problems.append(f"{rel}: not generated any more (remove it)")
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail when committed output is stale")
    ap.add_argument("--refresh", action="store_true", help="fetch the OpenAPI again")
    ap.add_argument("--bindir", default=os.path.join(ROOT, ".cache", "bin"))
    ap.add_argument("--root", default=ROOT, help="tree to write or check (default: this repo)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    try:
        k8s_ver, openapi_docs = load_openapi(args.bindir, args.refresh, args.verbose)
        files = generate(openapi_docs, k8s_ver, args.root)
    except (openapi.OpenAPIError, localapi.APIError, docs.DocsError) as e:
        log(f"error: {e}")
        return 2
    if args.check:
        with tempfile.TemporaryDirectory(prefix="as-crds-check-") as tmp:
            write_all(files, tmp)  # the full output, as a normal run would write it
            files = {rel: read(os.path.join(tmp, rel)) for rel in files}
        problems = stale_files(files, args.root)
        if problems:
            print("\n\n".join(problems))
            print(
                f"\n{len(problems)} generated file(s) out of date: run hack/gen-crds/gen_crds.py"
            )
            return 1
        log(f"up to date ({len(files)} files)")
        return 0
    write_all(files, args.root)
    log(f"wrote {', '.join(sorted(files))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
