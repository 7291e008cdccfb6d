"""Kubernetes-side logic without I/O: resource paths, the objects the SDK creates, the
readiness decisions taken on watch events, and the mapping of API errors. The sync and
async clients share all of it."""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import httpx

from .errors import (
    AuthError,
    NotFoundError,
    RequestError,
    SandboxError,
    SandboxFailedError,
    SandboxSuspendedError,
)
from .models import ConfigMapKeyRef, EnvValue, SandboxInfo, SecretKeyRef

CORE_GROUP = "agents.x-k8s.io"
EXT_GROUP = "extensions.agents.x-k8s.io"
VERSION = "v1beta1"

LABEL_CREATED_BY = "agents.x-k8s.io/created-by"
CREATED_BY = "python-client"
ANN_CLIENT_REQUESTED = "agents.x-k8s.io/client-first-requested-at"
ANN_POD_NAME = "agents.x-k8s.io/pod-name"

RESOURCES: dict[str, tuple[str, str]] = {
    "sandboxes": (CORE_GROUP, "Sandbox"),
    "sandboxclaims": (EXT_GROUP, "SandboxClaim"),
    "sandboxtemplates": (EXT_GROUP, "SandboxTemplate"),
    "sandboxwarmpools": (EXT_GROUP, "SandboxWarmPool"),
}

# Ready=False reasons after which a claim never becomes Ready.
CLAIM_TERMINAL = frozenset(
    {
        "TemplateNotFound",
        "WarmPoolNotFound",
        "InvalidMetadata",
        "EnvVarsInjectionRejected",
        "VolumeClaimTemplatesError",
        "ClaimExpired",
        "ClaimTimeout",
        "SandboxExpired",
    }
)
SANDBOX_TERMINAL = frozenset({"SandboxExpired"})

_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def path(resource: str, namespace: str, name: str = "") -> str:
    """API path of a namespaced agent-sandbox resource (or of its collection)."""
    group = RESOURCES[resource][0]
    p = f"/apis/{group}/{VERSION}/namespaces/{quote(namespace, safe='')}/{resource}"
    return f"{p}/{quote(name, safe='')}" if name else p


def pod_proxy_base(namespace: str, pod: str, port: int) -> str:
    """Path prefix of the API server's proxy to port on pod."""
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}:{port}/proxy"


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def shutdown_at(ttl: float | timedelta | None, shutdown_time: datetime | None) -> str | None:
    """An absolute RFC 3339 UTC expiry from a TTL or a datetime (naive means UTC)."""
    if ttl is not None and shutdown_time is not None:
        raise ValueError("give ttl or shutdown_time, not both")
    if ttl is not None:
        secs = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
        if isinstance(ttl, bool) or secs <= 0:
            raise ValueError("ttl must be a positive number of seconds")
        shutdown_time = datetime.now(timezone.utc) + timedelta(seconds=secs)
    if shutdown_time is None:
        return None
    if shutdown_time.tzinfo is None:
        shutdown_time = shutdown_time.replace(tzinfo=timezone.utc)
    return shutdown_time.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_labels(labels: dict[str, str] | None, what: str = "labels") -> dict[str, str]:
    """Validates Kubernetes label syntax client-side, for a clear error before the API call."""
    out: dict[str, str] = {}
    for k, v in (labels or {}).items():
        prefix, _, name = k.rpartition("/")
        ok = bool(name) and len(name) <= 63 and _LABEL_NAME.match(name) is not None
        if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
            ok = False
        if not ok:
            raise ValueError(f"{what}: invalid key {k!r}")
        if len(v) > 63 or not _LABEL_NAME.match(v):
            raise ValueError(f"{what}: invalid value {v!r} for {k!r}")
        out[k] = v
    return out


def random_name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def env_entry(name: str, value: EnvValue) -> dict[str, Any]:
    """One Kubernetes env entry: {name, value} or {name, valueFrom: {secretKeyRef |
    configMapKeyRef: {name, key}}}."""
    if isinstance(value, SecretKeyRef):
        return {"name": name, "valueFrom": {"secretKeyRef": {"name": value.name, "key": value.key}}}
    if isinstance(value, ConfigMapKeyRef):
        return {"name": name, "valueFrom": {"configMapKeyRef": {"name": value.name, "key": value.key}}}
    if not isinstance(value, str):
        raise TypeError(f"env {name}: a str, SecretKeyRef or ConfigMapKeyRef, not {type(value).__name__}")
    return {"name": name, "value": value}


