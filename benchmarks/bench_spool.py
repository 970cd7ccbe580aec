"""MLflow spool cost per window with a large backlog (issue 15 item 6).

MLflow is down and 4,000 values (100 windows of 40) are already pending: what does queueing one
more window cost? The reference, run in the same process, is the former spool: the whole queue
rewritten to a temporary file, fsynced and renamed on every window (O(backlog) bytes per
window). The journal appends and fsyncs one line (O(1)). Target: journal / rewrite <= 0.2.
Both use the same directory and fsync, so the ratio holds on a loaded machine; the load average
is printed.

Usage: ``python benchmarks/bench_spool.py [--quick]``
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from types import SimpleNamespace as NS

from fairmonitor.monitor.sinks.mlflow import MlflowSink

END = datetime(2026, 1, 1, tzinfo=UTC)


def result(index: int, n_values: int) -> NS:
    values = {f"fairness/m{i}/sex": 0.01 * i for i in range(n_values)}
    report = NS(flat=lambda: values)
    return NS(model="credit", version="1", index=index, end=END + timedelta(hours=index),
              report=report, errors=MappingProxyType({}))


def rewrite_reference(path: Path, queue: list[dict]) -> None:
    """The former spool: the whole queue, written and fsynced on every change."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(item) + "\n" for item in queue)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    backlog, per_window, timed = (20, 40, 20) if args.quick else (100, 40, 50)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        sink = MlflowSink(tracking_uri="http://127.0.0.1:1", spool=root / "journal.jsonl")
        queue = []
        for i in range(backlog):
            sink.submit(result(i, per_window))
            queue.append({"points": [[k, v, 0, i] for k, v in result(i, per_window)
                                     .report.flat().items()]})
        started = time.perf_counter()
        for i in range(backlog, backlog + timed):
            queue.append({"points": [[k, v, 0, i] for k, v in result(i, per_window)
                                     .report.flat().items()]})
            rewrite_reference(root / "rewrite.jsonl", queue)
        reference = (time.perf_counter() - started) / timed
        started = time.perf_counter()
        for i in range(backlog, backlog + timed):
            sink.submit(result(i, per_window))
        journal = (time.perf_counter() - started) / timed
    ratio = journal / reference
    print(f"load average {os.getloadavg()[0]:.2f}; backlog {backlog * per_window} values")
    print(f"rewrite (reference): {reference * 1000:.2f} ms/window; journal: "
          f"{journal * 1000:.2f} ms/window")
    print(f"TARGET spool_journal_over_rewrite_per_window: {ratio:.3f} (target <= 0.2)")


if __name__ == "__main__":
    main()
