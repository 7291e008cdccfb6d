# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the CRD tests: loading manifests, resource paths, CRUD."""

import copy
import glob
import os
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CRD_DIR = os.path.join(ROOT, "api", "crds")
EXAMPLES = os.path.join(ROOT, "api", "examples")
NAMESPACE = "default"
CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

PLURALS = {
    "Sandbox": "sandboxes",
    "SandboxTemplate": "sandboxtemplates",
    "SandboxClaim": "sandboxclaims",
    "SandboxWarmPool": "sandboxwarmpools",
}


class Failure(AssertionError):
    pass


class Skip(Exception):
    """Raised by a test whose prerequisite is missing (reported, not counted as passed)."""


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def crd_files():
    return sorted(glob.glob(os.path.join(CRD_DIR, "*.yaml")))


def example(name):
    return load(os.path.join(EXAMPLES, name))


def collection(obj_or_kind, ns=NAMESPACE):
    """API path of the collection of a kind (or of an object's kind)."""
    if isinstance(obj_or_kind, dict):
        api_version, kind = obj_or_kind["apiVersion"], obj_or_kind["kind"]
    else:
        kind = obj_or_kind
        group = "agents.x-k8s.io" if kind == "Sandbox" else "extensions.agents.x-k8s.io"
        api_version = group + "/v1beta1"
    return f"/apis/{api_version}/namespaces/{ns}/{PLURALS[kind]}"


def path_of(obj, ns=NAMESPACE):
    return f"{collection(obj, ns)}/{obj['metadata']['name']}"


def renamed(obj, name):
    out = copy.deepcopy(obj)
    out["metadata"]["name"] = name
    return out


def create(api, obj, expect=201):
    status, body = api.json("POST", collection(obj), obj)
    if expect is not None:
        check(status == expect, f"create {obj['kind']}/{obj['metadata']['name']}: "
              f"HTTP {status}, want {expect}: {message(body)}")
    return status, body


def get(api, obj):
    status, body = api.json("GET", path_of(obj))
    check(status == 200, f"get {path_of(obj)}: HTTP {status}: {message(body)}")
    return body


def message(body):
    if isinstance(body, dict):
        return body.get("message") or body.get("raw") or str(body)[:500]
    return str(body)[:500]


def install_crds(api, timeout=60):
    """Create every CRD of api/crds and wait until all are Established."""
    names = []
    for path in crd_files():
        crd = load(path)
        status, body = api.json("POST", CRD_API, crd)
        if status != 201:
            raise Failure(f"create CRD {path}: HTTP {status}: {message(body)}")
        names.append(crd["metadata"]["name"])
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in sorted(pending):
            status, body = api.json("GET", f"{CRD_API}/{name}")
            conds = ((body or {}).get("status") or {}).get("conditions") or []
            conds = {c["type"]: c["status"] for c in conds}
            if conds.get("Established") == "True" and conds.get("NamesAccepted") == "True":
                pending.discard(name)
        if pending:
            time.sleep(0.1)
    if pending:
        raise Failure(f"CRDs not Established after {timeout}s: {sorted(pending)}")
    wait_discovery(api, deadline)
    return names


def wait_discovery(api, deadline):
    """Wait until the new resources are served (discovery lags Established a little)."""
    for kind in PLURALS:
        while True:
            status, _ = api.json("GET", collection(kind))
            if status == 200:
                break
            if time.monotonic() > deadline:
                raise Failure(f"{kind} not served: HTTP {status}")
            time.sleep(0.1)


def subset(want, have, path=""):
    """Return a list of paths where `want` is not contained in `have`."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [f"{path or '.'}: want object, have {type(have).__name__}"]
        out = []
        for k, v in want.items():
            if k not in have:
                out.append(f"{path}.{k}: missing (pruned?)")
            else:
                out.extend(subset(v, have[k], f"{path}.{k}"))
        return out
    if isinstance(want, list):
        if not isinstance(have, list) or len(want) != len(have):
            return [f"{path}: list differs"]
        out = []
        for i, (w, h) in enumerate(zip(want, have)):
            out.extend(subset(w, h, f"{path}[{i}]"))
        return out
    return [] if want == have else [f"{path}: want {want!r}, have {have!r}"]
