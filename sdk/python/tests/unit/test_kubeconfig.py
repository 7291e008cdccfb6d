"""The kubeconfig / in-cluster loader."""

from __future__ import annotations

import base64
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest
import yaml

from agent_sandbox_sdk import ConfigError, _fasthttp, _kubeconfig
from agent_sandbox_sdk._kubeconfig import load_config, load_kubeconfig


def write(tmp: Path, user: dict[str, object], cluster: dict[str, object] | None = None) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "ctx",
        "clusters": [
            {"name": "cl", "cluster": cluster or {"server": "https://10.0.0.1:6443/", "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "cl", "user": "u", "namespace": "team"}}],
    }
    p = tmp / "kubeconfig"
    p.write_text(yaml.safe_dump(doc))
    return p


def bearer(cfg: _kubeconfig.KubeConfig) -> str | None:
    auth = cfg.auth()
    assert auth is not None
    req = httpx.Request("GET", "https://x")
    out = next(auth.auth_flow(req))
    return out.headers.get("Authorization")


def test_token_and_namespace(tmp_path: Path) -> None:
    cfg = load_kubeconfig(write(tmp_path, {"token": "abc"}))
    assert cfg.server == "https://10.0.0.1:6443" and cfg.namespace == "team"
    assert bearer(cfg) == "Bearer abc"
    assert cfg.ssl_context().verify_mode.name == "CERT_NONE"


def test_token_file_is_reread(tmp_path: Path) -> None:
    tf = tmp_path / "tok"
    tf.write_text("one\n")
    cfg = load_kubeconfig(write(tmp_path, {"tokenFile": "tok"}))
    assert bearer(cfg) == "Bearer one"
    tf.write_text("two")
    assert bearer(cfg) == "Bearer two"


def test_exec_plugin(tmp_path: Path) -> None:
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json; print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
        "'kind': 'ExecCredential', 'status': {'token': 'from-exec'}}))"
    )
    cfg = load_kubeconfig(write(tmp_path, {"exec": {"command": sys.executable, "args": [str(script)]}}))
    assert bearer(cfg) == "Bearer from-exec"


def test_exec_plugin_runs_once_for_threads_at_once(tmp_path: Path) -> None:
    """httpx's auth hook, the lean POST connection and the port helpers ask for the token
    from their own threads; a cold cache must run the plugin once for all of them, and an
    expired credential once more."""
    runs = tmp_path / "runs"
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, sys, time\n"
        f"with open({str(runs)!r}, 'a') as f: f.write('x')\n"
        "time.sleep(0.3)\n"
        "n = len(open(" + repr(str(runs)) + ").read())\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',"
        " 'status': {'token': f'tok-{n}', 'expirationTimestamp': sys.argv[1]}}))\n"
    )
    far = "2999-01-01T00:00:00Z"
    cfg = load_kubeconfig(write(tmp_path, {"exec": {"command": sys.executable, "args": [str(script), far]}}))
    auth = cfg.auth()
    assert auth is not None
    conn = _fasthttp.FastPool(cfg, 5.0, "t")  # never connects: only its header source is used
    got: list[str | None] = []
    barrier = threading.Barrier(8)

    def ask(i: int) -> None:
        barrier.wait()
        if i % 3 == 0:
            got.append(bearer(cfg))
        elif i % 3 == 1:
            got.append(_fasthttp.auth_header(cfg))
        else:
            got.append(f"Bearer {cfg.bearer_token()}")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert runs.read_text() == "x", "the plugin ran more than once"
    assert got == ["Bearer tok-1"] * 8
    assert conn.usable
    # an expired credential (within the 10 s margin) is fetched again, once
    assert cfg.exec_config is not None
    cfg.exec_config["args"] = [str(script), "2000-01-01T00:00:00Z"]
    cfg._exec_cache["expires"] = 1.0
    assert cfg.bearer_token() == "tok-2"
    assert runs.read_text() == "xx"


