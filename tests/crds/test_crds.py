# SPDX-License-Identifier: Apache-2.0
"""The generated CRDs against a real kube-apiserver (see runner.py), and --check."""

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import support
from support import check, create, example, get, message, path_of, renamed

MERGE = "application/merge-patch+json"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
GEN = os.path.join(support.ROOT, "hack", "gen-crds", "gen_crds.py")
EXAMPLE_FILES = sorted(f for f in os.listdir(support.EXAMPLES) if f.endswith(".yaml"))


def minimal_sandbox(name):
    return renamed(example("sandbox-minimal.yaml"), name)


def expect_rejected(api, obj, *needles):
    """Create obj; it must fail with 422 and a message containing every needle."""
    status, body = create(api, obj, expect=None)
    msg = message(body)
    check(status == 422, f"{obj['metadata']['name']}: HTTP {status}, want 422: {msg}")
    for n in needles:
        check(n in msg, f"{obj['metadata']['name']}: message lacks {n!r}: {msg}")
    return msg


def patch_status(api, obj, status):
    code, body = api.json("PATCH", path_of(obj) + "/status", {"status": status},
                          content_type=MERGE)
    check(code == 200, f"patch status of {path_of(obj)}: HTTP {code}: {message(body)}")
    return body


# --- static properties of the committed files ------------------------------------


def test_generated_files_are_fresh():
    r = subprocess.run([sys.executable, GEN, "--check"], capture_output=True, text=True)
    check(r.returncode == 0, f"gen_crds.py --check failed:\n{r.stdout}\n{r.stderr}")


def test_check_detects_stale_and_missing_files():
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(os.path.join(support.ROOT, "api"), os.path.join(tmp, "api"))
        shutil.copytree(os.path.join(support.ROOT, "docs"), os.path.join(tmp, "docs"))
        r = subprocess.run([sys.executable, GEN, "--check", "--root", tmp],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"clean copy reported stale: {r.stdout}{r.stderr}")
        victim = os.path.join(tmp, "api", "crds", "agents.x-k8s.io_sandboxes.yaml")
        with open(victim) as f:
            text = f.read()
        with open(victim, "w") as f:
            f.write(text.replace("- Suspended", "- Paused", 1))
        os.remove(os.path.join(tmp, "api", "crds",
                               "extensions.agents.x-k8s.io_sandboxwarmpools.yaml"))
        r = subprocess.run([sys.executable, GEN, "--check", "--root", tmp],
                           capture_output=True, text=True)
        check(r.returncode == 1, f"stale tree passed --check (rc {r.returncode})")
        check("agents.x-k8s.io_sandboxes.yaml: stale" in r.stdout, r.stdout)
        check("+                - Suspended" in r.stdout, f"no diff shown:\n{r.stdout}")
        check("sandboxwarmpools.yaml: missing" in r.stdout, r.stdout)


def test_crd_definitions_match_the_api_table():
    want = {
        "sandboxes.agents.x-k8s.io": ("Sandbox", "sandbox", ["sandbox"], False, True,
                                      ["Ready", "Reason", "Age"]),
        "sandboxtemplates.extensions.agents.x-k8s.io": (
            "SandboxTemplate", "sandboxtemplate", ["sandboxtemplate"], False, False, []),
        "sandboxclaims.extensions.agents.x-k8s.io": (
            "SandboxClaim", "sandboxclaim", ["sandboxclaim"], False, True,
            ["Ready", "Sandbox", "Reason", "Age"]),
        "sandboxwarmpools.extensions.agents.x-k8s.io": (
            "SandboxWarmPool", "sandboxwarmpool", ["swp"], True, True,
            ["Ready", "Desired", "Age"]),
    }
    seen = {}
    for path in support.crd_files():
        crd = support.load(path)
        name = crd["metadata"]["name"]
        spec = crd["spec"]
        check(os.path.basename(path) == f"{spec['group']}_{spec['names']['plural']}.yaml", path)
        check(spec["scope"] == "Namespaced", f"{name} scope")
        check("conversion" not in spec, f"{name} has a conversion section")
        check([v["name"] for v in spec["versions"]] == ["v1beta1"], f"{name} versions")
        v = spec["versions"][0]
        check(v["served"] and v["storage"], f"{name} served/storage")
        sub = v.get("subresources", {})
        cols = [c["name"] for c in v.get("additionalPrinterColumns", [])]
        names = spec["names"]
        seen[name] = (names["kind"], names["singular"], names["shortNames"], "scale" in sub,
                      "status" in sub, cols)
        check(names["listKind"] == names["kind"] + "List", f"{name} listKind")
        root = v["schema"]["openAPIV3Schema"]
        check(root["required"] == ["spec"], f"{name}: spec not required")
        # Client-side `kubectl apply` stores the object in a 256 KiB annotation.
        size = len(json.dumps(crd, separators=(",", ":")))
        check(size < 262144, f"{name}: {size} bytes of JSON is too big for kubectl apply")
    check(seen == want, f"CRDs differ from the API table:\n{seen}\nwant\n{want}")
    pool = support.load(support.crd_files()[-1])["spec"]["versions"][0]
    check(pool["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector"}, "scale paths")


