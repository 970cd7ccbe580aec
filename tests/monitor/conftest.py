"""Fixtures for the monitor tests: a private PostgreSQL server, and frame builders.

``postgres_url`` starts a throw-away PostgreSQL instance (Debian's binaries, found under
``/usr/lib/postgresql/*/bin``) on 127.0.0.1 with a free port, in a temporary directory, once per
session, and stops it at the end. PostgreSQL refuses to run as root, so as root the server runs
as the ``postgres`` user (``runuser``). The tests FAIL, never skip, when it cannot start:
``.ci/run`` installs the ``postgresql`` package.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if not found:
        pytest.fail("PostgreSQL binaries not found (/usr/lib/postgresql/*/bin/initdb); "
                    "install them with: apt-get install -y postgresql")
    return Path(found[-1]).parent


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """SQLAlchemy URL of a private PostgreSQL server on 127.0.0.1 (database ``postgres``)."""
    bindir = _pg_bin()
    root = Path(tempfile.mkdtemp(prefix="fairmonitor-pg-"))
    data = root / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    log = root / "server.log"

    def run(*args: str) -> None:
        proc = subprocess.run([*as_user, *args], capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            server_log = log.read_text() if log.exists() else ""
            pytest.fail(f"PostgreSQL command failed: {' '.join(args)}\n{proc.stdout}\n"
                        f"{proc.stderr}\n{server_log}")

    started = False
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
            "-E", "UTF8", "--locale=C", "--no-sync")
        options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c TimeZone=UTC")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w",
            "-t", "30", "start")
        started = True
        url = f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
        _wait_ready(url)
        yield url
    finally:
        if started:
            subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m",
                            "immediate", "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def _wait_ready(url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                with engine.connect() as conn:
                    conn.execute(sa.text("select 1"))
                return
            except sa.exc.OperationalError as exc:
                if time.monotonic() > deadline:
                    pytest.fail(f"PostgreSQL did not accept connections: {exc}")
                time.sleep(0.1)
    finally:
        engine.dispose()


T0 = datetime(2026, 11, 22, tzinfo=UTC)


def prediction_frame(n_hours: int = 6, rows_per_hour: int = 200, *, bias_from: int | None = None,
                     model: str = "credit", seed: int = 0, label: bool = True) -> pd.DataFrame:
    """Hourly predictions starting at ``T0``: groups F/M with equal selection rates (0.5), or,
    from hour ``bias_from`` on, F selected at 0.2 and M at 0.8 (a parity gap of 0.6)."""
    rng = np.random.default_rng(seed)
    rows = []
    for h in range(n_hours):
        sex = np.tile(["F", "M"], rows_per_hour // 2)
        biased = bias_from is not None and h >= bias_from
        p = np.where(sex == "F", 0.2, 0.8) if biased else np.full(sex.size, 0.5)
        # exact rates per group: the first p*n rows of each group are positive
        pred = np.zeros(sex.size, dtype=int)
        for g in ("F", "M"):
            idx = np.flatnonzero(sex == g)
            pred[idx[: int(round(p[idx[0]] * idx.size))]] = 1
        offsets = np.sort(rng.uniform(0, 3600, sex.size))
        frame = pd.DataFrame({
            "timestamp": [T0 + timedelta(hours=h, seconds=float(s)) for s in offsets],
            "model": model, "version": "1", "sex": sex, "prediction": pred,
            "score": np.clip(pred * 0.6 + rng.uniform(0, 0.4, sex.size), 0, 1),
        })
        if label:
            frame["label"] = pred  # a perfect model: equalized odds gaps are 0
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


@pytest.fixture
def predictions() -> pd.DataFrame:
    """Six hours of balanced predictions, bias from hour 3 on."""
    return prediction_frame(bias_from=3)


@pytest.fixture
def make_predictions():  # type: ignore[no-untyped-def]
    """The :func:`prediction_frame` builder, for tests that need other shapes."""
    return prediction_frame


# --- outputs helper fixtures (mlflow_tracking_uri) ---
@pytest.fixture(scope="session")
def mlflow_tracking_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One migrated MLflow sqlite tracking store per session (migrations take 7-12 s)."""
    from mlflow.tracking import MlflowClient

    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cwd = os.getcwd()
    os.chdir(root)  # the store creates its default artifact root ./mlruns in the cwd
    try:
        MlflowClient(tracking_uri=uri).search_experiments()
    finally:
        os.chdir(cwd)
    return uri
