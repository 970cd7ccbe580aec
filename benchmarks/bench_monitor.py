"""Monitor memory and throughput: 100 consecutive windows, then one 10^6-row window.

1. 100 consecutive hourly windows (10^4 rows each) through the running service (scheduler,
   HTTP endpoint scraped after every tick, MLflow writes): resident memory (VmRSS) after window
   1, 10, 50 and 100. Target: flat, i.e. RSS after window 100 / after window 10 <= 1.05.
2. A 10^6-row window (sex x race, 10 intersection groups, scores, predictions, labels) in a
   SQLite table written through the ``PredictionLogger`` schema. One service tick is timed: fetch
   from SQLite, every window metric the rows allow on sex, race and sex:race, the Prometheus
   collector update, the MLflow write (local sqlite tracking store, migrated beforehand), and one
   scrape of ``/metrics``. Target: <= 10 s. The fetch alone (``SQLSource.fetch``) is timed in
   the same process as the reference, to show where the time goes. CPU seconds are printed
   too: on a loaded machine the wall time overstates the cost.

Usage: ``python benchmarks/bench_monitor.py [--quick]`` (quick: 10^5 rows, 20 windows of 2,000).
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
from prometheus_client import generate_latest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from fairmonitor.monitor.checkpoint import MemoryCheckpoint  # noqa: E402
from fairmonitor.monitor.config import load_config  # noqa: E402
from fairmonitor.monitor.service import MonitorService, ReplayClock  # noqa: E402
from fairmonitor.monitor.sources import SQLSource  # noqa: E402
from fairmonitor.monitor.sources.logger import PredictionLogger  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
METRICS = ["demographic_parity_difference", "demographic_parity_ratio",
           "equalized_odds_difference", "equal_opportunity_difference", "abcc", "abpc", "madd"]


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def frame(n: int, hours: int, seed: int = 0) -> pd.DataFrame:
    """``n`` rows spread evenly over ``hours`` hours from T0, with a mild bias on sex."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M"]), n)
    race = rng.choice(np.array(["a", "b", "c", "d", "e"]), n)
    score = np.clip(rng.beta(2, 2, n) + np.where(sex == "F", -0.05, 0.05), 0, 1)
    label = (rng.random(n) < score).astype(np.int64)
    offsets = np.sort(rng.uniform(0, hours * 3600, n))
    return pd.DataFrame({
        "id": [f"r{i}" for i in range(n)],
        "timestamp": (pd.Timestamp(T0) + pd.to_timedelta(offsets, unit="s")).tz_convert(None),
        "model": "bench", "version": "1", "score": score,
        "prediction": (score >= 0.5).astype(np.int64), "label": label,
        "labeled_at": None, "features": None, "sex": sex, "race": race,
    })


def write(path: Path, table: str, rows: pd.DataFrame) -> str:
    """Create the logger's table in SQLite at ``path`` and bulk-insert ``rows``; the URL."""
    url = f"sqlite:///{path}"
    PredictionLogger(url, model="bench", version="1", sensitive_features=["sex", "race"],
                     table=table).close()  # the table and its (model, timestamp) index
    # setup, not timed: plain sqlite3 executemany, timestamps in SQLAlchemy's text format
    rows = rows.assign(timestamp=rows["timestamp"].dt.strftime("%Y-%m-%d %H:%M:%S.%f"))
    with sqlite3.connect(path) as conn:
        rows.to_sql(table, conn, if_exists="append", index=False, chunksize=200_000)
    return url


def config(tmp: Path, url: str, table: str, mlflow_uri: str, experiment: str):
    return load_config(f"""
models:
  bench:
    tracking_uri: "{mlflow_uri}"
    experiment: {experiment}
    source: {{kind: sql, url: "{url}", table: {table}}}
    sensitive_features: [sex, race]
    label: label
    score: score
    prediction: prediction
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [{", ".join(METRICS)}]
    thresholds:
      demographic_parity_difference: {{warning: 0.1, critical: 0.2}}
""", base_dir=tmp)


def service(cfg, hours: int, **kw) -> MonitorService:
    return MonitorService(cfg, checkpoint=MemoryCheckpoint(), listen_address="127.0.0.1:0",
                          clock=ReplayClock(T0 + HOUR, HOUR, stop=T0 + hours * HOUR), **kw)


