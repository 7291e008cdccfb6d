"""The distribution's version is the project's one version (hack/version.sh --pep440,
docs/development.md "Versions"); everything else is in pyproject.toml."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
UNKNOWN = "0+unknown"


PRE = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "rc": "rc"}


def pep440(semver: str) -> str:
    """The PEP 440 form of a semantic version (make dist's VERSION): 1.2.3-rc.1 -> 1.2.3rc1,
    0.1.0-dev.4+gabc -> 0.1.0.dev4+gabc, 0.1.0-dev+gabc -> 0.1.0.dev0+gabc."""
    m = re.fullmatch(r"v?([0-9]+\.[0-9]+\.[0-9]+)(?:-([0-9A-Za-z.]+))?(?:\+([0-9A-Za-z.-]+))?", semver)
    if not m:
        raise ValueError(f"not a semantic version: {semver!r}")
    out, pre, build = m.group(1), m.group(2), m.group(3)
    if pre:
        kind, _, num = pre.partition(".")
        num = num or "0"
        if not num.isdigit():
            raise ValueError(f"pre-release {pre!r} has no PEP 440 form (alpha.N, beta.N, rc.N, dev.N)")
        if kind == "dev":
            out += f".dev{num}"
        elif kind in PRE:
            out += f"{PRE[kind]}{num}"
        else:
            raise ValueError(f"pre-release {pre!r} has no PEP 440 form (alpha.N, beta.N, rc.N, dev.N)")
    if build:
        out += "+" + build.replace("-", ".")
    return out


def tree_version(here: Path = HERE) -> str:
    """AS_VERSION (a semantic version, as make dist passes it) in PEP 440 form; else
    hack/version.sh --pep440 in a checkout, the sdist's PKG-INFO version when built from
    one, else 0+unknown."""
    env = os.environ.get("AS_VERSION")
    if env:
        return pep440(env)
    script = here.parent.parent / "hack" / "version.sh"
    if script.is_file():
        try:
            out = subprocess.run(
                ["sh", str(script), "--pep440"], capture_output=True, text=True, check=True, timeout=60
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if re.fullmatch(r"[0-9]+(\.[0-9]+)*(\.dev[0-9]+)?(\+[0-9A-Za-z.]+)?", out):
            return out
    pkg_info = here / "PKG-INFO"
    if pkg_info.is_file():
        for line in pkg_info.read_text(encoding="utf-8").splitlines():
            if line.startswith("Version: "):
                return line.removeprefix("Version: ").strip()
    return UNKNOWN


if __name__ == "__main__":
    from setuptools import setup

    setup(version=tree_version())
