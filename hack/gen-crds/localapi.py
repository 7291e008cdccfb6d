# SPDX-License-Identifier: Apache-2.0
"""A throwaway etcd + kube-apiserver on 127.0.0.1, and a tiny REST client for it.

Used by gen_crds.py (to fetch the OpenAPI documents) and by tests/crds (to apply
and exercise the CRDs). Everything lives in a temporary directory that is removed
on stop(); both processes run in their own session and are killed on stop(),
on normal exit and on SIGTERM/SIGINT of the owning Python process.

    with LocalAPIServer(bindir) as api:
        status, headers, body = api.request("GET", "/version")

Authentication is a random static bearer token for user "admin" in group
system:masters. The serving certificate is the self-signed one kube-apiserver
generates in its --cert-dir; the client verifies it against that file.
"""

import atexit
import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

__all__ = ["LocalAPIServer", "APIError", "free_port"]

SERVICE_CIDR = "10.96.0.0/16"


class APIError(Exception):
    """Raised when the server cannot be started or a request fails at transport level."""


def free_port():
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_port_pair():
    """Return p such that p and p + 1 are both free (etcd client + peer)."""
    for _ in range(50):
        p = free_port()
        if p >= 65535:
            continue
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise APIError("no free port pair found")


class LocalAPIServer:
    """etcd + kube-apiserver bound to 127.0.0.1, state in a temp dir."""

    def __init__(self, bindir, timeout=180, log=None):
        self.bindir = bindir
        self.timeout = timeout
        self.log = log or (lambda msg: None)
        self.dir = None
        self.procs = []
        self.port = None
        self.token = None
        self._ctx = None

    # --- lifecycle -------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        for b in ("etcd", "kube-apiserver"):
            if not os.access(os.path.join(self.bindir, b), os.X_OK):
                raise APIError(
                    f"{self.bindir}/{b} missing: run hack/build-k8s.sh etcd kube-apiserver"
                )
        self.dir = tempfile.mkdtemp(prefix="as-crds-apiserver-")
        atexit.register(self.stop)
        self._install_signal_handlers()
        try:
            self._prepare()
            self._start_etcd()
            self._start_apiserver()
        except BaseException:
            self._dump_logs()
            self.stop()
            raise

    def stop(self):
        for p in reversed(self.procs):
            _kill_group(p)
        self.procs = []
        if self.dir and os.path.isdir(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def _install_signal_handlers(self):
        def handler(signum, frame):
            self.stop()
            raise SystemExit(128 + signum)

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, handler)

    def _prepare(self):
        self.token = os.urandom(16).hex()
        with open(self._path("tokens.csv"), "w") as f:
            f.write(f'{self.token},admin,uid-admin,"system:masters"\n')
        key = self._path("sa.key")
        _run(["openssl", "genrsa", "-out", key, "2048"])
        _run(["openssl", "rsa", "-in", key, "-pubout", "-out", self._path("sa.pub")])

    def _start_etcd(self):
        self.etcd_port = _free_port_pair()
        peer = self.etcd_port + 1
        self._launch(
            "etcd",
            "--name=crds",
            f"--data-dir={self._path('etcd')}",
            f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=crds=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        )
        url = f"http://127.0.0.1:{self.etcd_port}/health"
        self._wait("etcd", lambda: b'"health":"true"' in _plain_get(url))

    def _start_apiserver(self):
        self.port = free_port()
        self._launch(
            "kube-apiserver",
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={self._path('certs')}",
            f"--token-auth-file={self._path('tokens.csv')}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self._path('sa.pub')}",
            f"--service-account-signing-key-file={self._path('sa.key')}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--profiling=false",
            "--v=0",
        )
        self._wait("kube-apiserver", self._ready)

    def _ready(self):
        if self._ctx is None:
            crt = self._path("certs", "apiserver.crt")
            if not os.path.exists(crt):
                return False
            ctx = ssl.create_default_context(cafile=crt)
            self._ctx = ctx
        try:
            status, _, body = self.request("GET", "/readyz", timeout=5)
        except APIError:
            return False
        return status == 200 and body.strip() == b"ok"

    def _launch(self, name, *args):
        logf = open(self._path(f"{name}.log"), "ab")
        try:
            p = subprocess.Popen(
                [os.path.join(self.bindir, name), *args],
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            logf.close()
        p.as_name = name
        self.procs.append(p)
        self.log(f"started {name} (pid {p.pid})")

    def _wait(self, name, cond):
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise APIError(f"{p.as_name} exited with status {p.returncode}")
            if cond():
                self.log(f"{name} ready")
                return
            time.sleep(0.2)
        raise APIError(f"{name} not ready after {self.timeout}s")

    def _dump_logs(self):
        if not self.dir:
            return
        for p in self.procs:
            path = self._path(f"{p.as_name}.log")
            try:
                with open(path, "rb") as f:
                    tail = f.read()[-3000:].decode("utf-8", "replace")
            except OSError:
                continue
            self.log(f"--- last output of {p.as_name} ---\n{tail}")

    def _path(self, *parts):
        return os.path.join(self.dir, *parts)

    def write_kubeconfig(self, path):
        """Write an admin kubeconfig for this server (token auth) to path."""
        with open(self._path("certs", "apiserver.crt"), "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        text = (
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{self.port}\n"
            f"    certificate-authority-data: {ca}\n"
            f"users:\n- name: admin\n  user:\n    token: {self.token}\n"
            "contexts:\n- name: local\n  context:\n    cluster: local\n    user: admin\n"
            "    namespace: default\ncurrent-context: local\n"
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)

    # --- client ----------------------------------------------------------------

    def request(self, method, path, body=None, content_type="application/json",
                accept="application/json", timeout=60):
        """Send one request; returns (status, headers, body bytes). HTTP errors
        are returned, not raised; transport errors raise APIError."""
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(
            f"https://127.0.0.1:{self.port}{path}", data=data, method=method
        )
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", accept)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._ctx, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()
        except (urllib.error.URLError, OSError) as e:
            raise APIError(f"{method} {path}: {e}") from e

    def json(self, method, path, body=None, **kw):
        """request() and decode a JSON body; returns (status, object or None)."""
        status, _, raw = self.request(method, path, body, **kw)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, {"raw": raw.decode("utf-8", "replace")}


def _kill_group(p, grace=10.0):
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def _run(argv):
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise APIError(f"{' '.join(argv)}: {r.stderr.decode(errors='replace').strip()}")


def _plain_get(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.read()
    except (urllib.error.URLError, OSError):
        return b""
