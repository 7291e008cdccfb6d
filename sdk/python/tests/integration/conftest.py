"""Fixtures for the integration tests.

* A real sandboxd binary (``$AGENT_SANDBOX_SANDBOXD`` or build/*/sandboxd of this repo),
  started on 127.0.0.1 with a temporary root.
* The real stack: ``$AGENT_SANDBOX_KUBECONFIG`` (or ``$KUBECONFIG``), namespace
  ``$AGENT_SANDBOX_NAMESPACE`` (default "default"), warm pool ``$AGENT_SANDBOX_POOL``
  (default: the first SandboxWarmPool of the namespace), router
  ``$AGENT_SANDBOX_ROUTER_URL`` / ``$AGENT_SANDBOX_ROUTER_TOKEN``. Whatever is missing
  makes the tests that need it skip with the reason."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_sandbox_sdk import KubeConfig, SandboxError, load_kubeconfig
from agent_sandbox_sdk._kube_sync import KubeClient

REPO = Path(__file__).resolve().parents[4]


def _find_sandboxd() -> str | None:
    env = os.environ.get("AGENT_SANDBOX_SANDBOXD")
    if env:
        return env
    cands = sorted(REPO.glob("build/*/sandboxd"), key=lambda p: p.stat().st_mtime, reverse=True)
    return str(cands[0]) if cands else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def sandboxd_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _find_sandboxd()
    if not binary or not os.access(binary, os.X_OK):
        pytest.skip("no sandboxd binary: build it (ninja sandboxd) or set $AGENT_SANDBOX_SANDBOXD")
    root = tmp_path_factory.mktemp("sbd-root")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("sbd-log") / "sandboxd.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            binary,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--legacy-port",
            "-1",
            "--grpc-port",
            "0",
            "--root",
            str(root),
            # keepalives every 0.3 s (15 s by default): every call that waits on sandboxd
            # longer meets a late answer's leading spaces and the keepalive events
            "--process-keepalive",
            "0.3",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        # Code contexts run the kernel driver from the source tree.
        env={"SANDBOXD_KERNEL_DRIVER": str(REPO / "src/sandboxd/driver/kernel.py"), **os.environ},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("sandboxd did not become healthy")
    yield url
    proc.terminate()
    proc.wait(10)
    log.close()


class Stack:
    def __init__(self, cfg: KubeConfig, kubeconfig: str, namespace: str, pool: str) -> None:
        self.cfg = cfg
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.pool = pool
        self.router_url = os.environ.get("AGENT_SANDBOX_ROUTER_URL", "")
        self.router_token = os.environ.get("AGENT_SANDBOX_ROUTER_TOKEN") or None


@pytest.fixture(scope="session")
def stack() -> Stack:
    kc = os.environ.get("AGENT_SANDBOX_KUBECONFIG") or os.environ.get("KUBECONFIG")
    if not kc or not Path(kc).exists():
        pytest.skip("the stack is not up: set $AGENT_SANDBOX_KUBECONFIG (make up; make -s kubeconfig)")
    cfg = load_kubeconfig(kc)
    ns = os.environ.get("AGENT_SANDBOX_NAMESPACE", "default")
    kube = KubeClient(cfg, timeout=5)
    try:
        pools = kube.list("sandboxwarmpools", ns).get("items") or []
    except SandboxError as e:
        pytest.skip(f"the stack is not usable: {e}")
    finally:
        kube.close()
    pool = os.environ.get("AGENT_SANDBOX_POOL") or (pools[0]["metadata"]["name"] if pools else "")
    if not pool:
        pytest.skip(f"no SandboxWarmPool in namespace {ns}: make up installs one (or set $AGENT_SANDBOX_POOL)")
    return Stack(cfg, kc, ns, pool)


class BareServer:
    """A real kube-apiserver with the CRDs and no controller: a test plays the controller."""

    def __init__(self, kubeconfig: str, alice: str) -> None:
        self.kubeconfig = kubeconfig
        self.alice = alice  # kubeconfig of the test user alice (group as:testers)
        self.cfg = load_kubeconfig(kubeconfig)


def _run(cmd: list[str], env: dict[str, str], what: str) -> str:
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    if r.returncode != 0:
        pytest.fail(f"{what}: exit {r.returncode}: {r.stderr.strip()[-800:]}")
    return r.stdout


def _served(cfg: KubeConfig) -> None:
    """Waits until the new CRDs' storage answers lists (a fresh one says 429 for a while)."""
    kube = KubeClient(cfg, timeout=5)
    deadline = time.monotonic() + 60
    try:
        for resource in ("sandboxes", "sandboxclaims"):
            while True:
                try:
                    kube.list(resource, "default")
                    break
                except SandboxError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
    finally:
        kube.close()


@pytest.fixture(scope="session")
def bare_server() -> Iterator[BareServer]:
    """hack/apiserver.sh with its own state dir ($AGENT_SANDBOX_BARE_DIR, default
    .cache/sdk-apiserver), started when not running and stopped again at the end."""
    cache = Path(os.environ.get("AGENT_SANDBOX_CACHE") or REPO / ".cache")
    kubectl = cache / "bin/kubectl"
    if not (cache / "bin/kube-apiserver").exists() or not kubectl.exists():
        pytest.skip("no kube-apiserver/kubectl under .cache/bin: run hack/deps.sh --cluster")
    d = os.environ.get("AGENT_SANDBOX_BARE_DIR") or str(cache / "sdk-apiserver")
    env = {**os.environ, "AS_APISERVER_DIR": d, "AS_APISERVER_CONTROLLERS": "none"}
    script = str(REPO / "hack/apiserver.sh")
    running = subprocess.run([script, "status"], env=env, capture_output=True, cwd=REPO).returncode == 0
    kc = _run([script, "start"], env, "hack/apiserver.sh start").strip().splitlines()[-1]
    try:
        crds = str(REPO / "api/crds")
        _run([str(kubectl), "--kubeconfig", kc, "apply", "--server-side", "--force-conflicts", "-f", crds], env, "CRDs")
        _run([str(kubectl), "--kubeconfig", kc, "wait", "--for", "condition=established", "-f", crds], env, "CRDs")
        bare = BareServer(kc, str(Path(d) / "kubeconfig-alice"))
        _served(bare.cfg)
        yield bare
    finally:
        if not running and not os.environ.get("AGENT_SANDBOX_KEEP_BARE"):
            subprocess.run([script, "stop"], env=env, capture_output=True, cwd=REPO)


NS_LABEL = {"agent-sandbox.test/integration": "true"}  # hack/apiserver.sh sweep deletes leftovers


@pytest.fixture
def ns(bare_server: BareServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own on the bare server ("sdk-<module>-<random>"),
    deleted after it."""
    kube = KubeClient(bare_server.cfg, timeout=10)
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    name = f"sdk-{module}-{secrets.token_hex(4)}"
    resp = kube.http.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": NS_LABEL}})
    assert resp.status_code == 201, resp.text
    try:
        yield name
    finally:
        kube.http.delete(f"/api/v1/namespaces/{name}")
        kube.close()
