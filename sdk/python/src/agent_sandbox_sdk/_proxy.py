"""The environment's HTTP proxies (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY, upper or
lower case) for the SDK's httpx clients and its lean connections.

httpx reads the environment's proxies only when it makes a client's transport itself; the
SDK passes transports of its own (connect retries, the kubeconfig's TLS context), so it
passes a routing transport instead: each request goes through the proxy proxy_for names
for its URL (one transport per proxy, with the same TLS settings) or through the direct
transport. The rules are httpx's: NO_PROXY names hosts (``example.com`` also matches its
subdomains, ``.example.com`` only them), IP addresses, ``scheme://host[:port]`` patterns,
or ``*`` (no proxy at all). Additions, as in Go's net/http (kubectl, the Go SDK):

- CIDR ranges (``10.0.0.0/8``, ``fd00::/8``) keep IP-address hosts in them direct (httpx
  skips them; a host name is not resolved to be matched against them);
- loopback hosts (is_loopback: ``localhost``, 127.0.0.0/8, ``::1``) are never proxied: a
  proxy cannot reach this machine's own servers, such as a local cluster's API server.

One addition of this SDK's own: the in-cluster API server's host
(``$KUBERNETES_SERVICE_HOST``) is never proxied either. Go's in-cluster config does not
exempt it (a typical NO_PROXY holding the service CIDR does); a proxy outside the cluster
cannot reach a Service address, and before the SDK honoured the environment's proxies at
all this traffic always went direct."""

from __future__ import annotations

import ipaddress
import os
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

