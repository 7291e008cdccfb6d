#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Component tests of background processes on the real sandboxd binary (standard library
only): a detached process outlives the client that started it, its output is replayed
from the ring and then followed by a later client, a ring overflow is reported as dropped
bytes, the table's limit answers 429 until an entry exits (then the oldest exited entry
is evicted), stdin, signal, kill, wait, removal, and the activity report.

  SANDBOXD_BIN=build/release/sandboxd python3 -m unittest tests/sandboxd/test_background.py
"""
import base64
import http.client
import json
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_component import Daemon, raw_exchange  # noqa: E402


def start(d, command, **extra):
    body = {"command": command, "background": True, **extra}
    st, data, _ = d.req("POST", "/v1/processes", json.dumps(body))
    return st, json.loads(data)


def get(d, path):
    st, data, _ = d.req("GET", path)
    return st, json.loads(data) if data else None


def output(d, pid, query=""):
    """Returns the NDJSON events of GET .../output?query until the server ends it."""
    st, data, r = d.req("GET", f"/v1/processes/{pid}/output?{query}")
    assert st == 200, (st, data)
    assert r.getheader("Content-Type") == "application/x-ndjson"
    return [json.loads(line) for line in data.splitlines() if line]


def text(events, kind="stdout"):
    return b"".join(base64.b64decode(e["data"]) for e in events if e["type"] == kind)


def pid_alive(pid):
    """Whether pid runs: a zombie does not (sandboxd keeps an exited leader's zombie until
    its record is released, so that its pid is not reused while it could be signalled;
    that release may come just after a wait has answered the exit)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class BackgroundTest(unittest.TestCase):
    def setUp(self):
        self.d = None

    def tearDown(self):
        if self.d:
            self.assertEqual(self.d.stop(), 0)

    def daemon(self, *args):
        self.d = Daemon(*args)
        return self.d

    def test_outlives_client_then_reattach_replays_and_follows(self):
        d = self.daemon()
        # Start over a raw connection and drop it at once: the process stays.
        body = json.dumps({"command": "echo first; read x; echo \"got $x\"; exit 4",
                           "background": True, "stdin_open": True}).encode()
        c = socket.create_connection(("127.0.0.1", d.port), 5)
        c.sendall(b"POST /v1/processes HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        head = c.recv(65536)
        c.close()
        self.assertIn(b" 201 ", head.split(b"\r\n")[0])
        info = json.loads(head.split(b"\r\n\r\n", 1)[1])
        self.assertEqual((info["state"], info["background"], info["exit_code"]),
                         ("running", True, None))
        time.sleep(0.3)
        st, again = get(d, f"/v1/processes/{info['id']}")
        self.assertEqual((st, again["state"], again["pid"]), (200, "running", info["pid"]))
        self.assertTrue(pid_alive(info["pid"]))
        st, lst = get(d, "/v1/processes")
        self.assertEqual([(p["id"], p["background"], p["state"]) for p in lst["processes"]],
                         [(info["id"], True, "running")])
        # A new client: the replay of what was printed, then live output after stdin.
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        c.request("GET", f"/v1/processes/{info['id']}/output?follow=true")
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        first = json.loads(r.readline())
        self.assertEqual((first["type"], first["offset"]), ("stdout", 0))
        self.assertEqual(base64.b64decode(first["data"]), b"first\n")
        st, _, _ = d.req("POST", f"/v1/processes/{info['id']}/stdin", b"second\n")
        self.assertEqual(st, 204)
        rest = [json.loads(line) for line in r.read().splitlines() if line]
        c.close()
        self.assertEqual(text(rest), b"got second\n")
        self.assertEqual(rest[-1], {"type": "exit", "exit_code": 4, "signal": 0,
                                    "timed_out": False, "offset": 17})
        # Exited: still listed with its status; a replay from an offset; then removal.
        st, done = get(d, f"/v1/processes/{info['id']}/wait?timeout=5")
        self.assertEqual((done["state"], done["exit_code"], done["output_end"]), ("exited", 4, 17))
        self.assertIsNotNone(done["ended_at"])
        ev = output(d, info["id"], "offset=6")
        self.assertEqual((text(ev), ev[0]["offset"], ev[-1]["type"]), (b"got second\n", 6, "exit"))
        st, data, _ = d.req("POST", f"/v1/processes/{info['id']}/stdin", b"late")
        self.assertEqual((st, json.loads(data)["code"]), (409, "FAILED_PRECONDITION"))
        st, data, _ = d.req("POST", f"/v1/processes/{info['id']}/signal", b'{"signal":"SIGTERM"}')
        self.assertEqual((st, json.loads(data)["code"]), (409, "FAILED_PRECONDITION"))
        # an action that does not exist is 404, not "has exited"
        st, data, _ = d.req("POST", f"/v1/processes/{info['id']}/bogus", b"")
        self.assertEqual((st, json.loads(data)["code"]), (404, "NOT_FOUND"))
        self.assertEqual(d.req("DELETE", f"/v1/processes/{info['id']}")[0], 204)
        self.assertEqual(get(d, f"/v1/processes/{info['id']}")[0], 404)
        self.assertEqual(get(d, "/v1/processes")[1]["processes"], [])

    def test_ring_overflow_reports_dropped_bytes(self):
        d = self.daemon("--bg-output-buffer", "16384")
        st, info = start(d, "head -c 100000 /dev/zero | tr '\\0' a; echo tail >&2")
        self.assertEqual(st, 201)
        st, done = get(d, f"/v1/processes/{info['id']}/wait?timeout=10")
        self.assertEqual((done["state"], done["exit_code"], done["output_end"]), ("exited", 0, 100005))
        self.assertGreater(done["output_start"], 100000 - 16384)
        ev = output(d, info["id"], "follow=false")
        self.assertEqual(ev[0]["type"], "dropped")
        self.assertEqual((ev[0]["offset"], ev[0]["bytes"]), (0, done["output_start"]))
        self.assertEqual(ev[0]["bytes"] + len(text(ev)) + len(text(ev, "stderr")), 100005)
        self.assertEqual(text(ev, "stderr"), b"tail\n")
        self.assertEqual(set(text(ev)), {ord("a")})
        self.assertEqual(ev[-1]["type"], "exit")

    def test_table_full_kill_evict_signal_wait(self):
        d = self.daemon("--max-bg-procs", "2")
        st, a = start(d, ["sleep", "60"])
        st, b = start(d, ["sleep", "60"])
        self.assertEqual(st, 201)
        st, err = start(d, ["sleep", "60"])
        self.assertEqual((st, err["code"]), (429, "RESOURCE_EXHAUSTED"))
        self.assertIn("--max-bg-procs", err["message"])
        # wait with a timeout answers the running state after it
        t0 = time.monotonic()
        st, w = get(d, f"/v1/processes/{a['id']}/wait?timeout=0.3")
        self.assertGreaterEqual(time.monotonic() - t0, 0.25)
        self.assertEqual((st, w["state"]), (200, "running"))
        # a signal by name, then POST wait until it ends
        self.assertEqual(d.req("POST", f"/v1/processes/{a['id']}/signal",
                               json.dumps({"signal": "SIGTERM"}))[0], 204)
        st, data, _ = d.req("POST", f"/v1/processes/{a['id']}/wait?timeout=5")
        w = json.loads(data)
        self.assertEqual((w["state"], w["exit_code"], w["signal"]), ("exited", None, 15))
        self.assertFalse(pid_alive(a["pid"]))
        # the output's exit event says it as the description does: no exit code
        ev = output(d, a["id"])
        self.assertEqual((ev[-1]["type"], ev[-1]["exit_code"], ev[-1]["signal"]), ("exit", None, 15))
        # kill: DELETE of a running one SIGKILLs it and keeps the entry
        self.assertEqual(d.req("DELETE", f"/v1/processes/{b['id']}")[0], 204)
        st, w = get(d, f"/v1/processes/{b['id']}/wait?timeout=5")
        self.assertEqual((w["state"], w["signal"]), ("exited", 9))
        # full of exited entries: a start that fails evicts nothing, a new start evicts
        # the oldest
        st, err = start(d, ["/no/such/command"])
        self.assertGreaterEqual(st, 400, err)
        self.assertEqual(get(d, f"/v1/processes/{a['id']}")[0], 200)
        st, c = start(d, ["sleep", "60"])
        self.assertEqual(st, 201)
        ids = [p["id"] for p in get(d, "/v1/processes")[1]["processes"]]
        self.assertEqual(sorted(ids), sorted([b["id"], c["id"]]))
        self.assertEqual(get(d, f"/v1/processes/{a['id']}")[0], 404)
        st, bad = get(d, f"/v1/processes/{c['id']}/wait?timeout=forever")
        self.assertEqual((st, bad["code"]), (400, "INVALID_ARGUMENT"))

    def test_delete_pipelined_behind_wait_and_output(self):
        # A DELETE pipelined on one connection behind a wait (or an output follow) of the
        # same process: the DELETE runs after the exit has been handled, not inside it
        # (it freed the process under the exit callback: ASan in the sanitizer build).
        d = self.daemon()
        for follow in ("wait?timeout=10", "output"):
            st, a = start(d, ["sleep", "0.3"])
            self.assertEqual(st, 201)
            c = socket.create_connection(("127.0.0.1", d.port), 10)
            c.sendall(f"GET /v1/processes/{a['id']}/{follow} HTTP/1.1\r\nHost: t\r\n\r\n"
                      f"DELETE /v1/processes/{a['id']} HTTP/1.1\r\nHost: t\r\n"
                      "Connection: close\r\n\r\n".encode())
            got = b""
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                got += chunk
            c.close()
            self.assertEqual(got.count(b"HTTP/1.1 "), 2, got)
            self.assertIn(b"HTTP/1.1 204", got)
            self.assertEqual(get(d, f"/v1/processes/{a['id']}")[0], 404)
        self.assertEqual(get(d, "/v1/metadata")[0], 200)  # still serving

    def test_head_of_a_stream_answers_at_once(self):
        # A HEAD of an output follow or a wait of a running process is answered at its
        # head: it kept the request in flight, writing nothing, and the next request on
        # the connection (a proxy's pooled one) was never answered.
        d = self.daemon()
        st, a = start(d, ["sleep", "30"])
        self.assertEqual(st, 201)
        for action in ("output?follow=true", "wait"):
            got = raw_exchange(d.port, f"HEAD /v1/processes/{a['id']}/{action} HTTP/1.1\r\nHost: t\r\n\r\n"
                               "GET /v1/health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
            self.assertEqual(got.count(b"HTTP/1.1 200"), 2, (action, got))
        self.assertEqual(d.req("DELETE", f"/v1/processes/{a['id']}")[0], 204)

    def test_upload_in_progress_is_activity(self):
        # A long upload counts as activity while its body arrives (before: only its head,
        # so the idle policy could suspend the pod in the middle of a slow upload).
        d = self.daemon()
        c = socket.create_connection(("127.0.0.1", d.port), 10)
        c.sendall(b"PUT /v1/files/big.bin HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n")
        for _ in range(6):
            c.sendall(b"x" * 1024)
            time.sleep(0.5)
        st, act = get(d, "/v1/activity")
        self.assertEqual(st, 200)
        self.assertLess(act["idle_seconds"], 1.0, act)  # before: about 3
        c.close()

    def test_max_procs_and_activity(self):
        d = self.daemon("--max-procs", "1")
        st, a = start(d, ["sleep", "60"])
        self.assertEqual(st, 201)
        st, err = start(d, ["sleep", "60"])
        self.assertEqual((st, err["code"]), (429, "RESOURCE_EXHAUSTED"))
        st, act = get(d, "/v1/activity")
        self.assertEqual((act["running_processes"], act["idle_seconds"]), (1, 0.0))
        st, err = start(d, ["sleep", "1"], stdin_open="yes")
        self.assertEqual((st, err["code"]), (400, "INVALID_ARGUMENT"))
        st, data, _ = d.req("POST", "/v1/processes/run",
                            json.dumps({"command": "true", "background": True}))
        self.assertEqual((st, json.loads(data)["code"]), (400, "INVALID_ARGUMENT"))
        # an attached process is no background one
        self.assertEqual(d.req("DELETE", f"/v1/processes/{a['id']}")[0], 204)
        self.assertEqual(get(d, f"/v1/processes/{a['id']}/wait?timeout=5")[1]["state"], "exited")
        end = time.monotonic() + 5
        while get(d, "/v1/activity")[1]["running_processes"] and time.monotonic() < end:
            time.sleep(0.02)
        st, data, _ = d.req("POST", "/v1/processes/run", json.dumps({"command": "echo x"}))
        self.assertEqual((st, json.loads(data)["stdout"]), (200, "x\n"))
        st, err = get(d, f"/v1/processes/{a['id'] + 1}/output")
        self.assertEqual(st, 404)

    def wait_activity(self, d, busy, timeout=5):
        """Polls /v1/activity until running_processes is > 0 (busy) or 0; returns it."""
        end = time.monotonic() + timeout
        while True:
            act = get(d, "/v1/activity")[1]
            if bool(act["running_processes"]) == busy or time.monotonic() > end:
                return act
            time.sleep(0.05)

    def test_daemonized_descendant_is_activity(self):
        # A command that leaves a process behind (nohup ... &) and exits: the process is
        # reparented to sandboxd (the subreaper) and keeps the sandbox busy until it ends
        # (before: running_processes 0 and idle_seconds growing while it ran).
        d = self.daemon()
        st, data, _ = d.req("POST", "/v1/processes/run",
                            json.dumps({"command": "nohup sleep 300 >/dev/null 2>&1 & echo $!"}))
        self.assertEqual(st, 200, data)
        pid = int(json.loads(data)["stdout"])
        try:
            time.sleep(1.5)
            self.assertTrue(pid_alive(pid))
            act = get(d, "/v1/activity")[1]
            self.assertEqual((act["running_processes"], act["idle_seconds"],
                              act.get("orphan_processes")), (1, 0.0, 1), act)
        finally:
            os.kill(pid, 9)
        act = self.wait_activity(d, False)
        self.assertEqual((act["running_processes"], act["orphan_processes"]), (0, 0), act)
        self.assertGreater(act["idle_seconds"], 1.0, act)

    def test_backgrounded_server_is_activity(self):
        # A background process that starts a dev server with "&": its record exits at
        # once, the server keeps running and keeps the sandbox busy.
        d = self.daemon()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        st, info = start(d, f"{sys.executable} -m http.server {port} --bind 127.0.0.1 "
                            ">/dev/null 2>&1 & echo $!")
        self.assertEqual(st, 201, info)
        st, done = get(d, f"/v1/processes/{info['id']}/wait?timeout=5")
        self.assertEqual((done["state"], done["exit_code"]), ("exited", 0))
        pid = int(text(output(d, info["id"])))
        try:
            end = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    self.assertLess(time.monotonic(), end, "the server did not start")
                    time.sleep(0.05)
            act = get(d, "/v1/activity")[1]
            self.assertEqual((act["running_processes"], act["idle_seconds"],
                              act.get("orphan_processes")), (1, 0.0, 1), act)
        finally:
            os.kill(pid, 15)
        act = self.wait_activity(d, False)
        self.assertEqual(act["running_processes"], 0, act)

    def test_signal_after_the_leader_exited_reaches_its_group(self):
        # "sleep 30 & echo ...": the shell exits at once, the sleep (same process group)
        # holds the output, so the entry says running for up to the 2 s drain. A signal
        # then goes to what is left of the group (before: 204, delivered to nobody, and the
        # sleep ran on).
        d = self.daemon()
        st, info = start(d, "sleep 30 & echo $!")
        self.assertEqual(st, 201, info)
        end = time.monotonic() + 5
        while not text(output(d, info["id"], "follow=false")).endswith(b"\n"):
            self.assertLess(time.monotonic(), end, "no pid printed")
            time.sleep(0.02)
        pid = int(text(output(d, info["id"], "follow=false")))
        try:
            time.sleep(0.3)
            self.assertFalse(pid_alive(info["pid"]))  # the leader exited
            self.assertEqual(get(d, f"/v1/processes/{info['id']}")[1]["state"], "running")
            st, data, _ = d.req("POST", f"/v1/processes/{info['id']}/signal",
                                json.dumps({"signal": "TERM"}))
            self.assertEqual(st, 204, data)
            end = time.monotonic() + 1.5  # within the drain: the signal did it
            while pid_alive(pid) and time.monotonic() < end:
                time.sleep(0.02)
            self.assertFalse(pid_alive(pid), "the sleep was not signalled")
        finally:
            if pid_alive(pid):
                os.kill(pid, 9)
        st, done = get(d, f"/v1/processes/{info['id']}/wait?timeout=5")
        self.assertEqual((done["state"], done["exit_code"]), ("exited", 0))


if __name__ == "__main__":
    unittest.main()
