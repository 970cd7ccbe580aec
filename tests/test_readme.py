"""The README teaches what the code does: its metric table and its Python snippets are checked.

The ``>>>`` examples run as doctests (``--doctest-glob=README.md`` in ``make test``); the other
Python blocks run here, in order, as one script in a temporary directory (they write
``mlflow.db`` and ``predictions.db`` to the working directory, as a user's session would). The
blocks that import pyspark run in ``tests/spark/test_readme_spark.py`` instead, on the shared
Spark session (:func:`python_blocks` splits them).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

from fairmonitor import METRICS

README = Path(__file__).resolve().parents[1] / "README.md"


def _fmt(x: float) -> str:
    return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:g}"


def metrics_table() -> str:
    """The README's metric table, generated from the registry."""
    rows = ["| metric | direction | ideal | range | needs | what it says |",
            "|---|---|---|---|---|---|"]
    for name, s in METRICS.items():
        needs = [k for k in ("labels", "scores", "features", "model") if getattr(s, f"needs_{k}")]
        direction = "lower is fairer" if s.direction == "lower_is_fairer" else "higher is fairer"
        rows.append(f"| `{name}` | {direction} | {_fmt(s.ideal)} | [{_fmt(s.lower)}, "
                    f"{_fmt(s.upper)}] | {', '.join(needs) or 'predictions'} | "
                    f"{s.help.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)


def test_metric_table_matches_the_registry():
    text = README.read_text()
    expected = metrics_table()
    assert expected in text, "README metric table is stale; replace it with:\n" + expected


def python_blocks(*, spark: bool) -> list[str]:
    """The README's runnable (non-``>>>``) Python blocks, with or without pyspark."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    return [b for b in blocks if not b.lstrip().startswith(">>>")
            and ("from pyspark" in b or "import pyspark" in b) == spark]


def test_readme_python_blocks_run(tmp_path):
    scripts = python_blocks(spark=False)
    assert scripts, "the README has runnable Python blocks"
    script = tmp_path / "readme_blocks.py"
    script.write_text("\n\n".join(scripts))
    # a fresh user session: no tracking URI or experiment id inherited from other tests
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