T = TypeVar("T")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def is_loopback(host: str) -> bool:
    """Whether host (a URL's host or an address, IPv6 with or without brackets) is this
    machine's loopback: such a host is never proxied, and the MCP server may listen on it
    without a token (mcp._cli). The SDK's one rule for it.

    It is Go's (the Go SDK's proxies: net/http.ProxyFromEnvironment, through
    golang.org/x/net/http/httpproxy's config.useProxy, in http.DefaultTransport and
    client-go's rest transport): the name ``localhost`` and every IP address for which
    net.IP.IsLoopback holds, that is all of 127.0.0.0/8, ``::1`` in any textual form
    (``0:0:0:0:0:0:0:1``) and IPv4-mapped 127.0.0.0/8 (``::ffff:127.0.0.1``). Beyond Go:
    ``localhost`` in any case and with a trailing dot, and names under ``.localhost``
    (RFC 6761: they resolve to loopback), which Go sends to a proxy that cannot reach
    them. Other spellings of an IPv4 address (``127.1``, ``2130706433``) are host names,
    as in Go, and ``0.0.0.0`` / ``::`` are not loopback."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    name = bare.lower()
    name = name[:-1] if name.endswith(".") else name
    if name == "localhost" or (name.endswith(".localhost") and len(name) > len(".localhost")):
        return True
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def env_proxies() -> dict[str, str | None]:
    """The environment's proxy rules as httpx mount keys: URL pattern -> proxy URL, or
    None where no proxy applies (NO_PROXY's entries but its CIDR ranges: see
    no_proxy_networks; the in-cluster API server's host). Empty when no proxy is set or
    NO_PROXY is ``*``. Loopback hosts are not among them: Rules.proxy_for keeps them
    direct (is_loopback)."""
    info = urllib.request.getproxies()
    rules: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if url := info.get(scheme):
            rules[f"{scheme}://"] = url if "://" in url else f"http://{url}"
    if not rules:
        return {}
    for host in _no_proxy_entries(info):
        if host == "*":
            return {}
        if key := _no_proxy_key(host):
            rules[key] = None
    if key := _service_host_key():
        rules[key] = None
    return rules


def no_proxy_networks() -> tuple[IPNetwork, ...]:
    """NO_PROXY's CIDR ranges (``10.0.0.0/8``, ``fd00::/8``; host bits may be set, as
    Go's net.ParseCIDR allows): IP-address hosts in them go direct."""
    nets: list[IPNetwork] = []
    for entry in _no_proxy_entries(urllib.request.getproxies()):
        if net := _cidr(entry):
            nets.append(net)
    return tuple(nets)


def _no_proxy_entries(info: dict[str, str]) -> Iterable[str]:
    return (h.strip() for h in info.get("no", "").split(","))


def _cidr(entry: str) -> IPNetwork | None:
    """The network of a CIDR entry, None for anything else."""
    if "/" not in entry or "://" in entry:
        return None
    addr, _, bits = entry.partition("/")
    if addr.startswith("[") and addr.endswith("]"):
        addr = addr[1:-1]
    try:
        return ipaddress.ip_network(f"{addr}/{bits}", strict=False)
    except ValueError:
        return None


def _no_proxy_key(host: str) -> str | None:
    """The mount key of one NO_PROXY entry (as httpx maps it), None for an empty entry,
    a CIDR range (no_proxy_networks) or one that is no URL pattern at all."""
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


def _service_host_key() -> str | None:
    """The mount key of $KUBERNETES_SERVICE_HOST (that host exactly), or None."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "").strip()
    if not host:
        return None
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        key = f"all://{bare}"
    else:
        key = f"all://[{bare}]" if ip.version == 6 else f"all://{bare}"
    try:
        httpx.URL(key)
    except httpx.InvalidURL:
        return None
    return key


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


@dataclass(frozen=True)
class Rules:
    """The environment's proxy rules as read once (when a client is made)."""

    patterns: tuple[tuple[_Pattern, str | None], ...] = ()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_env(cls) -> Rules:
        keys = env_proxies()
        if not keys:
            return cls()
        pats = sorted(((_Pattern.of(k), v) for k, v in keys.items()), key=lambda r: r[0].priority())
        return cls(tuple(pats), no_proxy_networks())

    @property
    def proxies(self) -> set[str]:
        """The proxy URLs the rules name."""
        return {p for _, p in self.patterns if p is not None}

    def proxy_for(self, url: httpx.URL) -> str | None:
        """The proxy for url, or None when it goes direct."""
        if not self.patterns or is_loopback(url.host):
            return None
        if self.networks and _in_networks(url.host, self.networks):
            return None
        for pattern, proxy in self.patterns:
            if pattern.matches(url):
                return proxy
        return None


def _in_networks(host: str, nets: tuple[IPNetwork, ...]) -> bool:
    """Whether host is an IP address in one of nets (a host name never is)."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        mapped = ip.ipv4_mapped
        if any(mapped in n for n in nets if n.version == 4):
            return True
    return any(ip in n for n in nets if n.version == ip.version)


def proxy_for(url: str) -> str | None:
    """The proxy URL the environment names for url (as this SDK's httpx clients pick
    it), or None when it goes direct."""
    return Rules.from_env().proxy_for(httpx.URL(url))


@dataclass
class _Routes(Generic[T]):
    """The direct transport, one transport per proxy, and the rules that pick one."""

    rules: Rules
    direct: T
    proxied: dict[str, T] = field(default_factory=dict)

    def pick(self, url: httpx.URL) -> T:
        proxy = self.rules.proxy_for(url)
        return self.direct if proxy is None else self.proxied[proxy]

    def all(self) -> list[T]:
        return [self.direct, *self.proxied.values()]


class RoutingTransport(httpx.BaseTransport):
    """Sends each request through the transport of the proxy the rules name for its URL,
    or through the direct transport."""

    def __init__(self, rules: Rules, make: Callable[[str | None], httpx.BaseTransport]) -> None:
        self.routes = _Routes(rules, make(None), {p: make(p) for p in sorted(rules.proxies)})

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.routes.pick(request.url).handle_request(request)

    def close(self) -> None:
        for t in self.routes.all():
            t.close()


class AsyncRoutingTransport(httpx.AsyncBaseTransport):
    """RoutingTransport for async clients."""

    def __init__(self, rules: Rules, make: Callable[[str | None], httpx.AsyncBaseTransport]) -> None:
        self.routes = _Routes(rules, make(None), {p: make(p) for p in sorted(rules.proxies)})

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.routes.pick(request.url).handle_async_request(request)

    async def aclose(self) -> None:
        for t in self.routes.all():
            await t.aclose()


def _transport_options(verify: Any, retries: int, limits: httpx.Limits | None) -> dict[str, Any]:
    """The arguments of every transport a client gets (direct or through a proxy)."""
    opts: dict[str, Any] = {"verify": verify, "retries": retries}
    if limits is not None:
        opts["limits"] = limits
    return opts


def transport(
    verify: Any, *, retries: int = 2, limits: httpx.Limits | None = None, proxy: str | None = None
) -> httpx.BaseTransport:
    """The transport of a sync client: ``httpx.HTTPTransport(verify=verify,
    retries=retries)`` (with limits, when given), or, when the environment names a
    proxy, a RoutingTransport over it and one such transport per proxy. A proxy given
    (a kubeconfig's proxy-url) takes every request, whatever the environment says."""
    opts = _transport_options(verify, retries, limits)
    if proxy:
        return httpx.HTTPTransport(**opts, proxy=proxy)
    rules = Rules.from_env()
    if not rules.proxies:
        return httpx.HTTPTransport(**opts)
    return RoutingTransport(rules, lambda proxy: httpx.HTTPTransport(**opts, proxy=proxy))


def async_transport(
    verify: Any, *, retries: int = 2, limits: httpx.Limits | None = None, proxy: str | None = None
) -> httpx.AsyncBaseTransport:
    """transport for an async client (httpx.AsyncHTTPTransport)."""
    opts = _transport_options(verify, retries, limits)
    if proxy:
        return httpx.AsyncHTTPTransport(**opts, proxy=proxy)
    rules = Rules.from_env()
    if not rules.proxies:
        return httpx.AsyncHTTPTransport(**opts)
    return AsyncRoutingTransport(rules, lambda proxy: httpx.AsyncHTTPTransport(**opts, proxy=proxy))
