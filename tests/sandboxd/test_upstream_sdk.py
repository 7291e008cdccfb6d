#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Upstream's Python SDK from PyPI (k8s-agent-sandbox[grpc]) against the real sandboxd binary
on 127.0.0.1, without a cluster: a Sandbox handle in SandboxdInClusterConnectionConfig
(in-cluster-pod-ip) mode whose Kubernetes helper reports 127.0.0.1 as the pod IP, so
commands.run goes over gRPC (ProcessService.Execute) and files over REST exactly as they do
in a pod. tests/e2e/sandboxd_grpc.sh runs the same SDK against real pods.

  SANDBOXD_BIN=build/release/sandboxd hack/grpc-tests.sh
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from k8s_agent_sandbox.exceptions import SandboxRequestError
from k8s_agent_sandbox.models import SandboxdInClusterConnectionConfig
from k8s_agent_sandbox.sandbox import Sandbox

BIN = os.environ.get("SANDBOXD_BIN", "build/release/sandboxd")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoopbackPod:
    """The part of the SDK's Kubernetes helper a Sandbox handle reads: its pod IP."""

    def get_sandbox(self, name, namespace):
        return {"metadata": {"name": name}, "status": {"podIPs": [{"ip": "127.0.0.1"}]}}


class UpstreamSdkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sbd-sdk-")
        cls.root = os.path.join(cls.dir, "workspace")
        rest, grpc_port = free_port(), free_port()
        cls.p = subprocess.Popen([BIN, "--host", "127.0.0.1", "--port", str(rest), "--grpc-port",
                                  str(grpc_port), "--legacy-port", "-1", "--root", cls.root,
                                  "--log-level", "warn"])
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", grpc_port), 0.2).close()
                break
            except OSError:
                time.sleep(0.02)
        cfg = SandboxdInClusterConnectionConfig(mode="in-cluster-pod-ip", rest_port=rest,
                                                grpc_port=grpc_port)
        cls.sb = Sandbox(claim_name="claim", sandbox_id="sandbox", namespace="default",
                         connection_config=cfg, k8s_helper=LoopbackPod())

    @classmethod
    def tearDownClass(cls):
        cls.sb.close_connection()
        cls.p.terminate()
        rc = cls.p.wait(timeout=20)
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert rc == 0, f"sandboxd exited with {rc}"

    def test_run(self):
        r = self.sb.commands.run("echo hello; echo oops >&2; exit 3", timeout=30)
        self.assertEqual((r.stdout, r.stderr, r.exit_code), ("hello\n", "oops\n", 3))
        r = self.sb.commands.run('printf %s "$GREETING"', env={"GREETING": "hi there"}, timeout=30)
        self.assertEqual(r.stdout, "hi there")
        r = self.sb.commands.run("pwd", timeout=30)
        self.assertEqual(r.stdout.strip(), self.root)
        r = self.sb.commands.run("cat; echo eof", timeout=30)
        self.assertEqual(r.stdout, "eof\n")
        r = self.sb.commands.run("kill -TERM $$", timeout=30)
        self.assertEqual(r.exit_code, -1)

    def test_run_cwd(self):
        self.sb.files.write("cwd-test/marker.txt", b"m")
        r = self.sb.commands.run("pwd; cat marker.txt", cwd="cwd-test", timeout=30)
        self.assertEqual(r.stdout, os.path.join(self.root, "cwd-test") + "\nm")
        with self.assertRaises(RuntimeError) as cm:
            self.sb.commands.run("true", cwd="../..", timeout=30)
        self.assertIn("PERMISSION_DENIED", str(cm.exception))

    def test_command_timeout(self):
        # The command's 1 s timeout ends it (a result that says so, not the call's 30 s
        # deadline, which would raise), and not before it ran out.
        t0 = time.monotonic()
        r = self.sb.commands.run("sleep 60", command_timeout=1, timeout=30)
        self.assertTrue(r.timed_out)
        self.assertEqual(r.exit_code, 124)
        self.assertGreaterEqual(time.monotonic() - t0, 0.95)

    def test_files(self):
        data = bytes(range(256)) * 4096
        self.sb.files.write("sdk/dir/data.bin", data)
        self.assertEqual(self.sb.files.read("sdk/dir/data.bin"), data)
        self.sb.files.write("sdk/dir/note.txt", "text")
        entries = {e.name: e for e in self.sb.files.list("sdk/dir")}
        self.assertEqual(sorted(entries), ["data.bin", "note.txt"])
        self.assertEqual((entries["data.bin"].size, entries["data.bin"].type), (len(data), "file"))
        self.assertTrue(self.sb.files.exists("sdk/dir"))
        self.assertFalse(self.sb.files.exists("sdk/missing"))
        with self.assertRaises(SandboxRequestError) as cm:
            self.sb.files.delete("sdk")
        self.assertEqual(cm.exception.status_code, 409)
        self.sb.files.delete("sdk", recursive=True)
        self.assertFalse(self.sb.files.exists("sdk"))
        r = self.sb.commands.run("test -e sdk && echo present || echo gone", timeout=30)
        self.assertEqual(r.stdout, "gone\n")


if __name__ == "__main__":
    unittest.main()
