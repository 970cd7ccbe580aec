"""Issue 28 item 6: ``--log-level`` applies to fairmonitor's loggers only."""

from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import logging
from fairmonitor.cli import configure_logging
configure_logging({level!r})
logging.getLogger("numba.core.ssa").debug("numba debug line")
logging.getLogger("numba.core.byteflow").info("numba info line")
logging.getLogger("urllib3").warning("library warning")
logging.getLogger("fairmonitor.monitor.job").debug("fairmonitor debug line")
logging.getLogger("fairmonitor.monitor.service").info("fairmonitor info line")
print("root", logging.getLevelName(logging.getLogger().level))
"""


def _run(level: str) -> str:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT.format(level=level)],
                          capture_output=True, text=True, timeout=60, check=True)
    return proc.stdout + proc.stderr


def test_debug_reaches_fairmonitor_loggers_only():
    out = _run("DEBUG")
    assert "fairmonitor debug line" in out and "fairmonitor info line" in out
    assert "numba" not in out  # numba's compiler DEBUG/INFO output stays quiet
    assert "library warning" in out  # other libraries' warnings still show
    assert "root WARNING" in out


def test_warning_hides_fairmonitor_info():
    out = _run("WARNING")
    assert "fairmonitor info line" not in out and "fairmonitor debug line" not in out
    assert "library warning" in out
