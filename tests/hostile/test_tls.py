#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The router's HTTPS listener against the real binary, with certificates made here.

Three routers serve one Sandbox whose pod IP is 127.0.0.1 and whose "pod" is an echo
server in this process: one with TLS only, one with mTLS required (--tls-client-ca-file),
one with --mtls-mode optional.
Checked: HTTPS requests (keep-alive, a streamed 2 MiB response, a WebSocket upgrade and
echo), plain HTTP to the TLS port fails, mTLS rejects a client without a certificate and
one whose certificate another CA signed and accepts a good one, a client certificate
authorizes a request without a token as its subject (CN user, O groups: RBAC allows
alice and the group of carol, bob gets 403; a token wins over the certificate; neither
gets 401; the access log's user and the metrics' source label), W3C traceparent and
tracestate reach the upstream unchanged, a rewritten certificate file is served from the
next connection on, --metrics-secure (401 without a token, 403 to a user without get on
/metrics, 200 to the admin, on the HTTPS metrics listener and the plain probe port), and
every line the routers log with --log-format=json parses.

  SANDBOX_ROUTER_BIN=build/asan/sandbox-router AS_KUBECONFIG=.cache/apiserver/kubeconfig \\
    python3 -m unittest -v tests/hostile/test_tls.py

Needs the `cryptography` package, SANDBOX_ROUTER_BIN, kubectl and an API server (as
tests/hostile/test_hostile.py); skipped otherwise.
"""
import datetime
import http.server
import ipaddress
import json
import os
import shutil
import signal
import select
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_hostile import (ENV, KUBECONFIG, KUBECTL, ROOT, ROUTER, admin_token,  # noqa: E402
                          cpu_ticks, free_port, kubectl, router_available, wait_port)

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    HAVE_CRYPTO = True
except ImportError:  # pragma: no cover
    HAVE_CRYPTO = False

BIG = 2 << 20
TRACE_ID, SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


# ---- certificates ---------------------------------------------------------------------

def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def make_leaf(ca, cn, server, orgs=()):
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs] +
                        [x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                               else ExtendedKeyUsageOID.CLIENT_AUTH]),
                        critical=False))
    if server:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return b.sign(ca_key, hashes.SHA256()), key


def write_pair(d, stem, pair):
    cert, key = pair
    cpath, kpath = os.path.join(d, stem + ".crt"), os.path.join(d, stem + ".key")
    with open(cpath + ".tmp", "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(kpath + ".tmp", "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    os.replace(kpath + ".tmp", kpath)
    os.replace(cpath + ".tmp", cpath)
    return cpath, kpath


# ---- the upstream "pod": echoes request headers, streams, upgrades ---------------------

class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.endswith("/close"):  # reads the request, closes without an answer
            self.close_connection = True
            return
        if self.path.endswith("/slow"):
            time.sleep(3)
        if self.path.endswith("/big"):
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"x" * 65536
            for _ in range(BIG // len(chunk)):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", "x")
            self.end_headers()
            self.wfile.flush()
            while True:  # raw echo of whatever comes through the tunnel
                data = self.connection.recv(65536)
                if not data:
                    break
                self.connection.sendall(data)
            self.close_connection = True
            return
        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


# ---- client helpers -------------------------------------------------------------------

def client_ctx(ca_path, cert=None):
    ctx = ssl.create_default_context(cafile=ca_path)
    if cert:
        ctx.load_cert_chain(*cert)
    return ctx


def read_response(s):
    """Reads one HTTP/1.1 response (Content-Length or chunked) from s; returns
    (status, headers dict, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise ConnectionError("closed before the head: %r" % buf[:200])
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    if "content-length" in hdrs:
        n = int(hdrs["content-length"])
        while len(rest) < n:
            rest += s.recv(65536)
        return status, hdrs, rest[:n]
    body = b""
    while True:  # chunked
        while b"\r\n" not in rest:
            rest += s.recv(65536)
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line.split(b";")[0], 16)
        while len(rest) < size + 2:
            d = s.recv(1 << 20)
            if not d:
                raise ConnectionError("closed inside a chunk")
            rest += d
        body += rest[:size]
        rest = rest[size + 2:]
        if size == 0:
            return status, hdrs, body


