#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Re-scopes install.yaml into one namespace, beside another Agent Sandbox install.

Usage: scope.py INSTALL_YAML NAMESPACE > out.yaml

Drops the CRDs; renames agent-sandbox-system to NAMESPACE and every cluster-scoped object
to NAMESPACE-<name> (bindings follow); the controller and the router watch NAMESPACE only
(--namespace) and the controller elects its leader on a Lease named NAMESPACE. So the
Deployments of install.yaml run as pods on a cluster where another controller owns the
Sandboxes of every other namespace, and nothing of the two installs collides.
"""
import sys

import yaml

SYS = "agent-sandbox-system"
CLUSTER_KINDS = {"ClusterRole", "ClusterRoleBinding"}


def scope(doc, ns):
    kind, meta = doc["kind"], doc["metadata"]
    if kind == "Namespace":
        meta["name"] = ns
    elif kind in CLUSTER_KINDS:
        meta["name"] = "%s-%s" % (ns, meta["name"])
    elif meta.get("namespace") == SYS:
        meta["namespace"] = ns
    if kind in ("ClusterRoleBinding", "RoleBinding"):
        if doc["roleRef"]["kind"] == "ClusterRole":
            doc["roleRef"]["name"] = "%s-%s" % (ns, doc["roleRef"]["name"])
        for s in doc["subjects"]:
            if s.get("namespace") == SYS:
                s["namespace"] = ns
    if kind == "Role":
        for r in doc["rules"]:
            if "resourceNames" in r and r.get("resources") == ["leases"]:
                r["resourceNames"] = [ns]
    if kind == "Deployment":
        for c in doc["spec"]["template"]["spec"]["containers"]:
            args = [a.replace(SYS, ns) for a in c.get("args", [])]
            args.append("--namespace=%s" % ns)
            if doc["metadata"]["name"] == "agent-sandbox-controller":
                args.append("--leader-election-id=%s" % ns)
            c["args"] = args
    return doc


def main(argv):
    path, ns = argv
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    out = [scope(d, ns) for d in docs if d["kind"] != "CustomResourceDefinition"]
    sys.stdout.write(yaml.safe_dump_all(out, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
