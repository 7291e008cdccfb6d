"""The environment's HTTP proxies (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY, upper or
lower case) for the SDK's httpx clients and its lean connections.

httpx reads the environment's proxies only when it makes a client's transport itself; the
SDK passes transports of its own (connect retries, the kubeconfig's TLS context), so it
builds the mounts httpx would have made: each proxied URL pattern gets a transport through
its proxy with the same TLS settings, and the patterns NO_PROXY names keep the client's
own transport. The rules are httpx's: NO_PROXY names hosts (``example.com`` also matches
its subdomains, ``.example.com`` only them), IP addresses, ``scheme://host[:port]``
patterns, or ``*`` (no proxy at all); CIDR ranges are not understood (as in httpx) and
are skipped. One addition: loopback hosts (``localhost``, ``127.0.0.1``, ``::1``) are never
proxied, as in Go's net/http (kubectl, the Go SDK): a proxy cannot reach this machine's
own servers, such as a local cluster's API server."""

from __future__ import annotations

import ipaddress
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

T = TypeVar("T")

# Never proxied (httpx mount keys): the loopback names and addresses.
LOOPBACK = ("all://localhost", "all://127.0.0.1", "all://[::1]")


def env_proxies() -> dict[str, str | None]:
    """The environment's proxy rules as httpx mount keys: URL pattern -> proxy URL, or
    None where no proxy applies. Empty when no proxy is set or NO_PROXY is ``*``."""
    info = urllib.request.getproxies()
    rules: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if url := info.get(scheme):
            rules[f"{scheme}://"] = url if "://" in url else f"http://{url}"
    if not rules:
        return {}
    for host in (h.strip() for h in info.get("no", "").split(",")):
        if host == "*":
            return {}
        if key := _no_proxy_key(host):
            rules[key] = None
    rules.update(dict.fromkeys(LOOPBACK))
    return rules


def _no_proxy_key(host: str) -> str | None:
    """The mount key of one NO_PROXY entry (as httpx maps it), None for an empty entry,
    a CIDR range or one that is no URL pattern at all."""
    if not host or ("/" in host and "://" not in host):
        return None
    key = host if "://" in host else _host_key(host)
    try:
        httpx.URL(key)
    except httpx.InvalidURL:
        return None
    return key


def _host_key(host: str) -> str:
    """The mount key of a NO_PROXY host: an IP address, localhost or a domain."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return f"all://{host}" if host.lower() == "localhost" else f"all://*{host}"
    return f"all://[{bare}]" if ip.version == 6 else f"all://{bare}"


def _mounts(make: Callable[[str], T]) -> dict[str, T | None]:
    """Mounts for httpx.Client/AsyncClient: make(proxy URL) for each proxied pattern (one
    transport each, as httpx makes them), None (the client's transport) for the rest."""
    return {key: None if url is None else make(url) for key, url in env_proxies().items()}


def mounts(verify: Any) -> dict[str, httpx.BaseTransport | None]:
    """The proxy mounts of a sync client whose own transport is
    ``httpx.HTTPTransport(verify=verify, retries=2)``."""
    return dict(_mounts(lambda url: httpx.HTTPTransport(verify=verify, retries=2, proxy=url)))


def async_mounts(verify: Any) -> dict[str, httpx.AsyncBaseTransport | None]:
    """The proxy mounts of an async client whose own transport is
    ``httpx.AsyncHTTPTransport(verify=verify, retries=2)``."""
    return dict(_mounts(lambda url: httpx.AsyncHTTPTransport(verify=verify, retries=2, proxy=url)))


def loopback_direct() -> dict[str, None]:
    """Mounts that keep loopback hosts off the environment's proxies, for a client that
    lets httpx read them (one made without a transport)."""
    return dict.fromkeys(LOOPBACK) if env_proxies() else {}


@dataclass(frozen=True)
class _Pattern:
    """One mount key, matched as httpx matches it (scheme, host wildcard, port)."""

    scheme: str  # "" = any
    host: str  # "" = any; "*.d": d's subdomains; "*d": d and its subdomains
    port: int | None

    @classmethod
    def of(cls, key: str) -> _Pattern:
        u = httpx.URL(key)
        return cls("" if u.scheme == "all" else u.scheme, "" if u.host == "*" else u.host, u.port)

    def matches(self, url: httpx.URL) -> bool:
        if self.scheme and self.scheme != url.scheme:
            return False
        if self.port is not None and self.port != url.port:
            return False
        host = url.host
        if not self.host:
            return True
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        if self.host.startswith("*"):
            return host == self.host[1:] or host.endswith("." + self.host[1:])
        return host == self.host

    def priority(self) -> tuple[int, int, int]:
        """httpx's order: a port first, then longer hosts, then a named scheme."""
        return (0 if self.port is not None else 1, -len(self.host), -len(self.scheme))


def proxy_for(url: str) -> str | None:
    """The proxy URL the environment names for url (as this SDK's httpx clients pick
    it), or None when it goes direct."""
    target = httpx.URL(url)
    rules = sorted(((_Pattern.of(k), v) for k, v in env_proxies().items()), key=lambda r: r[0].priority())
    for pattern, proxy in rules:
        if pattern.matches(target):
            return proxy
    return None
