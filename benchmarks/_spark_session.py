"""The benchmarks' local Spark session: local[2] on 127.0.0.1, quiet, UTC, ready to time.

Shared by the ``bench_spark*.py`` scripts (each run as a script, so this module is beside them
on ``sys.path``), with :func:`standalone`, a standalone cluster on 127.0.0.1 for them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def standalone(workers: int, tmp: str):
    """A standalone master and ``workers`` one-core workers on 127.0.0.1; stopped by PID.

    pyspark's ``bin/spark-class`` execs the JVM, so each ``Popen``'s PID is the daemon's own:
    terminating it (SIGTERM) runs the daemon's shutdown hook, which ends its executors.
    """
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOCAL_DIRS": tmp, "SPARK_LOG_DIR": tmp, "SPARK_NO_DAEMONIZE": "1"}
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    daemons = []
    log = open(Path(tmp) / "daemons.log", "w")  # noqa: SIM115 (closed below)
    try:
        daemons.append(subprocess.Popen(
            [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
             "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port())],
            env=env, stdout=log, stderr=subprocess.STDOUT))
        for k in range(workers):
            work = Path(tmp) / f"worker{k}"
            work.mkdir()
            daemons.append(subprocess.Popen(
                [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
                 "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                 "--webui-port", str(_free_port()), "--work-dir", str(work), url],
                env=env, stdout=log, stderr=subprocess.STDOUT))
        yield url
    finally:
        for proc in reversed(daemons):
            proc.terminate()
        for proc in reversed(daemons):
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