def test_client_cert_data(tmp_path: Path) -> None:
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=t",
            "-days",
            "1",
            "-keyout",
            str(tmp_path / "k.pem"),
            "-out",
            str(tmp_path / "c.pem"),
        ],
        check=True,
        capture_output=True,
    )
    crt, key = (tmp_path / "c.pem").read_bytes(), (tmp_path / "k.pem").read_bytes()
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    cfg = load_kubeconfig(
        write(
            tmp_path,
            {"client-certificate-data": b64(crt), "client-key-data": b64(key)},
            {"server": "https://h:1", "certificate-authority-data": b64(crt)},
        )
    )
    assert cfg.ca_data and "BEGIN CERTIFICATE" in cfg.ca_data
    ctx = cfg.ssl_context()  # loads the CA and the client pair (through private temp files)
    assert ctx.verify_mode.name == "CERT_REQUIRED"
    assert cfg.auth() is None


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the kubeconfig"):
        load_kubeconfig(tmp_path / "missing")
    p = write(tmp_path, {"token": "x"})
    with pytest.raises(ConfigError, match="no context named"):
        load_kubeconfig(p, context="other")
    with pytest.raises(ConfigError, match="auth-provider"):
        load_kubeconfig(write(tmp_path, {"auth-provider": {"name": "gcp"}}))


