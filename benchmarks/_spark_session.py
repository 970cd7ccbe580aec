"""The benchmarks' local Spark session: local[2] on 127.0.0.1, quiet, UTC, ready to time.

Shared by ``bench_spark.py``, ``bench_spark_driver.py`` and ``bench_spark_hfm.py`` (each run as
a script, so this module is beside them on ``sys.path``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
}


def local_session(app: str, master: str = "local[2]", **conf: str) -> Any:
    """Return a started ``master`` (default ``local[2]``) session named ``app``, warmed up.

    The Python workers import the checkout the driver imported (first on their
    ``PYTHONPATH``): a driver on the venv's install with executors on another checkout would
    mix two versions in one run and time, or compute, neither. ``conf`` adds or overrides
    Spark settings by their full keys, e.g. ``**{"spark.sql.shuffle.partitions": "2"}``.
    """
    import fairmonitor

    root = Path(fairmonitor.__file__).resolve().parents[1]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(root), str(root / "plugins"),
         *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app)
    for key, value in {**_CONF, **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")  # the benchmark's session, not the package's code
    spark.range(1).count()  # the JVM and the first job's machinery are up
    return spark
