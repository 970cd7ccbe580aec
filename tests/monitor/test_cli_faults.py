"""Broken configs and failing runs from the command line (issue 15 items 12, 15-17): errors
instead of tracebacks, ``--check`` catching what it can, meaningful ``--once`` exit codes, one
rule for relative paths, and no password ever printed."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from fairmonitor.cli import main
from fairmonitor.exceptions import ConfigError
from fairmonitor.monitor.checkpoint import FileCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.sources.logger import PredictionLogger

T0 = datetime(2026, 11, 22, tzinfo=UTC)

CONFIG = """
checkpoint: {checkpoint}
models:
  credit:
    tracking_uri: "{mlflow}"
    source: {{kind: sql, url: "{url}"}}
    sensitive_features: [sex]
    prediction: prediction
    window: {window}
    start: "{start}"
    metrics: [demographic_parity_difference]
"""


def write(tmp_path, *, url="sqlite:///predictions.db", checkpoint="checkpoint.json",
          mlflow="sqlite:///mlflow.db", window="1h", start=None):
    start = T0.isoformat() if start is None else start
    path = tmp_path / "monitor.yaml"
    path.write_text(CONFIG.format(url=url, checkpoint=checkpoint, mlflow=mlflow, window=window,
                                  start=start))
    return path


def logged(db):
    log = PredictionLogger(f"sqlite:///{db}", model="credit", sensitive_features=["sex"])
    log.log({"sex": "F"}, prediction=1, timestamp=T0)
    log.close()


@pytest.mark.parametrize(("change", "message"), [
    ({"window": "99999999999d"}, "models.credit.window: must be at most"),
    ({"start": "9999-12-31"}, "models.credit.start: must be before"),
])
def test_absurd_values_are_config_errors_not_tracebacks(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, **change))


def test_checkpoint_path_that_is_a_directory_is_a_config_error(tmp_path):
    (tmp_path / "state").mkdir()
    with pytest.raises(ConfigError, match="checkpoint.path: is a directory"):
        load_config(write(tmp_path, checkpoint="state"))


def test_check_reports_a_missing_sqlite_file_and_never_creates_it(tmp_path, capsys):
    assert main(["monitor", "--config", str(write(tmp_path)), "--check"]) == 2
    err = capsys.readouterr().err
    assert f"models.credit.source.url: SQLite file not found: {tmp_path / 'predictions.db'}" \
        in err
    assert not (tmp_path / "predictions.db").exists()


def test_relative_sqlite_paths_resolve_against_the_config_directory(tmp_path, capsys,
                                                                  monkeypatch):
    logged(tmp_path / "predictions.db")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # run from another directory: same files
    cfg = load_config(write(tmp_path))
    assert cfg.models["credit"].source.url == f"sqlite:///{tmp_path / 'predictions.db'}"
    assert cfg.models["credit"].tracking_uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main(["monitor", "--config", str(tmp_path / "monitor.yaml"), "--check"]) == 0
    assert list(elsewhere.iterdir()) == []


def test_check_never_prints_a_password(tmp_path, capsys):
    path = write(tmp_path, url="postgresql+psycopg2://monitor:s3cret@127.0.0.1:1/db",
                 checkpoint="postgresql://monitor:s3cret@127.0.0.1:1/db",
                 mlflow="http://monitor:s3cret@127.0.0.1:1")
    main(["monitor", "--config", str(path), "--check"])
    out = capsys.readouterr()
    assert "s3cret" not in out.out + out.err
    assert "monitor:***@127.0.0.1:1" in out.out


def test_once_exits_1_when_the_source_fails(tmp_path, capsys):
    logged(tmp_path / "predictions.db")
    path = write(tmp_path)
    os.remove(tmp_path / "predictions.db")  # gone after the check: the run itself fails
    assert main(["monitor", "--config", str(path), "--once"]) == 1
    assert "source" in capsys.readouterr().err
    assert not (tmp_path / "predictions.db").exists()  # never created


def test_unreachable_sql_checkpoint_at_start_is_an_error_not_a_traceback(tmp_path, capsys):
    logged(tmp_path / "predictions.db")
    path = write(tmp_path, checkpoint="postgresql+psycopg2://u:pw@127.0.0.1:1/db")
    assert main(["monitor", "--config", str(path), "--once"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cannot start the monitor: ") and "Traceback" not in err
    assert "pw@" not in err


def test_backfill_rewinds_the_checkpoint(tmp_path, capsys):
    logged(tmp_path / "predictions.db")
    path = write(tmp_path)
    store = FileCheckpoint(tmp_path / "checkpoint.json")
    later = datetime(2026, 11, 23, tzinfo=UTC)
    from fairmonitor.monitor.checkpoint import ModelState

    store.save("credit", ModelState(later, later))
    code = main(["monitor", "--config", str(path), "--once", "--backfill-from",
                 "2026-11-22T05:00:00Z", "--web.listen-address", "127.0.0.1:0"])
    assert code in (0, 1)
    # rewound to just before the first window starting at 05:00, then caught up to now
    state = FileCheckpoint(tmp_path / "checkpoint.json").load("credit")
    assert state.predictions_end > later


def test_check_reports_a_checkpoint_location_that_cannot_be_created(tmp_path, capsys):
    logged(tmp_path / "predictions.db")
    (tmp_path / "state").write_text("a file where the checkpoint directory should be")
    assert main(["monitor", "--config", str(write(tmp_path, checkpoint="state/cp.json")),
                 "--check"]) == 2
    err = capsys.readouterr().err
    assert f"checkpoint.path: {tmp_path / 'state'} is a file, not a directory" in err
    assert f"mlflow_spool: {tmp_path / 'state'} is a file, not a directory" in err