def test_in_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "namespace").write_text("sandboxes")
    (tmp_path / "ca.crt").write_text("")
    monkeypatch.setattr(_kubeconfig, "SA_DIR", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    cfg = load_config()
    assert cfg.in_cluster and cfg.server == "https://[fd00::1]:443" and cfg.namespace == "sandboxes"
    assert bearer(cfg) == "Bearer sa-token"
    assert stat.S_ISREG((tmp_path / "token").stat().st_mode)


@pytest.mark.parametrize(
    ("output", "match"),
    [
        ("print('Unable to connect: token expired')", "printed no JSON"),
        (
            "import json; print(json.dumps({'kind': 'ExecCredential', "
            "'status': {'token': 't', 'expirationTimestamp': 'next tuesday'}}))",
            "expirationTimestamp 'next tuesday'",
        ),
    ],
    ids=["not json", "bad expiry"],
)
def test_exec_plugin_bad_output_is_a_config_error(tmp_path: Path, output: str, match: str) -> None:
    script = tmp_path / "plugin.py"
    script.write_text(output)
    cfg = load_kubeconfig(write(tmp_path, {"exec": {"command": sys.executable, "args": [str(script)]}}))
    with pytest.raises(ConfigError, match=match):
        cfg.bearer_token()


def test_a_failed_exec_plugin_run_is_shared_by_the_threads_that_waited(tmp_path: Path) -> None:
    """Threads asking at once while the plugin runs and fails get that run's failure: the
    plugin is not run again, one thread after another, for each of them. A later call
    runs it again."""
    runs = tmp_path / "runs"
    script = tmp_path / "plugin.py"
    script.write_text(
        f"import sys, time\nwith open({str(runs)!r}, 'a') as f: f.write('x')\ntime.sleep(0.4)\nsys.exit('expired')\n"
    )
    cfg = load_kubeconfig(write(tmp_path, {"exec": {"command": sys.executable, "args": [str(script)]}}))
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def ask() -> None:
        barrier.wait()
        try:
            cfg.bearer_token()
        except ConfigError as e:
            errors.append(e)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 4 and all("failed" in str(e) for e in errors)
    assert runs.read_text() == "x", "the failed plugin ran once per waiting thread"
    with pytest.raises(ConfigError):
        cfg.bearer_token()
    assert runs.read_text() == "xx"


@pytest.mark.parametrize(
    ("script", "says"),
    [
        ("echo 'token refresh failed' >&2; exit 1", "exit status 1: token refresh failed"),
        ("printf 'E%.0s' $(seq 1 5000) >&2; exit 3", "exit status 3: ..." + "E" * 200),
    ],
    ids=["short stderr", "long stderr"],
)
def test_a_failed_exec_plugin_names_its_command_not_its_arguments(tmp_path: Path, script: str, says: str) -> None:
    """A plugin's arguments often hold secrets (--oidc-client-secret=...): its error names
    the command, the exit status and the end of stderr (cut), never the arguments, nor
    does the exception it chains (subprocess's texts quote the whole argv)."""
    sh = shutil.which("sh") or "/bin/sh"
    user = {"exec": {"command": sh, "args": ["-c", script, "--secret=XYZ"]}}
    cfg = load_kubeconfig(write(tmp_path, user))
    with pytest.raises(ConfigError) as info:
        cfg.bearer_token()
    text = str(info.value)
    assert "XYZ" not in text and "-c" not in text, text
    assert repr(sh) in text and text.endswith(says), text
    assert len(text) < 400
    e = info.value
    shown = e.__cause__ or (None if e.__suppress_context__ else e.__context__)  # what a traceback prints
    assert shown is None or "XYZ" not in str(shown)


@pytest.mark.parametrize("value", ["false", "true", "no", 0, 1, "", []], ids=repr)
def test_insecure_skip_tls_verify_takes_only_a_yaml_boolean(tmp_path: Path, value: object) -> None:
    """insecure-skip-tls-verify: "false" (quoted) turned verification off (bool("false")
    is True); anything but a YAML boolean is refused, naming the field."""
    p = write(tmp_path, {"token": "x"}, {"server": "https://h:1", "insecure-skip-tls-verify": value})
    with pytest.raises(ConfigError, match="insecure-skip-tls-verify"):
        load_kubeconfig(p)


@pytest.mark.parametrize(("value", "insecure"), [(True, True), (False, False), (None, False)])
def test_insecure_skip_tls_verify_booleans(tmp_path: Path, value: object, insecure: bool) -> None:
    p = write(tmp_path, {"token": "x"}, {"server": "https://h:1", "insecure-skip-tls-verify": value})
    cfg = load_kubeconfig(p)
    assert cfg.insecure is insecure
    assert cfg.ssl_context().verify_mode.name == ("CERT_NONE" if insecure else "CERT_REQUIRED")


def test_a_token_file_wins_over_a_token(tmp_path: Path) -> None:
    """With both token and tokenFile the file wins, re-read as it rotates (client-go; the
    file was ignored), and the token is the fallback while the file cannot be read."""
    tf = tmp_path / "tok"
    tf.write_text("from-file\n")
    cfg = load_kubeconfig(write(tmp_path, {"token": "literal", "tokenFile": "tok"}))
    assert cfg.token_file == str(tf)
    assert bearer(cfg) == "Bearer from-file"
    tf.write_text("rotated")
    assert bearer(cfg) == "Bearer rotated"
    tf.unlink()
    assert bearer(cfg) == "Bearer literal"


def test_an_unreadable_token_file_without_a_token_is_a_config_error(tmp_path: Path) -> None:
    cfg = load_kubeconfig(write(tmp_path, {"tokenFile": "missing"}))
    with pytest.raises(ConfigError, match="cannot read the token file"):
        cfg.bearer_token()


class _StrictFractions(datetime):
    """datetime.fromisoformat as on Python 3.10: a fraction of a second of 3 or 6 digits
    only (3.11 takes any)."""

    @classmethod
    def fromisoformat(cls, date_string: str) -> datetime:
        m = re.search(r"\.(\d+)", date_string)
        if m and len(m[1]) not in (3, 6):
            raise ValueError(f"Invalid isoformat string: {date_string!r}")
        return datetime.fromisoformat(date_string)


@pytest.mark.parametrize("strict", [False, True], ids=["this python", "python 3.10"])
@pytest.mark.parametrize(
    ("ts", "micro"),
    [
        ("2030-01-02T03:04:05.12Z", 120000),
        ("2030-01-02T03:04:05.123456789Z", 123456),
        ("2030-01-02T03:04:05.5+00:00", 500000),
        ("2030-01-02T03:04:05Z", 0),
    ],
)
def test_an_expiration_timestamp_takes_any_fraction(
    monkeypatch: pytest.MonkeyPatch, strict: bool, ts: str, micro: int
) -> None:
    """An exec plugin's expirationTimestamp with a fraction of other than 3 or 6 digits
    (Go's RFC3339Nano: up to 9, trailing zeros dropped) was a ConfigError on Python 3.10."""
    if strict:
        monkeypatch.setattr(_kubeconfig, "datetime", _StrictFractions)
    want = datetime(2030, 1, 2, 3, 4, 5, micro, tzinfo=timezone.utc).timestamp()
    assert _kubeconfig._expiry(ts) == want


def _doc(path: Path, **fields: object) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", **fields}))
    return str(path)


def _kubeconfig_env(monkeypatch: pytest.MonkeyPatch, *entries: str) -> None:
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(entries))


