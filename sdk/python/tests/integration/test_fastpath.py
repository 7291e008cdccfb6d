"""The claim POST through the lean connection pools (_fasthttp for the sync client,
_fasthttp_async for the async one) against a real API server: TLS with a client
certificate, a token user, the API's errors mapped as the httpx path maps them, and httpx
taking over when no connection of the pool comes free in time."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agent_sandbox_sdk import AuthError, NotFoundError, RequestError, SandboxConnectionError
from agent_sandbox_sdk._kube_async import AsyncKubeClient
from agent_sandbox_sdk._kube_sync import KubeClient
from agent_sandbox_sdk._kubeconfig import KubeConfig, load_kubeconfig

from .conftest import BareServer


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
        "kind": "SandboxClaim",
        "metadata": {"name": name, "labels": {"fast": "1"}},
        "spec": {"warmPoolRef": {"name": "pool"}},
    }


def test_claims_are_posted_on_one_lean_connection(bare_server: BareServer, ns: str) -> None:
    kube = KubeClient(bare_server.cfg)
    try:
        for i in range(5):
            obj = kube.create("sandboxclaims", ns, claim(f"c{i}"))
            assert obj["metadata"]["name"] == f"c{i}" and obj["metadata"]["uid"]
            assert obj["metadata"]["labels"] == {"fast": "1"}
        assert kube._fast.sent == 5 and kube._fast.connects == 1
        names = {c["metadata"]["name"] for c in kube.list("sandboxclaims", ns)["items"]}
        assert names == {f"c{i}" for i in range(5)}
    finally:
        kube.close()


def test_api_errors_are_mapped_as_on_httpx(bare_server: BareServer, ns: str) -> None:
    kube = KubeClient(bare_server.cfg)
    try:
        kube.create("sandboxclaims", ns, claim("dup"))
        with pytest.raises(RequestError) as e:
            kube.create("sandboxclaims", ns, claim("dup"))
        assert e.value.status == 409 and e.value.code == "AlreadyExists"
        bad = claim("bad")
        bad["spec"] = {"warmPoolRef": 42}
        with pytest.raises(RequestError) as e:
            kube.create("sandboxclaims", ns, bad)
        assert e.value.status == 422 and e.value.code == "Invalid"
        assert kube._fast.sent == 3
    finally:
        kube.close()


def test_a_token_user_is_authenticated(bare_server: BareServer, ns: str) -> None:
    """alice has a bearer token and no right to create claims: the server knows who she
    is (403, not 401)."""
    kube = KubeClient(load_kubeconfig(bare_server.alice))
    try:
        with pytest.raises(AuthError) as e:
            kube.create("sandboxclaims", ns, claim("alice"))
        assert e.value.status == 403 and "alice" in str(e.value)
        assert kube._fast.sent == 1
    finally:
        kube.close()


def test_threads_share_the_pool_and_httpx_takes_over_when_none_is_free(bare_server: BareServer, ns: str) -> None:
    """Twelve threads at once: the pool's eight connections carry them all (the last
    four wait for one); with every connection taken and none put back in time, httpx."""
    kube = KubeClient(bare_server.cfg)
    try:
        threads = [threading.Thread(target=kube.create, args=("sandboxclaims", ns, claim(f"t{i}"))) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert kube._fast.sent == 12 and 1 <= kube._fast.connects <= 8
        kube._fast._open, kube._fast._idle, kube._fast._timeout = 8, [], 0.2  # all in use elsewhere
        obj = kube.create("sandboxclaims", ns, claim("busy"))
        assert obj["metadata"]["name"] == "busy" and kube._fast.sent == 12
        assert len(kube.list("sandboxclaims", ns)["items"]) == 13
    finally:
        kube.close()


def test_no_server_is_a_connection_error() -> None:
    kube = KubeClient(KubeConfig(server="https://127.0.0.1:1", insecure=True), timeout=2)
    try:
        with pytest.raises(SandboxConnectionError):
            kube.create("sandboxclaims", "default", claim("x"))
    finally:
        kube.close()


async def test_async_claims_at_once_on_the_pool(bare_server: BareServer, ns: str) -> None:
    """Twelve at once on the pool over TLS with a client certificate: the pool's eight
    connections carry them all (the last four wait for one); the next round reuses them;
    with the pool turned off httpx carries them."""
    kube = AsyncKubeClient(bare_server.cfg)
    try:
        objs = await asyncio.gather(*(kube.create("sandboxclaims", ns, claim(f"a{i}")) for i in range(12)))
        assert sorted(o["metadata"]["name"] for o in objs) == sorted(f"a{i}" for i in range(12))
        assert all(o["metadata"]["uid"] and o["metadata"]["labels"] == {"fast": "1"} for o in objs)
        assert kube._fast.sent == 12 and kube._fast.connects == 8
        await asyncio.gather(*(kube.create("sandboxclaims", ns, claim(f"b{i}")) for i in range(8)))
        assert kube._fast.sent == 20 and kube._fast.connects == 8
        kube._fast.usable = False
        await asyncio.gather(*(kube.create("sandboxclaims", ns, claim(f"h{i}")) for i in range(4)))
        assert kube._fast.sent == 20
        assert len((await kube.list("sandboxclaims", ns))["items"]) == 24
    finally:
        await kube.aclose()
    assert kube._fast._open == 0


async def test_async_api_errors_are_mapped_as_on_httpx(bare_server: BareServer, ns: str) -> None:
    kube = AsyncKubeClient(bare_server.cfg)
    try:
        await kube.create("sandboxclaims", ns, claim("dup"))
        with pytest.raises(RequestError) as e:
            await kube.create("sandboxclaims", ns, claim("dup"))
        assert e.value.status == 409 and e.value.code == "AlreadyExists"
        bad = claim("bad")
        bad["spec"] = {"warmPoolRef": 42}
        with pytest.raises(RequestError) as e:
            await kube.create("sandboxclaims", ns, bad)
        assert e.value.status == 422 and e.value.code == "Invalid"
        assert kube._fast.sent == 3 and kube._fast.connects == 1
    finally:
        await kube.aclose()


async def test_async_token_user_is_authenticated(bare_server: BareServer, ns: str) -> None:
    kube = AsyncKubeClient(load_kubeconfig(bare_server.alice))
    try:
        with pytest.raises(AuthError) as e:
            await kube.create("sandboxclaims", ns, claim("alice"))
        assert e.value.status == 403 and "alice" in str(e.value)
        assert kube._fast.sent == 1
    finally:
        await kube.aclose()


async def test_async_no_server_is_a_connection_error() -> None:
    kube = AsyncKubeClient(KubeConfig(server="https://127.0.0.1:1", insecure=True), timeout=2)
    try:
        with pytest.raises(SandboxConnectionError):
            await kube.create("sandboxclaims", "default", claim("x"))
        assert kube._fast.connects == 0
    finally:
        await kube.aclose()


def test_every_small_call_is_lean(bare_server: BareServer, ns: str) -> None:
    """GET, a merge PATCH and DELETEs go out on the pool too, and answer as through httpx
    (a 404 mapped, a deleted object gone); a LIST goes through httpx."""
    kube = KubeClient(bare_server.cfg)
    try:
        kube.create("sandboxclaims", ns, claim("c1"))
        other = claim("c2")
        other["metadata"]["labels"] = {"fast": "0"}
        kube.create("sandboxclaims", ns, other)
        assert kube.get("sandboxclaims", ns, "c1")["metadata"]["name"] == "c1"
        assert [c["metadata"]["name"] for c in kube.list("sandboxclaims", ns, "fast=1")["items"]] == ["c1"]
        patched = kube.patch("sandboxclaims", ns, "c1", {"metadata": {"labels": {"x": "y.z"}}})
        assert patched["metadata"]["labels"] == {"fast": "1", "x": "y.z"}
        assert kube.delete("sandboxclaims", ns, "c1") is True
        assert kube.delete("sandboxclaims", ns, "c1") is False
        with pytest.raises(NotFoundError):
            kube.get("sandboxclaims", ns, "c1")
        assert kube._fast.sent == 7 and kube._fast.connects == 1  # all but the LIST
        assert [c["metadata"]["name"] for c in kube.list("sandboxclaims", ns, "fast=0")["items"]] == ["c2"]
    finally:
        kube.close()


async def test_async_every_small_call_is_lean(bare_server: BareServer, ns: str) -> None:
    kube = AsyncKubeClient(bare_server.cfg)
    try:
        await kube.create("sandboxclaims", ns, claim("a1"))
        assert (await kube.get("sandboxclaims", ns, "a1"))["metadata"]["name"] == "a1"
        assert [c["metadata"]["name"] for c in (await kube.list("sandboxclaims", ns, "fast=1"))["items"]] == ["a1"]
        patched = await kube.patch("sandboxclaims", ns, "a1", {"metadata": {"labels": {"x": "y"}}})
        assert patched["metadata"]["labels"] == {"fast": "1", "x": "y"}
        assert await kube.delete("sandboxclaims", ns, "a1") is True
        assert await kube.delete("sandboxclaims", ns, "a1") is False
        with pytest.raises(NotFoundError):
            await kube.get("sandboxclaims", ns, "a1")
        assert kube._fast.sent == 6 and kube._fast.connects == 1  # all but the LIST
    finally:
        await kube.aclose()