def test_embedded_schemas_keep_kubernetes_markers():
    crd = support.load(os.path.join(support.CRD_DIR, "agents.x-k8s.io_sandboxes.yaml"))
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    pod = spec["properties"]["podTemplate"]["properties"]["spec"]
    check(pod["required"] == ["containers"], "PodSpec.containers not required")
    ctr = pod["properties"]["containers"]
    check(ctr["x-kubernetes-list-type"] == "map" and
          ctr["x-kubernetes-list-map-keys"] == ["name"], "containers list-map")
    ports = ctr["items"]["properties"]["ports"]
    check(ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"], "ports keys")
    check(ports["items"]["properties"]["protocol"]["default"] == "TCP", "protocol default")
    limits = ctr["items"]["properties"]["resources"]["properties"]["limits"]
    check(limits["additionalProperties"].get("x-kubernetes-int-or-string") is True, "quantity")
    probe_port = ctr["items"]["properties"]["readinessProbe"]["properties"]["httpGet"][
        "properties"]["port"]
    check(probe_port.get("x-kubernetes-int-or-string") is True, "IntOrString")
    check(pod["properties"]["restartPolicy"]["enum"] == ["Always", "Never", "OnFailure"],
          "restartPolicy enum")
    text = json.dumps(crd)
    for banned in ("$ref", "allOf", "oneOf", "x-kubernetes-patch", "x-zero-default"):
        check(banned not in text, f"{banned} left in the CRD")
    rules = spec["x-kubernetes-validations"]
    check(len(rules) == 1 and "oldSelf" in rules[0]["rule"] and
          rules[0]["message"] == "volumeClaimTemplates is immutable", f"CEL rule {rules}")


# --- against the API server -------------------------------------------------------


def test_discovery_lists_resources_short_names_and_subresources(api):
    found = {}
    for gv in ("/apis/agents.x-k8s.io/v1beta1", "/apis/extensions.agents.x-k8s.io/v1beta1"):
        status, body = api.json("GET", gv)
        check(status == 200, f"GET {gv}: HTTP {status}")
        for r in body["resources"]:
            found[r["name"]] = r.get("shortNames", [])
    want = {
        "sandboxes": ["sandbox"], "sandboxes/status": [],
        "sandboxtemplates": ["sandboxtemplate"],
        "sandboxclaims": ["sandboxclaim"], "sandboxclaims/status": [],
        "sandboxwarmpools": ["swp"], "sandboxwarmpools/status": [],
        "sandboxwarmpools/scale": [],
    }
    check(found == want, f"discovery: {found}")


def test_examples_are_accepted_and_round_trip(api):
    check(len(EXAMPLE_FILES) == 8, f"expected minimal+full for 4 kinds: {EXAMPLE_FILES}")
    for name in EXAMPLE_FILES:
        obj = example(name)
        create(api, obj)
        stored = get(api, obj)
        lost = support.subset(obj, stored)
        check(not lost, f"{name}: stored object lost fields: {lost}")


def test_defaults_are_applied(api):
    sb = get(api, example("sandbox-minimal.yaml"))["spec"]
    check(sb.get("operatingMode") == "Running", f"operatingMode default: {sb}")
    check(sb.get("shutdownPolicy") == "Retain", f"shutdownPolicy default: {sb}")
    check("service" not in sb and "volumeClaimTemplates" not in sb, f"unexpected: {sb}")
    tmpl = get(api, example("sandboxtemplate-minimal.yaml"))["spec"]
    check((tmpl.get("networkPolicyManagement"), tmpl.get("envVarsInjectionPolicy"),
           tmpl.get("volumeClaimTemplatesPolicy")) == ("Managed", "Disallowed", "Disallowed"),
          f"template defaults: {tmpl}")
    port = tmpl["podTemplate"]["spec"]["containers"][0]["ports"][0]
    check(port.get("protocol") == "TCP", f"ContainerPort.protocol default: {port}")
    pool = get(api, example("sandboxwarmpool-minimal.yaml"))["spec"]
    check(pool.get("replicas") == 1, f"replicas default: {pool}")
    check("updateStrategy" not in pool, f"updateStrategy must stay unset: {pool}")
    claim = get(api, example("sandboxclaim-full.yaml"))["spec"]
    check(claim["lifecycle"]["shutdownPolicy"] == "DeleteForeground", f"claim: {claim}")
    status, body = create(api, {
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
        "metadata": {"name": "defaults"},
        "spec": {"warmPoolRef": {"name": "p"}, "lifecycle": {"ttlSecondsAfterFinished": 0}}})
    check(body["spec"]["lifecycle"].get("shutdownPolicy") == "Retain", f"claim: {body}")


def test_invalid_pod_specs_are_rejected_with_the_field(api):
    base = "spec.podTemplate.spec.containers[0]"
    cases = []

    sb = minimal_sandbox("bad-no-name")
    del sb["spec"]["podTemplate"]["spec"]["containers"][0]["name"]
    cases.append((sb, [f"{base}.name", "Required value"]))

    sb = minimal_sandbox("bad-limits-type")
    sb["spec"]["podTemplate"]["spec"]["containers"][0]["resources"] = {"limits": ["2"]}
    cases.append((sb, [f"{base}.resources.limits", "must be of type object"]))

    sb = minimal_sandbox("bad-quantity")
    sb["spec"]["podTemplate"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "two cores"}}
    cases.append((sb, [f"{base}.resources.limits.cpu", "should match"]))

    sb = minimal_sandbox("bad-restart-policy")
    sb["spec"]["podTemplate"]["spec"]["restartPolicy"] = "Sometimes"
    cases.append((sb, ["spec.podTemplate.spec.restartPolicy", "Unsupported value",
                       '"Sometimes"']))

    sb = minimal_sandbox("bad-no-containers")
    sb["spec"]["podTemplate"]["spec"] = {"restartPolicy": "Never"}
    cases.append((sb, ["spec.podTemplate.spec.containers", "Required value"]))

    sb = minimal_sandbox("bad-port")
    sb["spec"]["podTemplate"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": "http"}]
    cases.append((sb, [f"{base}.ports[0].containerPort", "must be of type integer"]))

    sb = minimal_sandbox("bad-dup-container")
    ctr = sb["spec"]["podTemplate"]["spec"]["containers"][0]
    sb["spec"]["podTemplate"]["spec"]["containers"] = [ctr, copy.deepcopy(ctr)]
    cases.append((sb, ["spec.podTemplate.spec.containers[1]", "Duplicate value"]))

    sb = minimal_sandbox("bad-pvc-spec")
    sb["spec"]["volumeClaimTemplates"] = [
        {"metadata": {"name": "w"}, "spec": {"accessModes": ["ReadWriteSometimes"]}}]
    cases.append((sb, ["spec.volumeClaimTemplates[0].spec.accessModes[0]",
                       "Unsupported value"]))

    for obj, needles in cases:
        expect_rejected(api, obj, *needles)


def test_invalid_own_fields_are_rejected(api):
    sb = minimal_sandbox("bad-mode")
    sb["spec"]["operatingMode"] = "Paused"
    expect_rejected(api, sb, "spec.operatingMode", "Unsupported value")

    sb = minimal_sandbox("bad-shutdown-policy")
    sb["spec"]["shutdownPolicy"] = "DeleteForeground"
    expect_rejected(api, sb, "spec.shutdownPolicy", "Unsupported value")

    sb = minimal_sandbox("bad-shutdown-time")
    sb["spec"]["shutdownTime"] = "tomorrow"
    expect_rejected(api, sb, "spec.shutdownTime")

    sb = minimal_sandbox("bad-no-spec")
    del sb["spec"]
    expect_rejected(api, sb, "spec", "Required value")

    sb = minimal_sandbox("bad-no-pod-template")
    sb["spec"] = {"service": True}
    expect_rejected(api, sb, "spec.podTemplate", "Required value")

    pool = renamed(example("sandboxwarmpool-minimal.yaml"), "bad-replicas")
    pool["spec"]["replicas"] = -1
    expect_rejected(api, pool, "spec.replicas", "greater than or equal to 0")

    pool = renamed(example("sandboxwarmpool-minimal.yaml"), "bad-strategy")
    pool["spec"]["updateStrategy"] = {"type": "RollingUpdate"}
    expect_rejected(api, pool, "spec.updateStrategy.type", "Unsupported value")

    pool = renamed(example("sandboxwarmpool-minimal.yaml"), "bad-no-ref")
    pool["spec"]["sandboxTemplateRef"] = {}
    expect_rejected(api, pool, "spec.sandboxTemplateRef.name", "Required value")

    claim = renamed(example("sandboxclaim-minimal.yaml"), "bad-no-pool")
    claim["spec"] = {"lifecycle": {"shutdownPolicy": "Delete"}}
    expect_rejected(api, claim, "spec.warmPoolRef", "Required value")

    claim = renamed(example("sandboxclaim-full.yaml"), "bad-env")
    claim["spec"]["env"] = [{"name": "A"}]
    expect_rejected(api, claim, "spec.env[0].value", "Required value")

    claim = renamed(example("sandboxclaim-full.yaml"), "bad-ttl")
    claim["spec"]["lifecycle"]["ttlSecondsAfterFinished"] = -5
    expect_rejected(api, claim, "spec.lifecycle.ttlSecondsAfterFinished")

    tmpl = renamed(example("sandboxtemplate-minimal.yaml"), "bad-policy")
    tmpl["spec"]["envVarsInjectionPolicy"] = "Sometimes"
    expect_rejected(api, tmpl, "spec.envVarsInjectionPolicy", "Unsupported value")

    tmpl = renamed(example("sandboxtemplate-full.yaml"), "bad-netpol")
    tmpl["spec"]["networkPolicy"]["egress"][0]["ports"][0]["protocol"] = "ICMP"
    expect_rejected(api, tmpl, "spec.networkPolicy.egress[0].ports[0].protocol")


def test_unknown_fields_are_pruned(api):
    sb = minimal_sandbox("pruned")
    sb["spec"]["notAField"] = 1
    sb["spec"]["podTemplate"]["spec"]["containers"][0]["notAField"] = "x"
    _, body = create(api, sb)
    check("notAField" not in json.dumps(body), f"unknown field kept: {body['spec']}")


def test_status_conditions_are_validated(api):
    sb = minimal_sandbox("status-check")
    create(api, sb)
    good = {"type": "Ready", "status": "True", "reason": "DependenciesReady",
            "message": "Pod is Ready", "lastTransitionTime": "2026-01-01T00:00:00Z",
            "observedGeneration": 1}
    bad = [
        (dict(good, status="Maybe"), "status.conditions[0].status"),
        (dict(good, reason="not a reason"), "status.conditions[0].reason"),
        ({k: v for k, v in good.items() if k != "message"}, "status.conditions[0].message"),
        (dict(good, observedGeneration=-1), "status.conditions[0].observedGeneration"),
    ]
    for cond, needle in bad:
        code, body = api.json("PATCH", path_of(sb) + "/status",
                              {"status": {"conditions": [cond]}}, content_type=MERGE)
        check(code == 422 and needle in message(body),
              f"condition {cond} accepted or unclear: HTTP {code}: {message(body)}")
    code, body = api.json("PATCH", path_of(sb) + "/status",
                          {"status": {"conditions": [good, dict(good, reason="Other")]}},
                          content_type=MERGE)
    check(code == 422 and "Duplicate value" in message(body),
          f"duplicate condition type: HTTP {code}: {message(body)}")
    patch_status(api, sb, {"conditions": [good]})


def test_status_is_a_subresource(api):
    sb = minimal_sandbox("status-sub")
    sb["status"] = {"service": "ignored"}
    _, body = create(api, sb)
    check("status" not in body or "service" not in body["status"],
          f"status written through the main resource: {body.get('status')}")
    patch_status(api, sb, {"service": "status-sub", "podIPs": ["10.0.0.7"], "nodeName": "n1"})
    body = get(api, sb)
    check(body["status"] == {"service": "status-sub", "podIPs": ["10.0.0.7"], "nodeName": "n1"},
          f"status: {body['status']}")


def table(api, kind):
    code, body = api.json("GET", support.collection(kind), accept=TABLE)
    check(code == 200 and body.get("kind") == "Table", f"table of {kind}: HTTP {code}")
    cols = [c["name"] for c in body["columnDefinitions"]]
    rows = {r["object"]["metadata"]["name"]: dict(zip(cols, r["cells"])) for r in body["rows"]}
    return cols, rows


def test_printer_columns(api):
    sb = minimal_sandbox("table-sb")
    create(api, sb)
    patch_status(api, sb, {"conditions": [
        {"type": "Ready", "status": "False", "reason": "DependenciesNotReady",
         "message": "Pod does not exist", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    cols, rows = table(api, "Sandbox")
    check(cols == ["Name", "Ready", "Reason", "Age"], f"Sandbox columns {cols}")
    row = rows["table-sb"]
    check(row["Ready"] == "False" and row["Reason"] == "DependenciesNotReady", f"row {row}")

    claim = renamed(example("sandboxclaim-minimal.yaml"), "table-claim")
    create(api, claim)
    patch_status(api, claim, {
        "sandbox": {"name": "python-pool-x7k2p", "podIPs": ["10.0.0.9"]},
        "conditions": [{"type": "Ready", "status": "True", "reason": "SandboxReady",
                        "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    cols, rows = table(api, "SandboxClaim")
    check(cols == ["Name", "Ready", "Sandbox", "Reason", "Age"], f"claim columns {cols}")
    row = rows["table-claim"]
    check((row["Ready"], row["Sandbox"], row["Reason"]) ==
          ("True", "python-pool-x7k2p", "SandboxReady"), f"claim row {row}")

    pool = renamed(example("sandboxwarmpool-full.yaml"), "table-pool")
    create(api, pool)
    patch_status(api, pool, {"replicas": 3, "readyReplicas": 2})
    cols, rows = table(api, "SandboxWarmPool")
    check(cols == ["Name", "Ready", "Desired", "Age"], f"pool columns {cols}")
    row = rows["table-pool"]
    check((row["Ready"], row["Desired"]) == (2, 3), f"pool row {row}")

    cols, _ = table(api, "SandboxTemplate")
    check(cols == ["Name", "Age"], f"template columns {cols}")


def test_warm_pool_scale_subresource(api):
    pool = renamed(example("sandboxwarmpool-minimal.yaml"), "scaled")
    create(api, pool)
    patch_status(api, pool, {"replicas": 1, "readyReplicas": 1,
                             "selector": "agents.x-k8s.io/warm-pool-sandbox=0a1b2c3d"})
    code, scale = api.json("GET", path_of(pool) + "/scale")
    check(code == 200, f"GET scale: HTTP {code}: {message(scale)}")
    check(scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1, f"scale {scale}")
    check(scale["status"] == {"replicas": 1,
                              "selector": "agents.x-k8s.io/warm-pool-sandbox=0a1b2c3d"},
          f"scale status {scale['status']}")
    scale["spec"]["replicas"] = 7
    code, body = api.json("PUT", path_of(pool) + "/scale", scale)
    check(code == 200, f"PUT scale: HTTP {code}: {message(body)}")
    check(get(api, pool)["spec"]["replicas"] == 7, "scale did not update spec.replicas")
    code, body = api.json("PATCH", path_of(pool) + "/scale", {"spec": {"replicas": 0}},
                          content_type=MERGE)
    check(code == 200 and get(api, pool)["spec"]["replicas"] == 0, f"scale to 0: HTTP {code}")
    code, body = api.json("PATCH", path_of(pool) + "/scale", {"spec": {"replicas": -1}},
                          content_type=MERGE)
    check(code == 422, f"negative scale accepted: HTTP {code}: {message(body)}")
    code, body = api.json("GET", support.collection("Sandbox") + "/table-sb/scale")
    check(code == 404, f"Sandbox must have no scale subresource: HTTP {code}")


def update_spec(api, obj, mutate):
    cur = get(api, obj)
    mutate(cur["spec"])
    return api.json("PUT", path_of(obj), cur)


def test_volume_claim_templates_are_immutable(api):
    sb = renamed(example("sandbox-full.yaml"), "vct")
    create(api, sb)

    def grow(spec):
        spec["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] = "20Gi"

    def drop(spec):
        del spec["volumeClaimTemplates"]

    def add(spec):
        spec["volumeClaimTemplates"].append(copy.deepcopy(spec["volumeClaimTemplates"][0]))
        spec["volumeClaimTemplates"][1]["metadata"]["name"] = "cache"

    for mutate in (grow, drop, add):
        code, body = update_spec(api, sb, mutate)
        check(code == 422 and "volumeClaimTemplates is immutable" in message(body),
              f"{mutate.__name__}: HTTP {code}: {message(body)}")

    def suspend(spec):
        spec["operatingMode"] = "Suspended"

    code, body = update_spec(api, sb, suspend)
    check(code == 200, f"unrelated update rejected: HTTP {code}: {message(body)}")

    plain = minimal_sandbox("vct-none")
    create(api, plain)

    def attach(spec):
        spec["volumeClaimTemplates"] = copy.deepcopy(sb["spec"]["volumeClaimTemplates"])

    code, body = update_spec(api, plain, attach)
    check(code == 422 and "volumeClaimTemplates is immutable" in message(body),
          f"adding volumeClaimTemplates: HTTP {code}: {message(body)}")


def test_kubectl_apply_and_get(api):
    kubectl = os.path.join(os.environ.get("AS_K8S_BINDIR",
                                          os.path.join(support.ROOT, ".cache", "bin")), "kubectl")
    if not os.access(kubectl, os.X_OK):
        raise support.Skip(f"{kubectl} not built")
    with tempfile.TemporaryDirectory() as tmp:
        kc = os.path.join(tmp, "kubeconfig")
        api.write_kubeconfig(kc)

        def run(*args):
            r = subprocess.run([kubectl, "--kubeconfig", kc, *args], capture_output=True,
                               text=True, timeout=60)
            check(r.returncode == 0, f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}")
            return r.stdout

        # Client-side apply keeps the whole CRD in an annotation limited to 256 KiB.
        run("apply", "-f", support.CRD_DIR)
        run("apply", "-f", os.path.join(support.EXAMPLES, "sandboxwarmpool-full.yaml"))
        header = run("get", "swp", "python-full-pool").splitlines()[0].split()
        check(header == ["NAME", "READY", "DESIRED", "AGE"], f"kubectl get swp: {header}")
        explained = run("explain", "sandbox.spec.operatingMode")
        check("Suspended" in explained, f"kubectl explain: {explained}")


def test_go_client_nulls_are_accepted(api):
    # Go clients serialize zero ObjectMeta times and nil pointers as null; they
    # must be dropped, not rejected.
    sb = minimal_sandbox("go-nulls")
    tmpl = sb["spec"]["podTemplate"]
    tmpl["metadata"] = {"creationTimestamp": None, "labels": {"a": "b"}}
    ctr = tmpl["spec"]["containers"][0]
    ctr["resources"] = {}
    ctr["securityContext"] = None
    tmpl["spec"]["volumes"] = [{"name": "eph", "ephemeral": {"volumeClaimTemplate": {
        "metadata": {"creationTimestamp": None, "labels": {"x": "y"}},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}}}}]
    _, body = create(api, sb)
    stored = body["spec"]["podTemplate"]
    check(stored["metadata"] == {"labels": {"a": "b"}}, f"pod metadata {stored['metadata']}")
    check("securityContext" not in stored["spec"]["containers"][0], "null kept")
    eph = stored["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"]["metadata"]
    check(eph == {"labels": {"x": "y"}}, f"ephemeral claim metadata {eph}")