def scrape(svc: MonitorService) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{svc.address[1]}/metrics") as response:
        return len(response.read())


def big_window(tmp: Path, mlflow_uri: str, n: int) -> None:
    t = time.perf_counter()
    url = write(tmp / "big.db", "predictions", frame(n, 1))
    print(f"setup: wrote {n:,} rows in {time.perf_counter() - t:.1f} s")
    source = SQLSource(url, "predictions")
    t = time.perf_counter()
    fetched = source.fetch("bench", T0, T0 + HOUR)
    fetch_s = time.perf_counter() - t
    source.close()
    del fetched
    svc = service(config(tmp, url, "predictions", mlflow_uri, "bench-big"), 1)
    cpu = time.process_time()
    t = time.perf_counter()
    (result,) = svc.tick()  # exactly what the scheduler runs
    tick_s = time.perf_counter() - t
    t = time.perf_counter()
    size = len(generate_latest(svc.registry))  # what one scrape serialises
    scrape_s = time.perf_counter() - t
    cpu = time.process_time() - cpu
    svc.shutdown()
    assert result.n_rows == n and not result.errors, result.errors
    total = tick_s + scrape_s
    evaluate_s = result.duration_seconds - fetch_s  # the job times fetch + evaluate
    outputs_s = tick_s - result.duration_seconds
    print(f"window of {n:,} rows, {len(METRICS)} metrics x 3 attributes: fetch ~{fetch_s:.2f} s "
          f"(measured alone), evaluate ~{evaluate_s:.2f} s, gauges + MLflow write "
          f"{outputs_s:.2f} s, scrape {scrape_s * 1000:.0f} ms ({size:,} bytes); "
          f"total {total:.2f} s wall, {cpu:.2f} s CPU; total / fetch = {total / fetch_s:.2f}")
    print(f"TARGET window_{n:.0e}_rows_to_gauges_and_mlflow_seconds: {total:.2f} "
          f"(target <= 10) {'OK' if total <= 10 else 'MISS'}")


def memory_run(tmp: Path, mlflow_uri: str, windows: int, rows: int) -> None:
    url = write(tmp / "many.db", "predictions", frame(windows * rows, windows, seed=1))
    marks = {1, 10, windows // 2, windows}
    rss: dict[int, float] = {}

    def on_tick(n: int, results: object) -> None:
        scrape(svc)  # as Prometheus would
        if n in marks:
            rss[n] = rss_mb()

    svc = service(config(tmp, url, "predictions", mlflow_uri, "bench-many"), windows,
                  tick_seconds=0.02, on_tick=on_tick)
    t = time.perf_counter()
    svc.run(max_ticks=windows)
    elapsed = time.perf_counter() - t
    print(f"{windows} windows of {rows:,} rows in {elapsed:.1f} s "
          f"({elapsed / windows * 1000:.0f} ms per tick incl. scrape)")
    print("RSS MB: " + ", ".join(f"after window {k}: {v:.0f}" for k, v in sorted(rss.items())))
    ratio = rss[windows] / rss[10]
    print(f"TARGET rss_after_{windows}_over_after_10_windows: {ratio:.3f} (target <= 1.05) "
          f"{'OK' if ratio <= 1.05 else 'MISS'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # windows are critical by design; keep it quiet
    n, windows, rows = (100_000, 20, 2_000) if args.quick else (1_000_000, 100, 10_000)
    with tempfile.TemporaryDirectory(prefix="bench-monitor-") as tmp_name:
        tmp = Path(tmp_name)
        cwd = os.getcwd()
        os.chdir(tmp)  # the MLflow store creates ./mlruns in the cwd
        try:
            from mlflow.tracking import MlflowClient

            mlflow_uri = f"sqlite:///{tmp / 'mlflow.db'}"
            t = time.perf_counter()
            MlflowClient(mlflow_uri).search_experiments()  # migrations: setup, not timed
            print(f"setup: MLflow store migrated in {time.perf_counter() - t:.1f} s")
            memory_run(tmp, mlflow_uri, windows, rows)  # first: RSS not inflated by the big one
            big_window(tmp, mlflow_uri, n)
        finally:
            os.chdir(cwd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
