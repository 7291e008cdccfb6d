"""The distribution's version is the project's one version (hack/version.sh --pep440,
docs/development.md "Versions"); everything else is in pyproject.toml."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
UNKNOWN = "0+unknown"


def tree_version(here: Path = HERE) -> str:
    """hack/version.sh --pep440 in a checkout, the sdist's PKG-INFO version when built from
    one, else 0+unknown."""
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
