"""A minimal synchronous Kubernetes API client over httpx (only the calls the SDK needs;
requests, errors and watch decisions are _k8s's)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from . import _k8s
from ._kubeconfig import KubeConfig
from .errors import NotFoundError, SandboxError


class WatchStop:
    """Ends, from another thread, the watch a wait runs: its socket is shut down (closing
    the response does not wake a blocked read). Once stopped it stays stopped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._resp: httpx.Response | None = None
        self.stopped = False

    def attach(self, resp: httpx.Response) -> bool:
        """Registers the watch's response; False when the wait was stopped already."""
        with self._lock:
            self._resp = None if self.stopped else resp
            return not self.stopped

    def detach(self) -> None:
        with self._lock:
            self._resp = None

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            resp, self._resp = self._resp, None
        stream = resp.extensions.get("network_stream") if resp is not None else None
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed: the watch is over


class KubeClient:
    """Borrows nothing: owns its httpx.Client; close() releases it."""

    def __init__(self, cfg: KubeConfig, timeout: float = 30.0) -> None:
        self.cfg = cfg
        self.claim_watch_delay = _k8s.CLAIM_WATCH_DELAY
        self.http = httpx.Client(
            **_k8s.client_options(cfg, timeout), transport=httpx.HTTPTransport(verify=cfg.ssl_context(), retries=2)
        )

    def close(self) -> None:
        self.http.close()

    def _call(self, c: _k8s.ApiCall) -> dict[str, Any]:
        with _k8s.reaching(c.what, self.cfg.server):
            resp = self.http.request(c.method, c.url, **c.kw)
        return _k8s.api_result(resp, c.what)

    def get(self, resource: str, ns: str, name: str) -> dict[str, Any]:
        return self._call(_k8s.get_call(resource, ns, name))

    def list(self, resource: str, ns: str, label_selector: str | None = None) -> dict[str, Any]:
        return self._call(_k8s.list_call(resource, ns, label_selector))

    def create(self, resource: str, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call(_k8s.create_call(resource, ns, body))

    def patch(self, resource: str, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._call(_k8s.patch_call(resource, ns, name, patch))

    def delete(self, resource: str, ns: str, name: str) -> bool:
        """Deletes (background propagation). Returns False when it was already gone."""
        try:
            self._call(_k8s.delete_call(resource, ns, name))
        except NotFoundError:
            return False
        return True

    def watch(
        self,
        resource: str,
        ns: str,
        name: str,
        rv: str,
        timeout: float,
        selector: str = "",
        stop: WatchStop | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Watch events of one object (or of those a label selector picks) from
        resourceVersion rv, for at most timeout; a stop() ends it quietly."""
        c = _k8s.watch_call(resource, ns, name, rv, timeout, selector)
        with _k8s.watching(c.what, streaming=False):
            resp = self.http.send(self.http.build_request(c.method, c.url, **c.kw), stream=True)
        try:
            if stop is not None and not stop.attach(resp):
                return
            with _k8s.watching(c.what, streaming=True):
                if resp.status_code >= 400:
                    resp.read()
                    raise _k8s.api_error(resp, c.what)
                for line in resp.iter_lines():
                    if ev := _k8s.parse_watch_line(line):
                        yield ev
        except SandboxError:
            if stop is None or not stop.stopped:
                raise
        finally:
            if stop is not None:
                stop.detach()
            resp.close()

    def wait(
        self,
        resource: str,
        ns: str,
        name: str,
        obj: dict[str, Any] | None,
        timeout: float,
        w: _k8s.Wait,
        step: _k8s.Step,
        stop: WatchStop | None = None,
    ) -> dict[str, Any]:
        """Waits by watch until step() marks w done. obj is a current copy (from a create or
        a get) to evaluate first and to watch from; None gets it. A stop() ends the wait
        with w not done."""
        loop = _k8s.WaitLoop(resource, ns, name, timeout, w, step)
        if loop.first(obj if obj is not None else self.get(resource, ns, name)):
            return loop.obj
        return self._watch_loop(loop, "", stop)

    def _watch_loop(self, loop: _k8s.WaitLoop, selector: str, stop: WatchStop | None) -> dict[str, Any]:
        while (left := loop.left()) > 0:
            for etype, o in self.watch(loop.resource, loop.ns, loop.name, loop.start(), left, selector, stop):
                if loop.event(etype, o):
                    break
            if loop.w.done or (stop is not None and stop.stopped):
                return loop.obj
            if (pause := loop.pause()) is not None:
                time.sleep(pause)
        raise loop.timeout_error()

    def wait_claim(self, ns: str, name: str, claim: dict[str, Any], timeout: float, w: _k8s.Wait) -> dict[str, Any]:
        """Waits until the claim is Ready, or sooner until a Sandbox is handed out to it
        (_k8s.handed_out: one API write sooner). Sets w.sandbox; returns the Sandbox when
        that is what ended the wait, else {}. The claim's own failures end it as before;
        a hand-out watch the server refuses (say, no watch permission on Sandboxes)
        leaves the claim to decide.

        The Sandboxes are watched on the caller's thread; the claim on a helper thread,
        from claim_watch_delay on (at once when the Sandbox watch is refused): a warm
        hand-out ends the wait with one watch and no thread switch."""
        uid = _k8s.handout_uid(claim)
        _k8s.on_claim_event(w, "ADDED", claim)  # raises when it failed already
        if not uid or w.done:  # (a claim that is Ready already: wait_ready)
            self.wait("sandboxclaims", ns, name, claim, timeout, w, _k8s.on_claim_event)
            return {}
        hw = _k8s.Wait("Sandbox", "")
        claim_stop, hand_stop = WatchStop(), WatchStop()
        now = threading.Event()
        failed: list[BaseException] = []

        def claim_wait() -> None:
            now.wait(self.claim_watch_delay)
            if claim_stop.stopped:
                return
            try:
                self.wait("sandboxclaims", ns, name, claim, timeout, w, _k8s.on_claim_event, claim_stop)
            except BaseException as e:  # raised again on the caller's thread
                failed.append(e)
            hand_stop.stop()  # the claim decided (unless the hand-out stopped it)

        t = threading.Thread(target=claim_wait, name="agent-sandbox-claim-wait", daemon=True)
        t.start()
        obj: dict[str, Any] = {}
        try:
            try:
                obj = self._watch_loop(
                    _k8s.handout_loop(ns, claim, uid, timeout, hw), _k8s.handout_selector(uid), hand_stop
                )
            except SandboxError:
                pass  # no hand-out watch: the claim decides
            if hw.done:
                claim_stop.stop()
        except BaseException:
            claim_stop.stop()
            raise
        finally:
            now.set()
            t.join()
        self.claim_watch_delay = _k8s.next_claim_watch_delay(hw.done, w.done, self.claim_watch_delay)
        if hw.done:
            w.sandbox, w.ready, w.done = hw.sandbox, True, True
            return obj
        if failed:
            raise failed[0]
        return {}
