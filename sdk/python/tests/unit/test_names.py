"""Names of claims and sandboxes: a name that would change a request's URL is refused
before any request (get, delete, patch, create); a name only the server refuses
(uppercase, too long) reaches it and gets its 404; create() checks the caller's name and
matches names whole (no trailing line end); a name create() draws is drawn again when
taken (a bounded number of times), and create(name="") draws one."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from agent_sandbox_sdk import NotFoundError, RequestError, _k8s

from .fakes import FakeKube, httpx_async_client, httpx_sync_client
from .test_client_fake import bind_on_create

pytestmark = pytest.mark.usefixtures("no_backoff")


# ---- unsafe names make no request, invalid ones are not created -------------------

UNSAFE_NAMES = ["", "a/b", "a b", ".", "..", "a?b", "a#b", "a%2Fb", "a\\b", "a\tb", "a\x00b", "abc\n"]
INVALID_NAMES = ["Upper", "a_b", "-a", "a" * 254]


@pytest.mark.parametrize("name", UNSAFE_NAMES)
def test_get_and_delete_with_an_unsafe_name_make_no_request(name: str) -> None:
    fake = FakeKube()
    fake.put("sandboxclaims", {"metadata": {"name": "cl"}, "spec": {}})
    c = httpx_sync_client(fake)
    with pytest.raises(ValueError):
        c.get(name, timeout=5)
    with pytest.raises(ValueError):
        c.delete(name)  # "" was a DELETE of the collection: every claim of the namespace
    if name:  # create(name="") draws a name (test_create_with_an_empty_name_draws_one)
        with pytest.raises(ValueError):
            c.create("pool", name=name)
    assert fake.requests == []
    assert ("sandboxclaims", "default", "cl") in fake.store


@pytest.mark.parametrize("name", UNSAFE_NAMES)
async def test_async_get_and_delete_with_an_unsafe_name_make_no_request(name: str) -> None:
    fake = FakeKube()
    async with httpx_async_client(fake) as c:
        with pytest.raises(ValueError):
            await c.get(name, timeout=5)
        with pytest.raises(ValueError):
            await c.delete(name)
    assert fake.requests == []


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_create_refuses_an_invalid_name(name: str) -> None:
    fake = FakeKube()
    with pytest.raises(ValueError):
        httpx_sync_client(fake).create("pool", name=name)
    assert fake.requests == []


def test_valid_names() -> None:
    for name in ("a", "sandbox-claim-1f2e", "a.b-c", "0" * 253):
        assert _k8s.check_name(name) == name


# ---- names only the server refuses reach it ----------------------------------------


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_get_and_delete_send_a_name_only_the_server_refuses(name: str) -> None:
    fake = FakeKube()
    c = httpx_sync_client(fake)
    with pytest.raises(NotFoundError):
        c.get(name, timeout=5)
    assert c.delete(name) is False  # documented: False when nothing has that name
    assert fake.calls("GET", r"/sandboxes/") and fake.calls("DELETE", r"/sandboxclaims/")


@pytest.mark.parametrize("name", INVALID_NAMES)
async def test_async_get_and_delete_send_a_name_only_the_server_refuses(name: str) -> None:
    fake = FakeKube()
    async with httpx_async_client(fake) as c:
        with pytest.raises(NotFoundError):
            await c.get(name, timeout=5)
        assert await c.delete(name) is False


def test_patch_sends_a_name_only_the_server_refuses_and_not_an_unsafe_one() -> None:
    assert _k8s.patch_call("sandboxes", "ns", "Upper", {}).url.endswith("/sandboxes/Upper")
    for name in ("", "..", "a/b", "a?b"):
        with pytest.raises(ValueError):
            _k8s.patch_call("sandboxes", "ns", name, {})


@pytest.mark.parametrize("name", ["abc\n", "abc\r\n"])
def test_a_trailing_line_end_is_no_name(name: str) -> None:
    with pytest.raises(ValueError):
        _k8s.check_name(name)
    with pytest.raises(ValueError):
        _k8s.check_labels({"k": name})
    with pytest.raises(ValueError):
        _k8s.check_labels({name: "v"})
    with pytest.raises(ValueError):
        _k8s.check_labels({f"ex.com{name}/k": "v"})


# ---- names create() draws ------------------------------------------------------------


def drawn(monkeypatch: pytest.MonkeyPatch, suffixes: list[str]) -> None:
    it: Iterator[str] = iter(suffixes)
    monkeypatch.setattr(_k8s.secrets, "token_hex", lambda n: next(it))


def test_a_taken_name_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    theirs = fake.put("sandboxclaims", {"metadata": {"name": "sandbox-claim-taken"}, "spec": {}})
    drawn(monkeypatch, ["taken", "fresh"])
    sb = httpx_sync_client(fake).create("pool")
    assert sb.claim == "sandbox-claim-fresh" and sb.name == "sandbox-claim-fresh-sb"
    assert fake.store[("sandboxclaims", "default", "sandbox-claim-taken")] == theirs
    assert len(fake.calls("POST", r"/sandboxclaims$")) == 2 and not fake.calls("DELETE", r".")


async def test_async_a_taken_name_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    fake.put("sandboxclaims", {"metadata": {"name": "sandbox-claim-taken"}, "spec": {}})
    drawn(monkeypatch, ["taken", "fresh"])
    async with httpx_async_client(fake) as c:
        sb = await c.create("pool")
    assert sb.claim == "sandbox-claim-fresh" and ("sandboxclaims", "default", "sandbox-claim-taken") in fake.store


def test_names_are_drawn_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeKube()
    fake.put("sandboxclaims", {"metadata": {"name": "sandbox-claim-taken"}, "spec": {}})
    drawn(monkeypatch, ["taken"] * 10)
    with pytest.raises(RequestError) as ei:
        httpx_sync_client(fake).create("pool")
    assert (ei.value.status, ei.value.code) == (409, "AlreadyExists")
    assert len(fake.calls("POST", r"/sandboxclaims$")) == _k8s.CREATE_NAME_TRIES
    assert not fake.calls("DELETE", r".") and ("sandboxclaims", "default", "sandbox-claim-taken") in fake.store


def test_create_with_an_empty_name_draws_one() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    sb = httpx_sync_client(fake).create(pool="p", name="")
    [post] = fake.calls("POST", r"/sandboxclaims$")
    assert re.fullmatch(r"sandbox-claim-[0-9a-f]{8}", sb.claim)
    assert json.loads(post.content)["metadata"]["name"] == sb.claim


async def test_async_create_with_an_empty_name_draws_one() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    async with httpx_async_client(fake) as c:
        sb = await c.create(pool="p", name="")
    assert re.fullmatch(r"sandbox-claim-[0-9a-f]{8}", sb.claim)
    assert ("sandboxclaims", "default", sb.claim) in fake.store
