"""HFM's sampled average on Spark local[2] (issue 30 item 4): time and rows brought to the driver.

``--rows`` logged predictions (default 10^5; ``--quick`` 10^4) with two sensitive attributes
(sex 2 groups, race 3), a label, a score and three numeric features, spread over
``--partitions`` partitions (default 200, Spark's shuffle default), evaluated as one window
with :func:`fairmonitor.spark.hfm_average_spark` (``--queries`` query rows per attribute,
default 2000). It prints the wall-clock time of each job (aggregate, query rows, scan), the
query rows received by the driver per attribute, and the machine load. Run it on another
checkout (``PYTHONPATH=<checkout>``) for a before/after figure: it only calls the package's
``_hfm_average`` (the timings) and counts the driver's candidate rows through the returned
query frames.

Usage: ``nice -n 10 python benchmarks/bench_spark_hfm.py [--rows N] [--partitions P]
[--queries Q] [--quick]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _spark_session import local_session


def write_rows(path: Path, n: int, seed: int = 0) -> None:
    import pandas as pd

    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    x = rng.normal(size=(n, 3))
    score = 1 / (1 + np.exp(-(x[:, 0] + 0.3 * (sex == "M"))))
    pd.DataFrame({"sex": sex, "race": rng.choice(np.array(list("abc"), dtype=object), n),
                  "x1": x[:, 0], "x2": x[:, 1], "x3": x[:, 2], "score": score,
                  "label": (rng.random(n) < score).astype(np.int64)}).to_parquet(path)


def session():
    return local_session("bench_spark_hfm")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**5)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="10^4 rows")
    args = parser.parse_args()
    n = 10**4 if args.quick else args.rows
    spark = session()
    import fairmonitor
    from fairmonitor.spark.hfm import _hfm_average

    print(f"fairmonitor from {Path(fairmonitor.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.parquet"
        write_rows(path, n)
        df = spark.read.parquet(str(path)).repartition(args.partitions).cache()
        df.count()
        started = time.perf_counter()
        results, queries, timings = _hfm_average(
            df, sensitive_features=["sex", "race"], label="label", score="score",
            features=["x1", "x2", "x3"], prediction=None, threshold=0.5, timestamp=None,
            window=None, window_column=None, n_queries=args.queries, seed=0,
            min_group_size=1, intersection=True, missing="raise", spark=None)
        total = time.perf_counter() - started
    print(f"rows {n}, partitions {args.partitions}, queries {args.queries}")
    print(f"seconds: total {total:.1f}  "
          + "  ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    for attr, result in results[None].items():
        value = result[0].value_average if not isinstance(result[0], Exception) else result[0]
        print(f"  {attr}: value_average {value:.6f}")
    print("query rows per attribute:",
          {a: len(f) for a, f in queries[None].items()})
    with open("/proc/loadavg") as f:
        print("loadavg:", f.read().strip())
    spark.stop()


if __name__ == "__main__":
    main()
