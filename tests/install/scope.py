#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Re-scopes install.yaml into one namespace, beside another Agent Sandbox install.

Usage: scope.py INSTALL_YAML NAMESPACE [CONTROLLER_NAMESPACE] > out.yaml

Drops the CRDs; renames agent-sandbox-system to NAMESPACE and every cluster-scoped object
to NAMESPACE-<name> (bindings follow; the Secret admission policy matches the
controller of NAMESPACE); the controller and the router watch NAMESPACE only
(--namespace) and the controller elects its leader on a Lease named NAMESPACE. So the
Deployments of install.yaml run as pods on a cluster where another controller owns the
Sandboxes of every other namespace, and nothing of the two installs collides. With
CONTROLLER_NAMESPACE the controller watches that namespace instead (so that the other
controller may own the Sandboxes of NAMESPACE, which the router then serves).
"""
import sys

import yaml

SYS = "agent-sandbox-system"
CLUSTER_KINDS = {"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                 "ValidatingAdmissionPolicyBinding"}


def scope(doc, ns, ctrl_ns):
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
    if kind == "ValidatingAdmissionPolicyBinding":
        doc["spec"]["policyName"] = "%s-%s" % (ns, doc["spec"]["policyName"])
    if kind == "ValidatingAdmissionPolicy":
        for c in doc["spec"].get("matchConditions", []):
            c["expression"] = c["expression"].replace(":%s:" % SYS, ":%s:" % ns)
    if kind == "Role":
        for r in doc["rules"]:
            if "resourceNames" in r and r.get("resources") == ["leases"]:
                r["resourceNames"] = [ns]
    if kind == "Deployment":
        for c in doc["spec"]["template"]["spec"]["containers"]:
            args = [a.replace(SYS, ns) for a in c.get("args", [])]
            if doc["metadata"]["name"] == "agent-sandbox-controller":
                args.append("--namespace=%s" % ctrl_ns)
                args.append("--leader-election-id=%s" % ns)
            else:
                args.append("--namespace=%s" % ns)
            c["args"] = args
    return doc


def main(argv):
    path, ns = argv[0], argv[1]
    ctrl_ns = argv[2] if len(argv) > 2 else ns
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    out = [scope(d, ns, ctrl_ns) for d in docs if d["kind"] != "CustomResourceDefinition"]
    sys.stdout.write(yaml.safe_dump_all(out, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
