"""Kubernetes-side logic without I/O: resource paths and API requests, the objects the
SDK creates and the checks of create()'s arguments, the readiness decisions taken on
watch events and the watch loop around them, and the mapping of API errors. The sync
and async clients share all of it."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import ipaddress
import json
import logging
import re
import secrets
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import httpx

from ._fasthttp import MAX_ANSWER, MAX_LINE, take_lines
from ._kubeconfig import KubeConfig
from .errors import (
    AuthError,
    NotFoundError,
    RequestError,
    SandboxConnectionError,
    SandboxError,
    SandboxFailedError,
    SandboxSuspendedError,
    SandboxTimeoutError,
)
from .models import ConfigMapKeyRef, EnvValue, SandboxInfo, SecretKeyRef

CORE_GROUP = "agents.x-k8s.io"
EXT_GROUP = "extensions.agents.x-k8s.io"
VERSION = "v1beta1"

LABEL_CREATED_BY = "agents.x-k8s.io/created-by"
CREATED_BY = "python-client"
ANN_CLIENT_REQUESTED = "agents.x-k8s.io/client-first-requested-at"
ANN_POD_NAME = "agents.x-k8s.io/pod-name"
LABEL_CLAIM_UID = "agents.x-k8s.io/claim-uid"

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
        ok = bool(name) and len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None
        if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
            ok = False
        if not ok:
            raise ValueError(f"{what}: invalid key {k!r}")
        if len(v) > 63 or not _LABEL_NAME.fullmatch(v):
            raise ValueError(f"{what}: invalid value {v!r} for {k!r}")
        out[k] = v
    return out


def random_name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def check_name(name: str, what: str = "name") -> str:
    """name, when it can name a Sandbox or SandboxClaim (a DNS-1123 subdomain: lower-case
    letters, digits, '-' and '.', at most 253 characters); else ValueError, before any
    request. For the name create() is given."""
    check_path_name(name, what)
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        raise ValueError(f"{what} {name!r} is not a valid object name (a DNS-1123 subdomain)")
    return name


_PATH_UNSAFE = re.compile(r"[/?#%\\\s\x00-\x1f\x7f]")


def check_path_name(name: str, what: str = "name") -> str:
    """name, unless it would address something other than one object of the collection:
    the empty name (the collection itself: a GET lists it, a DELETE deletes every object
    in it), "." or "..", or a name with "/", "?", "#", "%", a backslash, whitespace or a
    control character (a URL other than the object's); else ValueError, before any
    request. Other invalid names reach the server, whose 404 is the documented answer
    (NotFoundError; False from delete)."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError(f"{what} is empty")
    if name in (".", "..") or _PATH_UNSAFE.search(name):
        raise ValueError(f"{what} {name!r} cannot name an object (it would change the request's URL)")
    return name


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


def _metadata(name: str, labels: dict[str, str] | None, annotations: dict[str, str] | None) -> dict[str, Any]:
    """The metadata of an object the SDK creates: the caller's labels (checked) and
    annotations, plus the created-by label (unless the caller set one) and the
    client-request timestamp."""
    lab = check_labels(labels)
    lab.setdefault(LABEL_CREATED_BY, CREATED_BY)
    ann = dict(annotations or {})
    ann[ANN_CLIENT_REQUESTED] = now_rfc3339()
    return {"name": name, "labels": lab, "annotations": ann}


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
    meta = _metadata(name, labels, annotations)
    spec: dict[str, Any] = {"warmPoolRef": {"name": pool}}
    if env:
        spec["env"] = [env_entry(k, v) for k, v in env.items()]
    if pod_labels or pod_annotations:
        pod_meta: dict[str, Any] = {}
        if pod_labels:
            pod_meta["labels"] = check_labels(pod_labels, "pod_labels")
        if pod_annotations:
            pod_meta["annotations"] = dict(pod_annotations)
        spec["additionalPodMetadata"] = pod_meta
    if shutdown:
        spec["lifecycle"] = {"shutdownTime": shutdown, "shutdownPolicy": "Delete"}
    return {"apiVersion": f"{EXT_GROUP}/{VERSION}", "kind": "SandboxClaim", "metadata": meta, "spec": spec}


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
    meta = _metadata(name, labels, annotations)
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
    return {"apiVersion": f"{CORE_GROUP}/{VERSION}", "kind": "Sandbox", "metadata": meta, "spec": spec}


@dataclass
class CreatePlan:
    """What create() submits once its arguments are checked: a SandboxClaim (``pool``) or
    a Sandbox (``template`` or ``pod_spec``)."""

    pool: str | None
    pod_spec: Mapping[str, Any] | None
    name: str | None
    common: dict[str, Any]

    def body(self, template: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """(resource, object) to create; template is the SandboxTemplate object, if any."""
        if self.pool is not None:
            return "sandboxclaims", claim_body(self.name or random_name("sandbox-claim"), self.pool, **self.common)
        name = self.name or random_name("sandbox")
        return "sandboxes", sandbox_body(name, dict(self.pod_spec or {}), template=template, **self.common)


def plan_create(
    pool: str | None,
    template: str | None,
    pod_spec: Mapping[str, Any] | None,
    *,
    name: str | None,
    env: Mapping[str, EnvValue] | None,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
    pod_labels: Mapping[str, str] | None,
    pod_annotations: Mapping[str, str] | None,
    ttl: float | timedelta | None,
    shutdown_time: datetime | None,
) -> CreatePlan:
    """Checks the arguments of create() (exactly one source, a valid expiry, a non-empty
    pool name) before any API call."""
    if sum(x is not None for x in (pool, template, pod_spec)) != 1:
        raise ValueError("give exactly one of pool, template or pod_spec")
    shutdown = shutdown_at(ttl, shutdown_time)
    common: dict[str, Any] = dict(
        labels=dict(labels or {}),
        annotations=dict(annotations or {}),
        env=dict(env or {}),
        pod_labels=dict(pod_labels or {}),
        pod_annotations=dict(pod_annotations or {}),
        shutdown=shutdown,
    )
    if pool is not None and not pool:
        raise ValueError("pool is empty")
    if name == "":
        name = None  # as Go's WithName(""): the SDK draws the name
    if name is not None:
        check_name(name)
    return CreatePlan(pool, pod_spec, name, common)


CREATE_NAME_TRIES = 3
"""How many names a create() draws (the first, and again after each AlreadyExists) when it
names the object itself."""


def name_taken(e: BaseException) -> bool:
    """Whether a create was refused because an object of that name exists (409
    AlreadyExists): under a name the SDK drew, someone else's object, never deleted."""
    return isinstance(e, RequestError) and e.status == 409 and e.code == "AlreadyExists"


class SendMark:
    """Whether a call's request may have left: the kube clients call it just before they
    hand the request to a connection (a lean one, or httpx). Until then, nothing of it
    reached the server, whatever ended the call: a task cancelled, or Ctrl-C, while it
    waited for a connection or a client certificate."""

    __slots__ = ("may_have_left",)

    def __init__(self) -> None:
        self.may_have_left = False

    def __call__(self) -> None:
        self.may_have_left = True


def create_unsettled(e: BaseException, mark: SendMark | None = None) -> bool:
    """Whether a create that raised e may have stored the object: no answer (a cut
    connection, a timeout, Ctrl-C, a cancelled task, an answer that could not be read)
    or a server error (5xx: an API server timeout after etcd took the write). A 4xx
    refusal stored nothing, and neither did a POST never sent (not_sent, or mark, the
    create's SendMark, never set)."""
    if mark is not None and not mark.may_have_left:
        return False
    if isinstance(e, RequestError):
        return e.status >= 500
    return not isinstance(e, (AuthError, NotFoundError)) and not not_sent(e)


# httpx's errors of a request that never left: no connection could be made (refused,
# DNS, a failed TLS handshake, the connect timeout) or none came free in the pool.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def not_sent(e: BaseException) -> bool:
    """Whether a call that raised e certainly never sent its request: the kube clients
    raise SandboxConnectionError from one of httpx's _NOT_SENT errors then (a lean
    connection that cannot connect is not used; httpx tries instead)."""
    return isinstance(e, _NOT_SENT) or (isinstance(e, SandboxConnectionError) and isinstance(e.__cause__, _NOT_SENT))


def uid_of(obj: Mapping[str, Any] | None) -> str:
    """An object's metadata.uid ("" when unknown)."""
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


CLEANUP_TIMEOUT = 30.0
"""Bound (seconds) of the cleanup of a create whose answer was lost: its looks by name
(LOST_CREATE_LOOKS) end by then (each API call is bounded by the client's timeout)."""

LOST_CREATE_LOOKS: tuple[float, ...] = (0.25, 0.75, 2.0)
"""The waits, one after the other, before each look by name for a create without an
answer that lands after its cleanup's DELETE (the POST was still in the API server, so
the DELETE found nothing): looks 0.25, 1 and 3 s after it, as the Go SDK's. Tests
shorten it."""


def lost_create_waits(deadline: float) -> Iterator[float]:
    """The waits of LOST_CREATE_LOOKS whose look still comes before deadline (a
    time.monotonic() value: the start of the cleanup plus CLEANUP_TIMEOUT)."""
    for wait in LOST_CREATE_LOOKS:
        if time.monotonic() + wait >= deadline:
            return
        yield wait


def created_names(resource: str, body: Mapping[str, Any]) -> tuple[str, str]:
    """(sandbox name, claim name) of a handle on what create() submitted: a claim's
    sandbox is not known until the claim is bound."""
    name = str(body["metadata"]["name"])
    return ("", name) if resource == "sandboxclaims" else (name, "")


def template_not_found(ns: str, name: str) -> NotFoundError:
    return NotFoundError(
        f"SandboxTemplate {ns}/{name} not found; list them with kubectl get sandboxtemplates -n {ns}",
        kind="SandboxTemplate",
        name=name,
    )


def no_such_sandbox(ns: str, name: str) -> NotFoundError:
    """The error of get(name) when neither a Sandbox nor a SandboxClaim has that name."""
    return NotFoundError(f"no Sandbox or SandboxClaim named {name} in namespace {ns}", kind="Sandbox", name=name)


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


def owner_claim(obj: Mapping[str, Any]) -> str:
    """The SandboxClaim that owns a Sandbox ("" for none)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "SandboxClaim":
            return str(ref.get("name", ""))
    return ""


def owner_claim_uid(obj: Mapping[str, Any] | None, claim: str) -> str:
    """The UID of the SandboxClaim called claim in a Sandbox's ownerReferences ("" for
    none): the claim's own UID, which the claim's controller set there."""
    for ref in ((obj or {}).get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "SandboxClaim" and ref.get("name") == claim:
            return str(ref.get("uid") or "")
    return ""


def sandbox_infos(listing: Mapping[str, Any]) -> list[SandboxInfo]:
    """The SandboxInfo of each Sandbox of a list answer."""
    return [sandbox_info(o, owner_claim(o)) for o in listing.get("items") or []]


def item_names(listing: Mapping[str, Any]) -> list[str]:
    """The names of the objects of a list answer."""
    return [str(o["metadata"]["name"]) for o in listing.get("items") or []]


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


# How long a hand-out wait watches only the Sandboxes before it watches the claim too (for
# its failures, and for its Ready when no Sandbox watch is allowed). A warm hand-out comes
# sooner and then costs one watch, not two; a failure is reported this much later. A
# client whose last claim ended by the claim's Ready, not by a hand-out (a controller that
# does not label what it binds), watches the claim at once (next_claim_watch_delay).
CLAIM_WATCH_DELAY = 0.25


# The hand-out stream: a client keeps its hand-out watch open after a claim was handed
# out, as one watch of every Sandbox in the namespace that carries the claim-UID label.
# The next claim of that client in that namespace then needs no watch of its own: the
# stream was open before the claim's POST, so the binding arrives on it, without a
# watch set up while the controller writes the binding. The server ends the stream after
# HANDOUT_STREAM_SECONDS. Both clients share it among all of their waits in the namespace
# and hand each bound Sandbox to the waits of its claim; a binding seen before its wait
# registered is kept for a while (HandoutRecent). The sync client has no thread for it:
# its waiting threads take turns reading it (leader/follower); a stream left unread for
# HANDOUT_STREAM_IDLE is reopened rather than read through its backlog, and a stream that
# ends under its reader makes that wait fall back to a watch of its own claim's
# Sandboxes (handout_selector) while the next reader reopens it from where it was read
# up to. The async client reads it on a task of its own and stops it
# HANDOUT_STREAM_IDLE after the last wait.
HANDOUT_STREAM_SECONDS = 300.0
HANDOUT_STREAM_IDLE = 30.0


class HandoutStream:
    """The I/O-free state of a client's hand-out stream in one namespace: when it was
    opened and last read, the resourceVersion it was read up to, and the one after which
    it shows every binding. The clients hold the response and its line iterator."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.opened = 0.0
        self.read = 0.0
        self.open = False
        self.rv: str | None = None  # read up to ("" after a 410: the current state); None: never opened
        self.since = ""  # every binding after it is on the stream ("": every binding there is)

    def opening(self, now: float) -> None:
        self.opened = self.read = now
        self.open = True

    def closed(self) -> None:
        self.open = False

    def usable(self, now: float) -> bool:
        """Open, read recently, and not about to be ended by the server."""
        return (
            self.open
            and now - self.read < HANDOUT_STREAM_IDLE
            and now - self.opened < HANDOUT_STREAM_SECONDS - HANDOUT_STREAM_IDLE
        )

    def reopen_from(self, now: float, rv: str) -> str:
        """The resourceVersion a new watch of the stream starts from: where it was read up
        to when that was less than HANDOUT_STREAM_IDLE ago (it goes on: no binding in
        between is missed; after a 410, from the current state), else rv, the oldest
        waiting claim's (a backlog is not read through), after which it then shows every
        binding."""
        if self.rv is not None and now - self.read < HANDOUT_STREAM_IDLE:
            if not self.rv:
                self.since = ""
            return self.rv
        self.rv = self.since = rv
        return rv

    def covers(self, rv: str) -> bool:
        """Whether the binding of a claim created at resourceVersion rv is sure to be seen
        on the stream: not when the stream started after rv (a claim whose POST answered
        late, while another claim's wait opened the stream)."""
        return not rv_older(rv, self.since)


_DECIMAL = re.compile(r"[0-9]+")


def rv_older(rv: str, than: str) -> bool:
    """Whether resourceVersion rv is known to come before ``than``: both decimal (as the
    API server's, etcd revisions) and smaller. Anything else is not known to be older."""
    return bool(_DECIMAL.fullmatch(rv) and _DECIMAL.fullmatch(than)) and int(rv) < int(than)


def oldest_rv(rvs: Iterable[str]) -> str:
    """The oldest of these resourceVersions (rv_older; the first of those not known to be
    ordered), "" for none."""
    out = ""
    for rv in rvs:
        if not out or rv_older(rv, out):
            out = rv
    return out


def handout_stream_call(ns: str, rv: str) -> ApiCall:
    """The hand-out stream's watch: every Sandbox of ns bound to a claim, from rv."""
    return watch_call("sandboxes", ns, "", rv, HANDOUT_STREAM_SECONDS, LABEL_CLAIM_UID)


_CLAIM_UID_IN_LINE = re.compile(r'"' + re.escape(LABEL_CLAIM_UID) + r'":"([^"]*)"')
_RV_IN_LINE = re.compile(r'"resourceVersion":"([0-9]+)"')


def handout_line_uid(line: str) -> str:
    """The claim UID label of the Sandbox in a hand-out stream line, found without
    parsing it ("" for none: a bookmark, an error)."""
    m = _CLAIM_UID_IN_LINE.search(line)
    return m.group(1) if m else ""


def line_resource_version(line: str) -> str:
    """The resourceVersion of a watch line's object, found without parsing it."""
    m = _RV_IN_LINE.search(line)
    return m.group(1) if m else ""


def is_error_line(line: str) -> bool:
    return '"type":"ERROR"' in line[:32]


def is_gone_line(line: str) -> bool:
    """An ERROR line whose status is 410 Gone (the resourceVersion is too old)."""
    ev = parse_watch_line(line)
    return ev is not None and ev[1].get("code") == 410


# A shared hand-out stream keeps what it saw bound before the claim's wait registered
# (the POST's answer came after the binding): this long, at most this many.
HANDOUT_RECENT_FOR = 10.0
HANDOUT_RECENT_MAX = 1024


class HandoutRecent:
    """The lines of a shared hand-out stream that no wait took yet, by claim UID: kept
    HANDOUT_RECENT_FOR, at most HANDOUT_RECENT_MAX (the oldest go first)."""

    def __init__(self) -> None:
        self._lines: dict[str, tuple[float, str]] = {}

    def __len__(self) -> int:
        return len(self._lines)

    def keep(self, uid: str, line: str, now: float) -> None:
        self._lines.pop(uid, None)  # the newest line of a claim's Sandbox is what counts
        if len(self._lines) >= HANDOUT_RECENT_MAX:
            for u in [u for u, (seen, _) in self._lines.items() if now - seen > HANDOUT_RECENT_FOR]:
                del self._lines[u]
        while len(self._lines) >= HANDOUT_RECENT_MAX:
            del self._lines[next(iter(self._lines))]
        self._lines[uid] = (now, line)

    def take(self, uid: str, now: float) -> str:
        seen, line = self._lines.pop(uid, (0.0, ""))
        return line if line and now - seen <= HANDOUT_RECENT_FOR else ""

    def get(self, uid: str, now: float) -> str:
        """The claim's line, left for another wait of the same claim (take() removes it)."""
        seen, line = self._lines.get(uid, (0.0, ""))
        return line if line and now - seen <= HANDOUT_RECENT_FOR else ""


def next_claim_watch_delay(handed: bool, claim_ready: bool, delay: float) -> float:
    """The claim watch delay after a hand-out wait that ended handed out, or by the
    claim's Ready, or neither (a failure: no news)."""
    if handed:
        return CLAIM_WATCH_DELAY
    return 0.0 if claim_ready else delay


def handout_uid(claim: Mapping[str, Any]) -> str:
    """The UID by which a claim's hand-out can be recognised on its Sandbox, or "" when
    only the claim's own Ready may end the wait: a claim with env gets it delivered into
    its Sandbox after the Sandbox is bound (and may fall back to another one)."""
    if (claim.get("spec") or {}).get("env"):
        return ""
    return str((claim.get("metadata") or {}).get("uid") or "")


def handout_loop(ns: str, claim: Mapping[str, Any], uid: str, timeout: float, hw: Wait) -> WaitLoop:
    """The wait loop of a claim's hand-out: the Sandboxes handout_selector(uid) picks,
    watched from the claim's resourceVersion (the binding comes after it)."""
    loop = WaitLoop("sandboxes", ns, "", timeout, hw, handout_step(uid))
    loop.rv = str((claim.get("metadata") or {}).get("resourceVersion") or "")
    return loop


def controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether obj's controller ownerReference is the object with this UID."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any(r.get("controller") and r.get("uid") == uid for r in refs)


def handout_selector(uid: str) -> str:
    """The label selector of the Sandboxes bound to the claim with this UID."""
    return f"{LABEL_CLAIM_UID}={uid}"


def handed_out(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether a Sandbox is the claim's hand-out: labelled with the claim's UID,
    controlled by the claim, not being deleted, Running, Ready with a pod IP. The
    controller binds a Sandbox with one write (both the label and the ownerReference)
    and mirrors exactly this Ready into the claim's status afterwards."""
    meta = obj.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_CLAIM_UID) != uid or not controlled_by(obj, uid):
        return False
    if meta.get("deletionTimestamp") or ((obj.get("spec") or {}).get("operatingMode") or "Running") != "Running":
        return False
    ready = condition(dict(obj), "Ready") or {}
    return ready.get("status") == "True" and bool((obj.get("status") or {}).get("podIPs"))


def handout_step(uid: str) -> Step:
    """A wait step over the Sandboxes selected by handout_selector(uid): done (w.sandbox
    named) once one of them is handed_out(). Other events change nothing: a deleted or
    failing Sandbox is the claim's to report."""

    def step(w: Wait, etype: str, obj: dict[str, Any]) -> None:
        if etype in ("ADDED", "MODIFIED") and handed_out(obj, uid):
            w.sandbox = str((obj.get("metadata") or {}).get("name") or "")
            w.reason = str((condition(obj, "Ready") or {}).get("reason", ""))
            w.ready = w.done = bool(w.sandbox)

    return step


def on_claim_bound(w: Wait, etype: str, obj: dict[str, Any]) -> None:
    """on_claim_event that is done once the claim names its Sandbox (Ready or not)."""
    on_claim_event(w, etype, obj, False)


def on_sandbox_suspended(w: Wait, etype: str, obj: dict[str, Any]) -> None:
    """on_sandbox_event that is done once the Sandbox is Suspended and has no pod IP."""
    on_sandbox_event(w, etype, obj, "Suspended")


def on_deleted(w: Wait, etype: str, obj: dict[str, Any]) -> None:
    """A wait step that is done when the object is deleted."""
    w.done = etype == "DELETED"


SUSPEND_PATCH: dict[str, Any] = {"spec": {"operatingMode": "Suspended"}}
RUN_PATCH: dict[str, Any] = {"spec": {"operatingMode": "Running"}}


def parse_watch_line(line: str | bytes) -> tuple[str, dict[str, Any]] | None:
    """One line of a watch stream -> (type, object); None for blank lines."""
    if not line.strip():
        return None
    ev = json.loads(line)
    return str(ev.get("type", "")), dict(ev.get("object") or {})


Step = Callable[[Wait, str, dict[str, Any]], None]


class WaitLoop:
    """The I/O-free part of a wait by watch (KubeClient.wait): the deadline, the
    resourceVersion to watch from, and what each watch event means."""

    def __init__(self, resource: str, ns: str, name: str, timeout: float, w: Wait, step: Step) -> None:
        self.deadline = time.monotonic() + timeout
        self.resource, self.ns, self.name, self.timeout = resource, ns, name, timeout
        self.w, self.step = w, step
        self.rv = ""
        self.obj: dict[str, Any] = {}
        self.got = 0
        self.failed = False  # the current watch failed (lost)
        self.failures = 0  # watches in a row that failed
        self.last_error: SandboxError | None = None
        self.expired = False  # a 410 Gone: the object is read again before the next watch

    def first(self, obj: dict[str, Any]) -> bool:
        """Evaluates a current copy of the object (from a create or a get); True when that
        already ends the wait."""
        self.obj = obj
        self.step(self.w, "ADDED", obj)
        if self.w.done:
            return True
        self.rv = str(obj.get("metadata", {}).get("resourceVersion", ""))
        return False

    def left(self) -> float:
        """Seconds to the deadline (the bound of the next watch)."""
        return self.deadline - time.monotonic()

    def needs_get(self) -> bool:
        """Whether the object is read (GET) before the next watch: after a 410 Gone, for a
        wait on one object. A watch from "" shows only objects that exist, so a deletion
        in the gap would never be seen (a delete wait ran into its timeout, a ready wait
        did not fail with NotFoundError)."""
        return self.expired and bool(self.name)

    def refreshed(self, obj: dict[str, Any] | None) -> bool:
        """Takes the object read after a 410 (None: it is gone); True when that ends the
        wait. The next watch starts from its resourceVersion."""
        self.expired = False
        if obj is None:
            self.step(self.w, "DELETED", self.obj)
            return self.w.done
        return self.first(obj)

    def start(self) -> str:
        """Before each watch: the resourceVersion to watch from."""
        self.got = 0
        self.failed = False
        return self.rv

    def lost(self, e: SandboxError) -> None:
        """Takes the failure of the current watch, in opening it or while reading it:
        a watch is idempotent, so a lost connection or a transient refusal
        (WATCH_RETRY_STATUS) is watched again from the resourceVersion read up to, after
        a back-off (pause()), until the deadline. Anything else is raised."""
        if not watch_retriable(e):
            raise e
        self.failed = True
        self.failures += 1
        self.last_error = e

    def event(self, etype: str, o: dict[str, Any]) -> bool:
        """Takes one watch event; True when the current watch should be left (w.done, a
        410 Gone that restarts from a fresh read, a transient ERROR watched again after a
        back-off, or the deadline). Raises on any other ERROR."""
        self.got += 1
        if etype == "ERROR":
            if o.get("code") == 410:
                self.rv = ""
                self.expired = True
                return True
            # a transient status (an etcd without leader is a 500 event) is watched again,
            # as a watch refused with it at its start; anything else is raised
            self.lost(watch_error(o, f"watch {self.resource} {self.ns}/{self.name}"))
            return True
        self.rv = str(o.get("metadata", {}).get("resourceVersion", self.rv))
        if etype == "BOOKMARK":
            return False
        self.step(self.w, etype, o)
        self.obj = o
        return self.w.done or time.monotonic() >= self.deadline

    def pause(self) -> float | None:
        """After a watch: seconds to sleep before the next one when it ended without any
        event (do not spin) or failed (a back-off doubling from 0.1 s up to 2 s), else
        None."""
        left = max(0.0, self.deadline - time.monotonic())
        if self.failed:
            return min(left, WATCH_BACKOFF_MAX, 0.1 * 2.0 ** min(self.failures - 1, 10))
        if self.got:
            self.failures = 0
            return None
        return min(0.1, left)

    def timeout_error(self) -> SandboxTimeoutError:
        lost = f"; the last watch failed: {self.last_error}" if self.failed and self.last_error else ""
        return SandboxTimeoutError(
            f"{self.w.kind} {self.ns}/{self.name} not ready after {self.timeout:g}s ({self.w.describe()}){lost}",
            reason=self.w.reason,
            detail=self.w.message,
        )


WATCH_RETRY_STATUS = (429, 500, 502, 503, 504)
"""Statuses of a refused watch that are watched again (with a back-off) while waiting."""
WATCH_BACKOFF_MAX = 2.0


def watch_retriable(e: SandboxError) -> bool:
    """Whether a failed watch is opened again while waiting: its connection was lost or
    could not be made (SandboxConnectionError), or it was refused with a transient
    status (WATCH_RETRY_STATUS: the API server overloaded, restarting, or a proxy's)."""
    if isinstance(e, SandboxConnectionError):
        return True
    return isinstance(e, RequestError) and e.status in WATCH_RETRY_STATUS


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
    return RequestError(f"{what}: HTTP {s} {reason}: {msg}", status=s, code=reason, retry_after=retry_after(resp))


def retry_after(resp: httpx.Response) -> float | None:
    """A 429's or 503's Retry-After in seconds (the delay form; an HTTP date is not
    used by the API server), else None."""
    v = resp.headers.get("retry-after", "")
    if resp.status_code not in (429, 503) or not v.strip().isdigit():
        return None
    return float(min(int(v.strip()), 3600))


CALL_RETRY_METHODS = frozenset({"GET", "DELETE", "PATCH"})
"""API calls made again after a lost connection or a transient refusal: idempotent
ones only (the SDK's PATCHes are merge patches of fixed values). A POST is never made
again: the first may have been stored (create() undoes such a create by its name)."""
CALL_RETRY_MAX = 2.0


_LOST_MIDWAY: tuple[type[BaseException], ...] = (
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
    ConnectionResetError,
    BrokenPipeError,
    http.client.IncompleteRead,
    asyncio.IncompleteReadError,
)


def call_retriable(e: BaseException) -> bool:
    """Whether a failed API call is worth making again: a transient status
    (WATCH_RETRY_STATUS), or a connection lost mid-way (reset, closed before the answer:
    an API server restarting, a load balancer's idle cut). Not a server that cannot be
    reached at all (refused, no such host, a proxy's refusal), which fails at once with
    its "is the cluster up?" error, nor a call that used its whole timeout."""
    if isinstance(e, RequestError):
        return e.status in WATCH_RETRY_STATUS
    if not isinstance(e, SandboxConnectionError):
        return False
    cause: BaseException | None = e.__cause__
    for _ in range(8):  # a chain is short; never follow a cycle
        if cause is None or isinstance(cause, _LOST_MIDWAY):
            break
        cause = cause.__cause__ or cause.__context__
    return isinstance(cause, _LOST_MIDWAY)


log = logging.getLogger("agent_sandbox_sdk")


def log_cleanup_failure(ns: str, name: str, e: BaseException) -> None:
    """A cleanup DELETE (a handle's context exit, a create rolled back) failed even after
    its retries: the object may be left behind, so it is logged (logger
    "agent_sandbox_sdk", WARNING) rather than dropped; the caller's own error, if any,
    is what is raised."""
    log.warning("could not delete %s/%s (it may be left behind; delete it by hand): %s", ns, name, e)


def call_retry_delay(c: ApiCall, e: BaseException, attempt: int, left: float) -> float | None:
    """Seconds to wait before making API call c again after it failed with e (its
    attempt-th failure, from 1), or None when it is not made again: not idempotent, not
    a lost connection or a transient status (WATCH_RETRY_STATUS), or no time left
    (left: seconds to the call's deadline). The server's Retry-After when it sent one,
    else a back-off doubling from 0.1 s, at most CALL_RETRY_MAX."""
    if c.method not in CALL_RETRY_METHODS or not call_retriable(e):
        return None
    ra = e.retry_after if isinstance(e, RequestError) else None
    delay = min(CALL_RETRY_MAX, ra if ra is not None else 0.1 * 2.0 ** min(attempt - 1, 10))
    return delay if delay < left else None


def watch_error(status: Mapping[str, Any], what: str) -> SandboxError:
    """The error of a watch's ERROR event (its object a Status), mapped as api_error
    maps a refused request: 401/403 AuthError, 404 NotFoundError, else RequestError."""
    code = status.get("code")
    s = code if isinstance(code, int) and not isinstance(code, bool) and code >= 400 else 500
    msg, reason = str(status.get("message") or ""), str(status.get("reason") or "")
    if s in (401, 403, 404):
        return api_error(httpx.Response(s, json={"message": msg, "reason": reason}), what)
    return RequestError(f"{what}: {msg}", status=s, code=reason)


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


# ---- API calls: request building for _kube_sync and _kube_async ----------------------

MERGE_PATCH = "application/merge-patch+json"


@dataclass
class ApiCall:
    """One API server request: method, URL path, what it does (for errors) and the
    keyword arguments of httpx's request()/build_request()."""

    method: str
    url: str
    what: str
    kw: dict[str, Any]
    one_object: bool = True  # its answer is one object (a lean connection may carry it)

    def target(self) -> str:
        """The request target: the URL path with its query string, if it has params."""
        params = self.kw.get("params")
        return self.url + ("?" + urllib.parse.urlencode(params) if params else "")


def client_options(cfg: KubeConfig, timeout: float, ctx: ssl.SSLContext) -> dict[str, Any]:
    """The httpx.Client/AsyncClient arguments of the API server client, all but the
    transport; ctx is the client's TLS context (cfg.ssl_context(), made once per client
    and shared with its transport and its lean pool)."""
    return dict(
        base_url=cfg.server,
        verify=ctx,
        auth=cfg.auth(),
        timeout=httpx.Timeout(timeout, connect=10.0),
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
    )


def get_call(resource: str, ns: str, name: str) -> ApiCall:
    check_path_name(name)
    return ApiCall("GET", path(resource, ns, name), f"{RESOURCES[resource][1]} {ns}/{name}", {})


LIST_PAGE = 500
"""Items per LIST page (client-go's pager's default): a namespace with thousands of
Sandboxes is read in pieces, not as one answer of tens of MB."""


def list_call(resource: str, ns: str, label_selector: str | None, cont: str = "", limit: int = LIST_PAGE) -> ApiCall:
    """A LIST of one page of limit items (0: the whole list at once)."""
    params: dict[str, Any] = {"limit": limit} if limit > 0 else {}
    if label_selector:
        params["labelSelector"] = label_selector
    if cont:
        params["continue"] = cont
    return ApiCall("GET", path(resource, ns), f"list {resource} in {ns}", {"params": params}, one_object=False)


class ListPages:
    """The I/O-free part of a paged LIST: the continue token and size of the next page,
    the items gathered, and a restart from the first page when a token expired (410):
    paged once more, then (a second expiry) as one LIST without limit, which no
    compaction can cut."""

    def __init__(self) -> None:
        self.cont = ""
        self.limit = LIST_PAGE
        self.items: list[dict[str, Any]] = []
        self.expiries = 0

    def expired(self, e: SandboxError) -> bool:
        """Whether the failure of a page is an expired continue token to start over from
        (twice at most); anything else is raised by the caller."""
        if isinstance(e, RequestError) and e.status == 410 and self.cont and self.expiries < 2:
            self.expiries += 1
            self.cont, self.items = "", []
            if self.expiries == 2:
                self.limit = 0
            return True
        return False

    def take(self, page: dict[str, Any]) -> dict[str, Any] | None:
        """Takes a page; the whole list (the last page's object with every item) once it
        was the last, else None."""
        self.items.extend(page.get("items") or [])
        self.cont = str((page.get("metadata") or {}).get("continue") or "")
        if self.cont:
            return None
        page["items"] = self.items
        return page


def create_call(resource: str, ns: str, body: dict[str, Any]) -> ApiCall:
    name = body.get("metadata", {}).get("name", "")
    return ApiCall("POST", path(resource, ns), f"create {RESOURCES[resource][1]} {ns}/{name}", {"json": body})


def patch_call(resource: str, ns: str, name: str, patch: dict[str, Any]) -> ApiCall:
    check_path_name(name)
    kw = {"json": patch, "headers": {"Content-Type": MERGE_PATCH}}
    return ApiCall("PATCH", path(resource, ns, name), f"patch {RESOURCES[resource][1]} {ns}/{name}", kw)


def delete_call(resource: str, ns: str, name: str, uid: str = "") -> ApiCall:
    """A delete with background propagation; with a uid, only while the name still holds
    that object (a precondition: else 409 Conflict), so another client's object made
    again under the name is left alone."""
    check_path_name(name)
    body: dict[str, Any] = {"propagationPolicy": "Background"}
    if uid:
        body["preconditions"] = {"uid": uid}
    kw = {"json": body}
    return ApiCall("DELETE", path(resource, ns, name), f"delete {RESOURCES[resource][1]} {ns}/{name}", kw)


def watch_call(resource: str, ns: str, name: str, rv: str, timeout: float, selector: str = "") -> ApiCall:
    """A watch of one object (or, with a label selector and no name, of the objects it
    selects) from resourceVersion rv ("" for now), for at most timeout."""
    params = {
        "watch": "1",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(max(1, int(timeout) + 1)),
    }
    if name:
        params["fieldSelector"] = f"metadata.name={name}"
    if selector:
        params["labelSelector"] = selector
    if rv:
        params["resourceVersion"] = rv
    kw = {"params": params, "timeout": httpx.Timeout(timeout + 5, connect=10.0)}
    what = f"watch {resource} {ns}/{name}" if name else f"watch {resource} {ns} ({selector})"
    return ApiCall("GET", path(resource, ns), what, kw)


@contextlib.contextmanager
def reaching(what: str, server: str) -> Iterator[None]:
    """Maps an API call that got no answer to SandboxConnectionError."""
    try:
        yield
    except httpx.TransportError as e:
        raise SandboxConnectionError(f"{what}: cannot reach the API server {server}: {e!r}; is the cluster up?") from e


def kw_within(c: ApiCall, timeout: float, left: float, server: str) -> dict[str, Any]:
    """httpx request() arguments of API call c made through httpx with ``left`` seconds
    of the call's ``timeout`` left (the lean pool's wait for a connection took the
    rest): each of its timeouts at most that. Raises SandboxConnectionError when none
    is left."""
    if left <= 0:
        raise SandboxConnectionError(f"{c.what}: no answer from the API server {server} within {timeout:g}s")
    if "timeout" in c.kw or left >= timeout:
        return c.kw
    return {**c.kw, "timeout": httpx.Timeout(left, connect=min(10.0, left))}


def _too_large(what: str) -> SandboxConnectionError:
    return SandboxConnectionError(f"{what}: the API server's answer is larger than {MAX_ANSWER} bytes")


def read_answer(resp: httpx.Response, what: str) -> None:
    """Reads a streamed one-object answer through httpx (the lean pool's fallback) as the
    lean pool does: at most MAX_ANSWER bytes, else SandboxConnectionError; left as its
    content. Closes it."""
    data = bytearray()
    try:
        for part in resp.iter_bytes():
            data += part
            if len(data) > MAX_ANSWER:
                raise _too_large(what)
    finally:
        resp.close()
    resp._content = bytes(data)


async def aread_answer(resp: httpx.Response, what: str) -> None:
    """The async twin of read_answer."""
    data = bytearray()
    try:
        async for part in resp.aiter_bytes():
            data += part
            if len(data) > MAX_ANSWER:
                raise _too_large(what)
    finally:
        await resp.aclose()
    resp._content = bytes(data)


class WatchLines:
    """Splits a watch answer's bytes read through httpx into lines as the lean pool does:
    each line at most MAX_LINE bytes (httpx's iter_lines had no bound: one endless event
    was buffered whole), else SandboxConnectionError."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.buf = bytearray()

    def take(self, part: bytes) -> list[str]:
        """The lines part completes, without their line ends."""
        lines = take_lines(self.buf, part)
        if len(self.buf) > MAX_LINE or any(len(line) > MAX_LINE for line in lines):
            raise SandboxConnectionError(f"{self.what}: a watch event longer than {MAX_LINE} bytes")
        return lines

    def rest(self) -> list[str]:
        """The last line, when the answer did not end with a line end."""
        return [self.buf.decode()] if self.buf else []


def api_result(resp: httpx.Response, what: str) -> dict[str, Any]:
    """The object of a successful API answer; raises the mapped error of a failed one."""
    if resp.status_code >= 400:
        raise api_error(resp, what)
    return dict(resp.json())


def lean_request(c: ApiCall) -> tuple[str, bytes, str] | None:
    """c as a lean connection sends it (_fasthttp, _fasthttp_async): the path with its
    query, the body and its Content-Type; None for a call httpx makes: a LIST (its answer
    may be large, and httpx asks for it compressed) or one with arguments other than
    params, a JSON body and a Content-Type."""
    kw = c.kw
    headers = kw.get("headers") or {}
    if not c.one_object or set(kw) - {"params", "json", "headers"} or set(headers) - {"Content-Type"}:
        return None
    url = c.target()
    body = json.dumps(kw["json"], separators=(",", ":")).encode() if "json" in kw else b""
    return url, body, headers.get("Content-Type", "application/json")


def fast_result(status: int, content_type: str, body: bytes, what: str) -> dict[str, Any]:
    """api_result for an answer read off a lean connection (_fasthttp, _fasthttp_async)."""
    if status >= 400:
        raise api_error(httpx.Response(status, content=body, headers={"content-type": content_type}), what)
    return dict(json.loads(body))


@contextlib.contextmanager
def watching(what: str, *, streaming: bool) -> Iterator[None]:
    """Maps a transport failure of a watch to SandboxConnectionError; while ``streaming``
    its events, a read timeout just ends the watch (the caller watches again)."""
    try:
        yield
    except httpx.TimeoutException as e:
        if not streaming:
            raise SandboxConnectionError(f"{what}: {e!r}") from e
    except httpx.TransportError as e:
        raise SandboxConnectionError(f"{what}: {e!r}") from e