def test_kubeconfig_files_are_merged_as_kubectl_merges_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The context and cluster in one file, the user in another (its tokenFile beside
    it, not beside the first): kubectl merges them; only the first file was read."""
    a = _doc(
        tmp_path / "a.yaml",
        contexts=[{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "team"}}],
        clusters=[{"name": "k", "cluster": {"server": "https://a:6443", "certificate-authority": "ca.pem"}}],
    )
    b = _doc(
        tmp_path / "sub" / "b.yaml",
        **{"current-context": "c"},
        users=[{"name": "u", "user": {"tokenFile": "tok"}}],
        clusters=[{"name": "k", "cluster": {"server": "https://b:6443"}}],  # a's wins
    )
    (tmp_path / "sub" / "tok").write_text("from-b-dir\n")
    _kubeconfig_env(monkeypatch, a, b)
    cfg = load_kubeconfig()
    assert (cfg.server, cfg.namespace) == ("https://a:6443", "team")
    assert cfg.ca_file == str(tmp_path / "ca.pem")  # a's own directory
    assert bearer(cfg) == "Bearer from-b-dir"  # b's own directory
    assert cfg.base_dir == str(tmp_path / "sub")  # the user's file's: an exec plugin runs there


def test_the_first_of_each_name_and_the_first_current_context_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = [{"name": "k", "cluster": {"server": "https://k:6443"}}]
    a = _doc(
        tmp_path / "a.yaml",
        **{"current-context": "one"},
        contexts=[{"name": "one", "context": {"cluster": "k", "user": "u"}}],
        users=[{"name": "u", "user": {"token": "first"}}],
        clusters=cluster,
    )
    b = _doc(
        tmp_path / "b.yaml",
        **{"current-context": "two"},
        contexts=[{"name": "two", "context": {"cluster": "k", "user": "u", "namespace": "two"}}],
        users=[{"name": "u", "user": {"token": "second"}}],
    )
    _kubeconfig_env(monkeypatch, a, b)
    cfg = load_kubeconfig()
    assert (cfg.namespace, bearer(cfg)) == ("default", "Bearer first")
    assert load_kubeconfig(context="two").namespace == "two"
    _kubeconfig_env(monkeypatch, b, a)
    cfg = load_kubeconfig()
    assert (cfg.namespace, bearer(cfg)) == ("two", "Bearer second")


def test_empty_and_missing_kubeconfig_entries_are_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = write(tmp_path, {"token": "abc"})
    _kubeconfig_env(monkeypatch, "", str(tmp_path / "missing.yaml"), "", str(p))
    cfg = load_kubeconfig()
    assert (cfg.server, bearer(cfg)) == ("https://10.0.0.1:6443", "Bearer abc")
    _kubeconfig_env(monkeypatch, str(tmp_path / "missing.yaml"), str(tmp_path / "gone.yaml"))
    with pytest.raises(ConfigError, match="cannot read the kubeconfig"):
        load_kubeconfig()
    _kubeconfig_env(monkeypatch, str(p), str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match=r"kubeconfig: no context named 'other'"):  # the file read
        load_kubeconfig(context="other")
    _kubeconfig_env(monkeypatch, str(p), _doc(tmp_path / "b.yaml"))
    with pytest.raises(ConfigError, match=r"\$KUBECONFIG \(.*kubeconfig, .*b\.yaml\): no context named 'other'"):
        load_kubeconfig(context="other")
