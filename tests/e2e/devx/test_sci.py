"""The scientific runtime image (images/build.sh runtime-sci, template "python-sci"):
numpy, pandas and matplotlib import and work in a sandbox, a figure is saved as a PNG
with the default (Agg) backend and read back through the SDK."""

from __future__ import annotations

import textwrap
import uuid

import agent_sandbox_sdk
import pytest

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_numpy_pandas_matplotlib(sci_sandbox: agent_sandbox_sdk.Sandbox) -> None:
    out = f"sci-{uuid.uuid4().hex[:8]}.png"
    script = textwrap.dedent(
        f"""
        import os
        import matplotlib, numpy as np, pandas as pd
        import matplotlib.pyplot as plt
        a = np.arange(10, dtype=float)
        df = pd.DataFrame({{"x": a, "y": a ** 2}})
        print("backend", matplotlib.get_backend(), os.environ.get("MPLBACKEND"))
        print("sum", int(a.sum()), "mean_y", df["y"].mean())
        print("versions", np.__version__, pd.__version__, matplotlib.__version__)
        fig, ax = plt.subplots(figsize=(3, 2))
        df.plot(x="x", y="y", ax=ax)
        fig.savefig({out!r})
        """
    )
    r = sci_sandbox.run(["python3", "-c", script], timeout=120)
    assert r.exit_code == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert lines["backend"].lower() == "agg agg"
    assert lines["sum"] == "45 mean_y 28.5"
    png = sci_sandbox.files.read(out)
    assert png.startswith(PNG_SIGNATURE) and len(png) > 1000
    sci_sandbox.files.delete(out)


def test_run_code_figure_is_an_image(sci_sandbox: agent_sandbox_sdk.Sandbox) -> None:
    """With the SDK's code execution, a matplotlib figure comes back as image/png."""
    if not hasattr(sci_sandbox, "run_code"):
        pytest.skip("this agent_sandbox_sdk has no Sandbox.run_code")
    ex = sci_sandbox.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\n21 * 2", timeout=120)
    assert ex.error is None, ex.error
    assert ex.text == "42"
    pngs = [r.png for r in ex.results if r.png]
    assert pngs and pngs[0].startswith(PNG_SIGNATURE)