def user_token(name):
    path = os.path.join(os.path.dirname(KUBECONFIG), "tokens.csv")
    with open(path) as f:
        for line in f:
            tok, user = line.split(",")[:2]
            if user == name:
                return tok
    raise RuntimeError(f"no {name} in {path}")


def alice_token():
    return user_token("alice")


def can_i(ns, user, groups=()):
    """Whether RBAC lets user (with groups) get the Sandbox "box" in ns yet."""
    args = [KUBECTL, "--kubeconfig", KUBECONFIG, "-n", ns, "auth", "can-i", "get",
            "sandboxes.agents.x-k8s.io/box", "--as", user]
    for g in groups:
        args += ["--as-group", g]
    run = subprocess.run(args, check=False, capture_output=True, text=True)
    return run.stdout.strip() == "yes"


@unittest.skipUnless(HAVE_CRYPTO and router_available(),
                     "needs python cryptography, SANDBOX_ROUTER_BIN, kubectl and AS_KUBECONFIG")
class RouterTLS(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="router-tls-")
        cls.ns = "tls-" + uuid.uuid4().hex[:8]
        cls.ca, cls.client_ca, cls.other_ca = make_ca("srv-ca"), make_ca("cli-ca"), make_ca("x")
        cls.ca_path = write_pair(cls.dir, "ca", cls.ca)[0]
        cls.client_ca_path = write_pair(cls.dir, "client-ca", cls.client_ca)[0]
        cls.server = write_pair(cls.dir, "server", make_leaf(cls.ca, "router", True))
        cls.good = write_pair(cls.dir, "good", make_leaf(cls.client_ca, "alice", False))
        cls.bad = write_pair(cls.dir, "bad", make_leaf(cls.other_ca, "mallory", False))
        cls.bob = write_pair(cls.dir, "bob", make_leaf(cls.client_ca, "bob", False))
        cls.carol = write_pair(cls.dir, "carol", make_leaf(cls.client_ca, "carol", False,
                                                           ("sandbox-users", "other")))
        cls.echo = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
        cls.echo.daemon_threads = True
        threading.Thread(target=cls.echo.serve_forever, daemon=True).start()
        cls.eport = cls.echo.server_address[1]
        kubectl("apply", "--server-side", "--force-conflicts", "-f",
                os.path.join(ROOT, "api/crds/agents.x-k8s.io_sandboxes.yaml"))
        for attempt in range(50):  # a CRD just created may not be found yet
            try:
                kubectl("wait", "--for=condition=Established", "--timeout=60s",
                        "crd/sandboxes.agents.x-k8s.io")
                break
            except subprocess.CalledProcessError:
                if attempt == 49:
                    raise
                time.sleep(0.2)
        kubectl("create", "namespace", cls.ns)
        kubectl("label", "namespace", cls.ns, "agent-sandbox.test/integration=true")
        kubectl("-n", cls.ns, "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": "box"},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "r", "image": "i"}]}}}}))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        kubectl("-n", cls.ns, "patch", "sandbox", "box", "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": {
                    "podIPs": ["127.0.0.1"], "conditions": [{
                        "type": "Ready", "status": "True", "reason": "DependenciesReady",
                        "message": "", "lastTransitionTime": now}]}}))
        # RBAC for the client certificates: user alice and group sandbox-users may get the
        # Sandbox; bob (and carol's other group) may not.
        kubectl("-n", cls.ns, "create", "role", "sandbox-get", "--verb=get",
                "--resource=sandboxes.agents.x-k8s.io")
        kubectl("-n", cls.ns, "create", "rolebinding", "sandbox-get", "--role=sandbox-get",
                "--user=alice", "--group=sandbox-users")
        cls.auth = f"Authorization: Bearer {admin_token()}\r\n"
        cls.cert_user_logged = False  # test_client_cert_identity ran
        cls.base = f"/s/{cls.ns}/box/{cls.eport}"
        cls.routers, cls.hports = {}, {}
        cls.traced = False  # test_trace_context_passed_through ran
        cls.mport = free_port()
        cls.start_router("tls", ["--metrics-secure", "--metrics-bind-address",
                                 f"127.0.0.1:{cls.mport}"])
        cls.start_router("mtls", ["--tls-client-ca-file", cls.client_ca_path])
        cls.start_router("optional", ["--tls-client-ca-file", cls.client_ca_path,
                                      "--mtls-mode", "optional"])
        cls.wait_routes()

    @classmethod
    def start_router(cls, name, extra):
        port, tport, hport = free_port(), free_port(), free_port()
        log = open(os.path.join(cls.dir, name + ".log"), "wb")
        p = subprocess.Popen([ROUTER, "--http-bind-address", f"127.0.0.1:{port}",
                              "--https-bind-address", f"127.0.0.1:{tport}",
                              "--tls-cert-file", cls.server[0], "--tls-key-file", cls.server[1],
                              "--health-probe-bind-address", f"127.0.0.1:{hport}",
                              "--kubeconfig", KUBECONFIG, "--namespace", cls.ns,
                              "--allow-loopback-upstreams", "--trust-loopback", "false",
                              "--log-format", "json", *extra],
                             env=ENV, stdout=log, stderr=log)
        wait_port(tport, p, "router " + name)
        cls.routers[name] = (p, tport, log)
        cls.hports[name] = hport

    @classmethod
    def wait_routes(cls):
        end = time.monotonic() + 30
        while time.monotonic() < end:  # the routers' caches see the Sandbox
            try:
                if all(cls.get_once(n)[0] == 200 for n in cls.routers):
                    return
            except (OSError, ConnectionError):
                pass
            time.sleep(0.2)
        raise RuntimeError("the routers never routed to the Sandbox")

    @classmethod
    def tls_conn(cls, name, cert=None):
        if cert is None and name == "mtls":
            cert = cls.good
        ctx = client_ctx(cls.ca_path, cert or None)  # () or None: no certificate
        raw = socket.create_connection(("127.0.0.1", cls.routers[name][1]), timeout=10)
        return ctx.wrap_socket(raw, server_hostname="localhost")

    @classmethod
    def get_once(cls, name, path="/echo", extra="", cert=None, auth=None):
        """auth: the Authorization header line ("" for none); None: the admin's token."""
        auth = cls.auth if auth is None else auth
        with cls.tls_conn(name, cert) as s:
            s.sendall(f"GET {cls.base}{path} HTTP/1.1\r\nHost: x\r\n{auth}{extra}"
                      "Connection: close\r\n\r\n".encode())
            return read_response(s)

    @classmethod
    def tearDownClass(cls):
        rcs = []
        for p, _, log in cls.routers.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            rcs.append(p.wait(timeout=40))
            log.close()
        cls.echo.shutdown()
        cls.echo.server_close()
        logs = {}
        for n in cls.routers:
            with open(os.path.join(cls.dir, n + ".log"), "rb") as f:
                logs[n] = f.read()
        subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "delete", "namespace", cls.ns,
                        "--wait=false"], capture_output=True)
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert rcs == [0] * len(rcs), f"exit codes {rcs}: {logs!r}"[-3000:]
        access = []
        for name, text in logs.items():  # --log-format=json: every line parses
            lines = text.decode().splitlines()
            assert lines, name
            for line in lines:
                obj = json.loads(line)
                assert {"ts", "level", "logger", "msg"} <= obj.keys(), line
                assert obj["logger"] == "sandbox-router", line
                if obj["msg"] == "access":
                    access.append(obj)
        # the access log: the TLS client's own address, and the ids of a traceparent
        assert access and all(a["client_ip"] == "127.0.0.1" for a in access), access[:3]
        # the user a client certificate named, in the access log's user field
        assert not cls.cert_user_logged or any(
            a.get("user") == "carol" and str(a.get("status")) == "200" for a in access), access
        assert not cls.traced or any(a.get("trace_id") == TRACE_ID and
                                     a.get("span_id") == SPAN_ID for a in access), access

    # ---- TLS ----------------------------------------------------------------------------

    def test_https_keepalive(self):
        with self.tls_conn("tls") as s:
            self.assertEqual(s.version() in ("TLSv1.2", "TLSv1.3"), True)
            for i in range(3):
                s.sendall(f"GET {self.base}/echo?i={i} HTTP/1.1\r\nHost: x\r\n{self.auth}"
                          "\r\n".encode())
                status, _, body = read_response(s)
                self.assertEqual(status, 200, body[:200])
                seen = json.loads(body)
                self.assertEqual(seen.get("x-forwarded-for"), "127.0.0.1")
                self.assertEqual(seen.get("x-forwarded-proto"), "https")

    def test_https_streamed_body(self):
        status, hdrs, body = self.get_once("tls", "/big")
        self.assertEqual(status, 200)
        self.assertEqual(len(body), BIG)
        self.assertEqual(body.count(b"x"), BIG)

    def test_websocket_over_tls(self):
        with self.tls_conn("tls") as s:
            s.sendall(f"GET {self.base}/ws HTTP/1.1\r\nHost: x\r\n{self.auth}"
                      "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                d = s.recv(4096)
                self.assertTrue(d, head)
                head += d
            self.assertTrue(head.startswith(b"HTTP/1.1 101"), head[:200])
            rest = head.split(b"\r\n\r\n", 1)[1]
            payload = os.urandom(300000)
            s.sendall(payload)
            got = rest
            while len(got) < len(payload):
                d = s.recv(65536)
                self.assertTrue(d, len(got))
                got += d
            self.assertEqual(got, payload)

    def test_reset_client_does_not_spin(self):
        """A client that resets its TLS connection while the sandbox is still working:
        the bridge thread must wait for the sandbox's answer, not spin on the dead
        socket."""
        s = self.tls_conn("tls")
        s.sendall(f"GET {self.base}/slow HTTP/1.1\r\nHost: x\r\n{self.auth}\r\n".encode())
        time.sleep(0.3)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # linger 0: a reset
        pid = self.routers["tls"][0].pid
        before = cpu_ticks(pid)
        time.sleep(2)
        used = cpu_ticks(pid) - before  # clock ticks, 100 a second
        self.assertLess(used, 60, f"the router used {used} ticks in 2 s")
        self.assertEqual(self.get_once("tls")[0], 200)

    def test_handshake_trickle_times_out(self):
        """A client that trickles its ClientHello a byte a second: the handshake's 10 s
        bound is for the whole handshake, not for each read, so the router closes it."""
        t0 = time.monotonic()
        closed = None
        with socket.create_connection(("127.0.0.1", self.routers["tls"][1]), timeout=10) as s:
            s.sendall(b"\x16\x03\x01\x02\x00")  # a handshake record of 512 bytes
            while time.monotonic() - t0 < 25:
                time.sleep(1)
                r, _, _ = select.select([s], [], [], 0)
                try:
                    if r and not s.recv(64):
                        closed = time.monotonic() - t0
                        break
                    s.sendall(b"\x01")
                except (ConnectionResetError, BrokenPipeError):
                    closed = time.monotonic() - t0
                    break
        self.assertIsNotNone(closed, "the router kept a trickling handshake open for 25 s")
        self.assertLess(closed, 15)

    def test_upstream_closes_before_answering(self):
        """A sandbox that closes the connection after reading the request: 502, and not
        the "Could not connect" of a request that never left, after which the SDKs send a
        call that must not run twice again."""
        status, _, body = self.get_once("tls", "/close")
        self.assertEqual(status, 502)
        self.assertIn(b"closed the connection", body)
        self.assertNotIn(b"Could not connect", body)

    def test_plain_http_to_tls_port_fails(self):
        with socket.create_connection(("127.0.0.1", self.routers["tls"][1]), timeout=10) as s:
            s.sendall(f"GET {self.base}/echo HTTP/1.1\r\nHost: x\r\n{self.auth}"
                      "Connection: close\r\n\r\n".encode())
            got = b""
            try:
                while True:
                    d = s.recv(4096)
                    if not d:
                        break
                    got += d
            except ConnectionResetError:
                pass
        self.assertFalse(got.startswith(b"HTTP/"), got[:200])

    def test_client_must_verify_server(self):
        ctx = client_ctx(self.client_ca_path)  # the wrong CA for the server
        with socket.create_connection(("127.0.0.1", self.routers["tls"][1]), timeout=10) as raw:
            with self.assertRaises(ssl.SSLCertVerificationError):
                ctx.wrap_socket(raw, server_hostname="localhost")

    # ---- mTLS ---------------------------------------------------------------------------

    def rejected(self, cert, name="mtls"):
        ctx = client_ctx(self.ca_path, cert)
        try:
            with socket.create_connection(("127.0.0.1", self.routers[name][1]),
                                          timeout=10) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    s.sendall(f"GET {self.base}/echo HTTP/1.1\r\nHost: x\r\n{self.auth}"
                              "Connection: close\r\n\r\n".encode())
                    data = s.recv(4096)  # TLS 1.3: the alert arrives here
                    return data == b""
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return True

    def test_mtls_rejects_no_certificate(self):
        self.assertTrue(self.rejected(None))

    def test_mtls_rejects_other_ca(self):
        self.assertTrue(self.rejected(self.bad))

    def test_mtls_optional(self):
        status, _, body = self.get_once("optional", cert=())  # no certificate: fine
        self.assertEqual(status, 200, body[:200])
        self.assertEqual(self.get_once("optional", cert=self.good)[0], 200)
        self.assertTrue(self.rejected(self.bad, "optional"))  # a bad one is not

    def test_mtls_accepts_good_certificate(self):
        status, _, body = self.get_once("mtls", cert=self.good)
        self.assertEqual(status, 200, body[:200])

    # ---- client certificate identity (--client-cert-auth, on with a CA file) -----------

    def wait_rbac(self, user, groups=()):
        end = time.monotonic() + 30
        while not can_i(self.ns, user, groups):  # RBAC reaches the authorizer's cache
            self.assertLess(time.monotonic(), end, f"RBAC never allowed {user}")
            time.sleep(0.2)

    def test_client_cert_identity(self):
        self.wait_rbac("alice")
        self.wait_rbac("carol", ["sandbox-users", "other", "system:authenticated"])
        bob_token = f"Authorization: Bearer {user_token('bob')}\r\n"
        for name in ("mtls", "optional"):
            # CN=alice, RBAC for the user alice: no token needed
            status, _, body = self.get_once(name, cert=self.good, auth="")
            self.assertEqual(status, 200, (name, body[:200]))
            # CN=carol, O=sandbox-users: allowed through the group
            status, _, body = self.get_once(name, cert=self.carol, auth="")
            self.assertEqual(status, 200, (name, body[:200]))
            # CN=bob has no RBAC
            status, _, body = self.get_once(name, cert=self.bob, auth="")
            self.assertEqual(status, 403, (name, body[:200]))
            # a token wins over the certificate, both ways
            self.assertEqual(self.get_once(name, cert=self.bob)[0], 200, name)
            status, _, body = self.get_once(name, cert=self.good, auth=bob_token)
            self.assertEqual(status, 403, (name, body[:200]))
        # no certificate (optional mTLS) and no token
        status, hdrs, body = self.get_once("optional", cert=(), auth="")
        self.assertEqual(status, 401, body[:200])
        self.assertEqual(hdrs.get("www-authenticate"), "Bearer")
        type(self).cert_user_logged = True
        # the decisions by source (the mTLS router's plain probe port serves /metrics)
        with socket.create_connection(("127.0.0.1", self.hports["mtls"]), timeout=10) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            status, _, body = read_response(s)
        self.assertEqual(status, 200)
        text = body.decode()
        self.assertIn(f'sandbox_router_authz_decisions_total{{sandbox_namespace="{self.ns}",'
                      'decision="allow",source="client-cert"}', text)
        self.assertIn('decision="deny",source="client-cert"}', text)
        self.assertIn('decision="allow",source="token"}', text)

    def test_client_cert_auth_flag_needs_ca(self):
        for extra in (["--client-cert-auth"], ["--client-cert-auth=true"],
                      ["--tls-client-ca-file", self.client_ca_path, "--mtls-mode", "off",
                       "--client-cert-auth"]):
            p = subprocess.run([ROUTER, "--https-bind-address", "127.0.0.1:0",
                                "--tls-cert-file", self.server[0],
                                "--tls-key-file", self.server[1], *extra],
                               check=False, env=ENV, capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("--client-cert-auth needs", p.stderr)

    # ---- --metrics-secure ----------------------------------------------------------------

    def scrape(self, tls, token=None):
        hdr = f"Authorization: Bearer {token}\r\n" if token else ""
        raw = socket.create_connection(("127.0.0.1", self.mport if tls else self.hports["tls"]),
                                       timeout=10)
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # self-signed
            raw = ctx.wrap_socket(raw)
        with raw as s:
            s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\n{hdr}Connection: close\r\n\r\n"
                      .encode())
            return read_response(s)

    def test_secure_metrics(self):
        token = self.auth.split("Bearer ", 1)[1].strip()
        status, hdrs, _ = self.scrape(True)
        self.assertEqual(status, 401)
        self.assertEqual(hdrs.get("www-authenticate"), "Bearer")
        self.assertEqual(self.scrape(True, "not-a-token")[0], 401)
        self.assertEqual(self.scrape(True, alice_token())[0], 403)
        status, _, body = self.scrape(True, token)
        self.assertEqual(status, 200, body[:200])
        self.assertIn(b"# TYPE sandbox_router_requests_total counter", body)
        self.assertEqual(self.scrape(False)[0], 401)  # the plain probe port asks too
        self.assertEqual(self.scrape(False, token)[0], 200)

    # ---- tracing, reload ------------------------------------------------------------------

    def test_trace_context_passed_through(self):
        tp = f"00-{TRACE_ID}-{SPAN_ID}-01"
        ts = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
        status, _, body = self.get_once("tls", extra=f"traceparent: {tp}\r\ntracestate: {ts}\r\n")
        self.assertEqual(status, 200)
        seen = json.loads(body)
        type(self).traced = True
        self.assertEqual(seen.get("traceparent"), tp)
        self.assertEqual(seen.get("tracestate"), ts)
        status, _, body = self.get_once("tls")  # none sent: none made up
        self.assertNotIn("traceparent", json.loads(body))

    def test_certificate_reload(self):
        def served():
            with self.tls_conn("tls") as s:
                return s.getpeercert()["subject"]
        self.assertEqual(served(), ((("commonName", "router"),),))
        time.sleep(0.05)  # a distinct modification time
        write_pair(self.dir, "server", make_leaf(self.ca, "router-2", True))
        self.assertEqual(served(), ((("commonName", "router-2"),),))


if __name__ == "__main__":
    unittest.main()
