"""Package-level contracts: import boundaries and the public API."""

from __future__ import annotations

import subprocess
import sys

import fairmonitor
import fairmonitor.metrics


def test_metrics_import_no_heavy_or_io_libraries():
    # numba is no dependency any more (issue 27: the kernels are Cython); none may creep back
    code = ("import sys, fairmonitor.metrics, fairmonitor; "
            "bad = {'mlflow', 'prometheus_client', 'apscheduler', 'pandas', 'sqlalchemy', "
            "'numba'} & set(sys.modules); print(sorted(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_loads_no_scipy_fft_or_stats():
    # issue 18: scipy.fft (ABPC's KDE) and scipy.stats (CFair's tests, the paper KDE) cost
    # ~0.3-0.7 s to import; they load when a metric needs them, not with the package
    code = ("import sys, fairmonitor, fairmonitor.metrics, fairmonitor.report; "
            "print(sorted(m for m in sys.modules if m in ('scipy.fft', 'scipy.stats')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_all_is_sorted_and_complete():
    for module in (fairmonitor, fairmonitor.metrics):
        public = sorted(n for n in vars(module) if not n.startswith("_") and
                        not isinstance(vars(module)[n], type(sys)) and n != "annotations")
        assert module.__all__ == sorted(module.__all__)
        assert set(public) <= set(module.__all__) | {"version", "PackageNotFoundError"}
