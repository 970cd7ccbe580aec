"""``fairmonitor monitor``: --check, --once, and argument errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from mlflow.tracking import MlflowClient

from fairmonitor.cli import main
from fairmonitor.monitor.checkpoint import FileCheckpoint
from fairmonitor.monitor.sources.logger import PredictionLogger

T0 = datetime(2026, 11, 22, tzinfo=UTC)  # where conftest's prediction_frame starts

VALID = """
checkpoint: checkpoint.json
models:
  credit:
    tracking_uri: "{mlflow}"
    experiment: {experiment}
    source: {{kind: sql, url: "sqlite:///{db}"}}
    sensitive_features: [sex]
    label: label
    prediction: prediction
    window: 1h
    start: "{start}"
    metrics: [demographic_parity_difference]
    thresholds:
      demographic_parity_difference: {{warning: 0.1, critical: 0.2}}
"""


def write_config(tmp_path, *, mlflow="sqlite:///unused.db", experiment="cli", start=T0):
    path = tmp_path / "monitor.yaml"
    path.write_text(VALID.format(mlflow=mlflow, experiment=experiment,
                                 db=tmp_path / "predictions.db", start=start.isoformat()))
    return path


def test_check_accepts_a_valid_config(tmp_path, capsys):
    # --check requires the source file and its table with every configured column
    PredictionLogger(f"sqlite:///{tmp_path / 'predictions.db'}", model="credit",
                     sensitive_features=["sex"]).close()
    assert main(["monitor", "--config", str(write_config(tmp_path)), "--check"]) == 0
    assert capsys.readouterr().out.startswith("config OK: 1 model(s)")


def test_check_lists_every_error_and_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("models: {credit: {window: 1 hour}}\n")
    assert main(["monitor", "--config", str(path), "--check"]) == 2
    err = capsys.readouterr().err
    assert "models.credit.window: must be a duration like '30s', '5m', '1h' or '1d'" in err


def test_run_without_check_rejects_an_invalid_config_with_2(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("models: {credit: {window: 1 hour}}\n")
    assert main(["monitor", "--config", str(path)]) == 2
    assert "monitor config has" in capsys.readouterr().err


def test_bad_listen_address_exits_2(tmp_path, capsys):
    path = write_config(tmp_path)
    assert main(["monitor", "--config", str(path), "--web.listen-address", "9464"]) == 2
    assert capsys.readouterr().err.startswith("--web.listen-address: listen address must look")


def test_config_is_required(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["monitor"])
    assert exc.value.code == 2


def test_once_evaluates_the_due_windows_and_writes_mlflow(tmp_path, make_predictions,
                                                          mlflow_tracking_uri, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # the CLI sets these defaults for the process; registering them restores them afterwards
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
    # three closed hours before the wall clock's current hour
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    frame = make_predictions(3, bias_from=1)
    frame["timestamp"] = frame["timestamp"] + (start - T0)
    with PredictionLogger(f"sqlite:///{tmp_path / 'predictions.db'}", model="credit",
                          version="1", sensitive_features=["sex"]) as log:
        log.log_frame(frame)
    path = write_config(tmp_path, mlflow=mlflow_tracking_uri, experiment="cli-once", start=start)
    assert main(["monitor", "--config", str(path), "--once"]) == 0
    state = FileCheckpoint(tmp_path / "checkpoint.json").load("credit")
    assert state.predictions_end == start + timedelta(hours=3)
    client = MlflowClient(mlflow_tracking_uri)
    exp = client.get_experiment_by_name("cli-once")
    (run,) = client.search_runs([exp.experiment_id])
    history = client.get_metric_history(run.info.run_id,
                                        "fairness/demographic_parity_difference/sex")
    assert [round(m.value, 6) for m in history] == [0.0, 0.6, 0.6]


def test_taken_port_exits_1_with_the_address(tmp_path, capsys, monkeypatch):
    import socket

    monkeypatch.chdir(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["monitor", "--config", str(write_config(tmp_path)),
                     "--web.listen-address", f"127.0.0.1:{port}"])
    assert (code, capsys.readouterr().err.startswith(f"cannot serve metrics on 127.0.0.1:{port}")
            ) == (1, True)
