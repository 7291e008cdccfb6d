"""agent_sandbox_sdk.__version__: the installed distribution's version, which setup.py
takes from hack/version.sh --pep440 (docs/development.md, "Versions")."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

import pytest
from packaging.version import Version

import agent_sandbox_sdk

SDK = Path(__file__).resolve().parents[2]
SCRIPT = SDK.parent.parent / "hack" / "version.sh"


def _setup_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_sandbox_sdk_setup", SDK / "setup.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # not __main__: setup() is not called
    return mod


def test_version_is_the_installed_distributions() -> None:
    assert agent_sandbox_sdk.__version__ == version("agent-sandbox-sdk")
    assert str(Version(agent_sandbox_sdk.__version__)) == agent_sandbox_sdk.__version__


@pytest.mark.skipif(not SCRIPT.is_file() or not shutil.which("git"), reason="needs the checkout and git")
def test_setup_takes_hack_version_sh() -> None:
    want = subprocess.run(["sh", str(SCRIPT), "--pep440"], capture_output=True, text=True, check=True).stdout
    assert _setup_module().tree_version() == want.strip()
    Version(want.strip())  # a valid PEP 440 version


def test_setup_outside_a_checkout(tmp_path: Path) -> None:
    setup = _setup_module()
    sdk = tmp_path / "sdist"
    sdk.mkdir()
    assert setup.tree_version(sdk) == "0+unknown"
    (sdk / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: agent-sandbox-sdk\nVersion: 1.2.3\n")
    assert setup.tree_version(sdk) == "1.2.3"


@pytest.mark.parametrize(
    ("semver", "want"),
    [
        ("1.2.3", "1.2.3"),
        ("v1.2.3", "1.2.3"),
        ("1.2.3-rc.1", "1.2.3rc1"),
        ("1.2.3-alpha.2", "1.2.3a2"),
        ("1.2.3-beta.3", "1.2.3b3"),
        ("0.1.0-dev+g0123456789ab", "0.1.0.dev0+g0123456789ab"),
        ("0.1.1-dev.4+g0123456789ab.dirty", "0.1.1.dev4+g0123456789ab.dirty"),
        ("1.0.0+build-7", "1.0.0+build.7"),
    ],
)
def test_pep440_of_make_dist_version(semver: str, want: str) -> None:
    got = _setup_module().pep440(semver)
    assert got == want
    assert str(Version(got)) == Version(want).public + (f"+{Version(want).local}" if Version(want).local else "")


@pytest.mark.parametrize("bad", ["1.2", "1.2.3-weird.1", "1.2.3-rc.x", "x1.2.3", ""])
def test_pep440_refuses_what_has_no_form(bad: str) -> None:
    with pytest.raises(ValueError):
        _setup_module().pep440(bad)


def test_as_version_overrides_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AS_VERSION", "2.0.0-rc.3")
    assert _setup_module().tree_version() == "2.0.0rc3"