def claim_body(
    name: str,
    pool: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    env: Mapping[str, EnvValue] | None = None,
    pod_labels: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    shutdown: str | None = None,
) -> dict[str, Any]:
    """The SandboxClaim that create(pool=...) submits."""
    lab = check_labels(labels)
    lab[LABEL_CREATED_BY] = CREATED_BY
    ann = dict(annotations or {})
    ann[ANN_CLIENT_REQUESTED] = now_rfc3339()
    spec: dict[str, Any] = {"warmPoolRef": {"name": pool}}
    if env:
        spec["env"] = [env_entry(k, v) for k, v in env.items()]
    if pod_labels or pod_annotations:
        meta: dict[str, Any] = {}
        if pod_labels:
            meta["labels"] = check_labels(pod_labels, "pod_labels")
        if pod_annotations:
            meta["annotations"] = dict(pod_annotations)
        spec["additionalPodMetadata"] = meta
    if shutdown:
        spec["lifecycle"] = {"shutdownTime": shutdown, "shutdownPolicy": "Delete"}
    return {
        "apiVersion": f"{EXT_GROUP}/{VERSION}",
        "kind": "SandboxClaim",
        "metadata": {"name": name, "labels": lab, "annotations": ann},
        "spec": spec,
    }


def _with_env(pod_spec: dict[str, Any], env: Mapping[str, EnvValue]) -> dict[str, Any]:
    """pod_spec with env set (overriding same names) on its first container."""
    spec = json.loads(json.dumps(pod_spec))
    containers = spec.get("containers") or []
    if not containers:
        raise ValueError("the pod spec has no containers")
    c = containers[0]
    cur = [e for e in c.get("env") or [] if e.get("name") not in env]
    c["env"] = cur + [env_entry(k, v) for k, v in env.items()]
    return dict(spec)


