#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks a rendered install (install.yaml or `helm template` output).

Usage: check_manifests.py FILE                  inventory and pod security
       check_manifests.py --same-rbac A B       the RBAC rules (and the admission policies
                                                that confine them) of A and B are identical

Inventory: the namespace, the four CRDs, both Deployments with their ServiceAccounts,
RBAC, the controller's Secret admission policy, Services (proxy, metrics), the router PDB and the NetworkPolicies. Pod security:
every Deployment runs non-root with a RuntimeDefault seccomp profile, no privilege
escalation, a read-only root file system, all capabilities dropped, and probes; the
controller runs leader-elected. Prints what is wrong and exits 1.
"""
import sys

import yaml

WANT = {
    ("CustomResourceDefinition", "sandboxes.agents.x-k8s.io"),
    ("CustomResourceDefinition", "sandboxtemplates.extensions.agents.x-k8s.io"),
    ("CustomResourceDefinition", "sandboxclaims.extensions.agents.x-k8s.io"),
    ("CustomResourceDefinition", "sandboxwarmpools.extensions.agents.x-k8s.io"),
    ("ServiceAccount", "agent-sandbox-controller"),
    ("ServiceAccount", "sandbox-router"),
    ("ClusterRole", "agent-sandbox-controller"),
    ("ClusterRole", "agent-sandbox-controller-extensions"),
    ("ClusterRole", "agent-sandbox-controller-late-binding"),
    ("ClusterRole", "sandbox-router"),
    ("ClusterRoleBinding", "agent-sandbox-controller"),
    ("ClusterRoleBinding", "agent-sandbox-controller-extensions"),
    ("ClusterRoleBinding", "agent-sandbox-controller-late-binding"),
    ("ValidatingAdmissionPolicy", "agent-sandbox-controller-secrets"),
    ("ValidatingAdmissionPolicyBinding", "agent-sandbox-controller-secrets"),
    ("ClusterRoleBinding", "sandbox-router"),
    ("Role", "agent-sandbox-controller-leader-election"),
    ("RoleBinding", "agent-sandbox-controller-leader-election"),
    ("Deployment", "agent-sandbox-controller"),
    ("Deployment", "sandbox-router"),
    ("Service", "agent-sandbox-controller"),
    ("Service", "sandbox-router-svc"),
    ("Service", "sandbox-router-metrics"),
    ("PodDisruptionBudget", "sandbox-router"),
    ("NetworkPolicy", "agent-sandbox-controller"),
    ("NetworkPolicy", "sandbox-router"),
}


def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


def pod_problems(dep):
    name = dep["metadata"]["name"]
    spec = dep["spec"]["template"]["spec"]
    errs = []
    psc = spec.get("securityContext", {})
    if not psc.get("runAsNonRoot"):
        errs.append("%s: runAsNonRoot not set" % name)
    if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        errs.append("%s: no RuntimeDefault seccomp profile" % name)
    for c in spec["containers"]:
        sc = c.get("securityContext", {})
        if sc.get("allowPrivilegeEscalation") is not False:
            errs.append("%s/%s: allowPrivilegeEscalation" % (name, c["name"]))
        if not sc.get("readOnlyRootFilesystem"):
            errs.append("%s/%s: writable root file system" % (name, c["name"]))
        if sc.get("capabilities", {}).get("drop") != ["ALL"]:
            errs.append("%s/%s: capabilities not dropped" % (name, c["name"]))
        for p in ("livenessProbe", "readinessProbe"):
            if p not in c:
                errs.append("%s/%s: no %s" % (name, c["name"], p))
        if name == "agent-sandbox-controller" and "--leader-elect=true" not in c.get("args", []):
            errs.append("%s: not leader-elected" % name)
        # a read-only root: --metrics-secure writes its self-signed certificate to /tmp
        tmp = [m for m in c.get("volumeMounts", []) if m.get("mountPath") == "/tmp"]
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        if not tmp or "emptyDir" not in vols.get(tmp[0]["name"], {}):
            errs.append("%s/%s: no writable /tmp (emptyDir)" % (name, c["name"]))
    if name == "agent-sandbox-controller" and spec.get("terminationGracePeriodSeconds", 30) <= 30:
        errs.append("%s: grace period not past the 30 s drain (the Lease is released after it)"
                    % name)
    return errs


def reaches_sandbox_pods(np):
    """Whether NetworkPolicy np lets its pods out to sandbox pods (any namespace)."""
    for rule in np["spec"].get("egress", []):
        for peer in rule.get("to", []):
            sel = peer.get("podSelector", {})
            keys = [e.get("key") for e in sel.get("matchExpressions", [])]
            if "namespaceSelector" in peer and "agents.x-k8s.io/sandbox-name-hash" in keys:
                return True
    return False


def check(path):
    docs = load(path)
    have = {(d["kind"], d["metadata"]["name"]) for d in docs}
    errs = ["missing %s %s" % kn for kn in sorted(WANT - have)]
    for d in docs:
        if d["kind"] == "Deployment":
            errs += pod_problems(d)
        # idle probes and late-bound deliveries go from the controller to sandbox pods
        if (d["kind"], d["metadata"]["name"]) == ("NetworkPolicy", "agent-sandbox-controller") \
                and not reaches_sandbox_pods(d):
            errs.append("NetworkPolicy agent-sandbox-controller: no egress to sandbox pods")
        ns = d["metadata"].get("namespace")
        if ns not in (None, "agent-sandbox-system"):
            errs.append("%s %s in namespace %s" % (d["kind"], d["metadata"]["name"], ns))
    return errs


def rbac(path):
    out = {}
    for d in load(path):
        if d["kind"] in ("ClusterRole", "Role"):
            out[(d["kind"], d["metadata"]["name"])] = sorted(
                yaml.safe_dump(r, sort_keys=True) for r in d.get("rules", []))
        if d["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            out[(d["kind"], d["metadata"]["name"])] = (d["roleRef"], d["subjects"])
        if d["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            out[(d["kind"], d["metadata"]["name"])] = d["spec"]
    return out


def main(argv):
    if argv[:1] == ["--same-rbac"]:
        a, b = rbac(argv[1]), rbac(argv[2])
        errs = ["%s %s differs" % k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    else:
        errs = check(argv[0])
    for e in errs:
        print(e, file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
