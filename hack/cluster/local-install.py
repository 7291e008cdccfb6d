#!/usr/bin/env python3
"""Adapts install.yaml (or another manifest) for the one-node local cluster of make up.

    local-install.py FILE|- CONTROLLER_DIGEST ROUTER_DIGEST

Prints the documents of FILE with two changes, nothing else: the router Deployment of
agent-sandbox-system runs one replica (two add nothing on one node), and the pod template
of each controller and router Deployment carries the digest of the image it runs as the
annotation agent-sandbox.dev/image-digest, so that `make up` after a rebuild (same :dev
tag, new digest) rolls exactly the Deployments whose image changed.
"""
import sys

import yaml

ANNOTATION = "agent-sandbox.dev/image-digest"


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, ctrl, router = sys.argv[1:]
    digests = {"agent-sandbox-controller": ctrl, "sandbox-router": router}
    src = sys.stdin if path == "-" else open(path, encoding="utf-8")
    docs = [d for d in yaml.safe_load_all(src) if d]
    for d in docs:
        meta = d.get("metadata", {})
        name = meta.get("name")
        if d.get("kind") != "Deployment" or name not in digests:
            continue
        if name == "sandbox-router" and meta.get("namespace") == "agent-sandbox-system":
            d["spec"]["replicas"] = 1
        tmeta = d["spec"]["template"].setdefault("metadata", {})
        tmeta.setdefault("annotations", {})[ANNOTATION] = digests[name]
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