def sandbox_body(
    name: str,
    pod_spec: dict[str, Any],
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    env: Mapping[str, EnvValue] | None = None,
    pod_labels: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    shutdown: str | None = None,
    template: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Sandbox that create(template=...) or create(pod_spec=...) submits. With a
    template object, its podTemplate, volumeClaimTemplates, service and idlePolicy are
    copied."""
    lab = check_labels(labels)
    lab[LABEL_CREATED_BY] = CREATED_BY
    ann = dict(annotations or {})
    ann[ANN_CLIENT_REQUESTED] = now_rfc3339()
    pod_meta: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    if template is not None:
        tspec = template.get("spec") or {}
        pt = tspec.get("podTemplate") or {}
        pod_spec = dict(pt.get("spec") or {})
        pod_spec.setdefault("automountServiceAccountToken", False)
        pod_meta = json.loads(json.dumps(pt.get("metadata") or {}))
        if tspec.get("volumeClaimTemplates"):
            spec["volumeClaimTemplates"] = tspec["volumeClaimTemplates"]
        if "service" in tspec:
            spec["service"] = tspec["service"]
        if tspec.get("idlePolicy"):  # extension: meant to be copied (docs/idle.md)
            spec["idlePolicy"] = dict(tspec["idlePolicy"])
    if env:
        pod_spec = _with_env(pod_spec, env)
    if pod_labels:
        pod_meta.setdefault("labels", {}).update(check_labels(pod_labels, "pod_labels"))
    if pod_annotations:
        pod_meta.setdefault("annotations", {}).update(pod_annotations)
    spec["podTemplate"] = {"spec": pod_spec}
    if pod_meta:
        spec["podTemplate"]["metadata"] = pod_meta
    if shutdown:
        spec["shutdownTime"] = shutdown
        spec["shutdownPolicy"] = "Delete"
    return {
        "apiVersion": f"{CORE_GROUP}/{VERSION}",
        "kind": "Sandbox",
        "metadata": {"name": name, "labels": lab, "annotations": ann},
        "spec": spec,
    }


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def claim_sandbox_name(claim: dict[str, Any]) -> str:
    sb = (claim.get("status") or {}).get("sandbox") or {}
    return str(sb.get("name") or sb.get("Name") or "")


def select_pod_ip(ips: list[str] | tuple[str, ...]) -> str | None:
    """First valid IPv4 (IPv4-mapped IPv6 normalized), else the first valid IPv6."""
    v6 = None
    for s in ips:
        try:
            ip = ipaddress.ip_address(s)
        except ValueError:
            continue
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
            return str(ip.ipv4_mapped)
        if isinstance(ip, ipaddress.IPv4Address):
            return str(ip)
        v6 = v6 or str(ip)
    return v6


def pod_name(sandbox: dict[str, Any]) -> str:
    meta = sandbox.get("metadata") or {}
    return str((meta.get("annotations") or {}).get(ANN_POD_NAME) or meta.get("name") or "")


def sandbox_info(obj: dict[str, Any], claim: str = "") -> SandboxInfo:
    meta = obj.get("metadata") or {}
    ready = condition(obj, "Ready") or {}
    st = obj.get("status") or {}
    return SandboxInfo(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        ready=ready.get("status") == "True",
        reason=str(ready.get("reason", "")),
        message=str(ready.get("message", "")),
        pod_ips=tuple(str(i) for i in st.get("podIPs") or []),
        claim=claim,
        operating_mode=str((obj.get("spec") or {}).get("operatingMode") or "Running"),
        labels=dict(meta.get("labels") or {}),
    )


@dataclass
class Wait:
    """Progress of a readiness wait: the last state seen, for a useful timeout error."""

    kind: str
    name: str
    reason: str = ""
    message: str = ""
    sandbox: str = ""
    ready: bool = False
    done: bool = False

    def describe(self) -> str:
        if not self.reason:
            return "no status reported yet"
        return f"last reason {self.reason}: {self.message}" if self.message else f"last reason {self.reason}"


def _failed(w: Wait, reason: str, message: str) -> SandboxFailedError:
    hint = {
        "TemplateNotFound": "create the SandboxTemplate the pool refers to, or fix the pool",
        "WarmPoolNotFound": "check the pool name (kubectl get sandboxwarmpools)",
        "InvalidMetadata": "fix the pod labels/annotations of the request",
        "EnvVarsInjectionRejected": "the template's envVarsInjectionPolicy forbids env; drop env",
    }.get(reason, "see kubectl describe for details")
    return SandboxFailedError(
        f"{w.kind} {w.name} failed: {reason}: {message} ({hint})",
        kind=w.kind,
        name=w.name,
        reason=reason,
        detail=message,
    )


def on_claim_event(w: Wait, etype: str, obj: dict[str, Any], need_ready: bool = True) -> None:
    """Updates w from one watch event of the claim; raises on a terminal state."""
    if etype == "DELETED":
        raise NotFoundError(f"claim {w.name} was deleted while waiting for it", kind="SandboxClaim", name=w.name)
    w.sandbox = claim_sandbox_name(obj) or w.sandbox
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("reason") == "WarmPoolNotFound":
            raise _failed(w, "WarmPoolNotFound", str(c.get("message", "")))
    fin = condition(obj, "Finished")
    if fin and fin.get("status") == "True":
        raise _failed(w, str(fin.get("reason") or "Finished"), str(fin.get("message", "")))
    ready = condition(obj, "Ready")
    if ready:
        w.reason, w.message = str(ready.get("reason", "")), str(ready.get("message", ""))
        w.ready = ready.get("status") == "True"
        if not w.ready and w.reason in CLAIM_TERMINAL:
            raise _failed(w, w.reason, w.message)
    w.done = bool(w.sandbox) and (w.ready or not need_ready)


def on_sandbox_event(w: Wait, etype: str, obj: dict[str, Any], want: str = "Ready") -> None:
    """Updates w from one watch event of the Sandbox; want is Ready or Suspended."""
    if etype == "DELETED":
        raise NotFoundError(f"sandbox {w.name} was deleted while waiting for it", kind="Sandbox", name=w.name)
    fin = condition(obj, "Finished")
    if want == "Ready" and fin and fin.get("status") == "True":
        raise _failed(w, str(fin.get("reason") or "Finished"), str(fin.get("message", "")))
    ready = condition(obj, "Ready") or {}
    w.reason, w.message = str(ready.get("reason", "")), str(ready.get("message", ""))
    w.ready = ready.get("status") == "True"
    if want == "Ready":
        if not w.ready and w.reason in SANDBOX_TERMINAL:
            raise _failed(w, w.reason, w.message)
        mode = (obj.get("spec") or {}).get("operatingMode") or "Running"
        w.done = w.ready and mode == "Running"
    else:
        sus = condition(obj, "Suspended") or {}
        w.done = sus.get("status") == "True" and not (obj.get("status") or {}).get("podIPs")


def parse_watch_line(line: str | bytes) -> tuple[str, dict[str, Any]] | None:
    """One line of a watch stream -> (type, object); None for blank lines."""
    if not line.strip():
        return None
    ev = json.loads(line)
    return str(ev.get("type", "")), dict(ev.get("object") or {})


def api_error(resp: httpx.Response, what: str) -> SandboxError:
    """Maps a failed API server response to an exception."""
    try:
        body = resp.json()
        msg = str(body.get("message") or resp.text)
        reason = str(body.get("reason") or "")
    except (ValueError, AttributeError):
        msg, reason = resp.text[:500], ""
    s = resp.status_code
    if s == 404:
        return NotFoundError(f"{what}: not found ({msg})", name=what)
    if s == 401:
        return AuthError(f"{what}: the API server rejected the credentials ({msg}); check the kubeconfig", status=s)
    if s == 403:
        return AuthError(f"{what}: forbidden ({msg}); grant RBAC for this call", status=s)
    return RequestError(f"{what}: HTTP {s} {reason}: {msg}", status=s, code=reason)


# ---- resume on traffic (docs/idle.md, "what an SDK must do") ------------------------

ANNOTATION_IDLE_SUSPENDED_GENERATION = "agents.x-k8s.io/idle-suspended-generation"

RESUME_PATCH: dict[str, Any] = {
    "spec": {"operatingMode": "Running"},
    "metadata": {"annotations": {ANNOTATION_IDLE_SUSPENDED_GENERATION: None}},
}
"""The merge patch of a resume on traffic (the router's: it also clears the annotation)."""

RESUME_TIMEOUT = 120.0
"""Default bound of the wait for Ready after a resume on traffic (the router's hold)."""


def idle_action(obj: Mapping[str, Any]) -> str:
    """What a data-plane call must do first for this Sandbox object: "none" (go ahead),
    "resume" (suspended, its idle policy resumes on traffic), "refuse" (suspended,
    without a policy or with resumeOnTraffic false) or "wait" (Running but not Ready
    under an idle policy: someone else is resuming it)."""
    spec = obj.get("spec") or {}
    policy = spec.get("idlePolicy")
    if spec.get("operatingMode") == "Suspended":
        if isinstance(policy, Mapping) and policy.get("resumeOnTraffic", True) is not False:
            return "resume"
        return "refuse"
    ready = condition(dict(obj), "Ready") or {}
    if policy and not (ready.get("status") == "True" and (obj.get("status") or {}).get("podIPs")):
        return "wait"
    return "none"


def suspended_error(namespace: str, name: str, obj: Mapping[str, Any]) -> SandboxSuspendedError:
    """The error of a call to a suspended Sandbox that traffic may not resume."""
    has_policy = bool((obj.get("spec") or {}).get("idlePolicy"))
    if has_policy:
        msg = (
            f"sandbox {namespace}/{name} is suspended and its idle policy does not resume it on traffic "
            "(spec.idlePolicy.resumeOnTraffic is false); set spec.operatingMode to Running to resume it "
            "(Sandbox.resume())"
        )
    else:
        msg = f"sandbox {namespace}/{name} is suspended; resume it explicitly (Sandbox.resume())"
    return SandboxSuspendedError(msg, namespace=namespace, name=name, has_policy=has_policy)


def pod_gone(resp: httpx.Response, via_kube: bool) -> bool:
    """Whether a failed data-plane answer says the pod did not answer at all (so the
    Sandbox may have been suspended meanwhile)."""
    if resp.status_code in (502, 503):
        return True
    if resp.status_code == 404 and via_kube:
        try:
            return bool(resp.json().get("kind") == "Status")
        except (ValueError, AttributeError):
            return False
    return False
