"""The data pipeline's own alarms (issue 24 item 4): overdue labels, data errors, held windows.

Each test reproduces a reported behaviour first: labels that stop arriving were reported as
"no traffic" and never raised an overdue state; a misnamed column surfaced as a bare
``KeyError``, every window failed silently while the watermark moved on (the windows were
lost), ``--once`` exited 0 and ``--check`` said OK without looking at the source.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from prometheus_client import CollectorRegistry

from fairmonitor.cli import main
from fairmonitor.metrics import demographic_parity_difference, equalized_odds_difference
from fairmonitor.monitor.checkpoint import FileCheckpoint, MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import describe, run_once
from fairmonitor.monitor.sinks.prometheus import FairnessCollector
from fairmonitor.monitor.sources import MemorySource, SQLSource
from fairmonitor.monitor.sources.logger import PredictionLogger

T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)
M = timedelta(minutes=1)
DPD = "demographic_parity_difference"
EOD = "equalized_odds_difference"


def _config(*, label="label", sensitive="sex", extra="", catch_up=100, url="sqlite://"):
    return load_config(f"""
catch_up: {catch_up}
models:
  credit:
    source: {{kind: sql, url: "{url}"}}
    sensitive_features: [{sensitive}]
    prediction: prediction
    label: {label}
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: [{DPD}, {EOD}]
    min_group_size: 1      # the small test windows: every group counts (as before the
    min_condition_size: 1  # shared defaults of 30 rows / 10 conditioning rows)
{extra}""")


def _undefined(registry, metric, reason):
    return registry.get_sample_value("fairmonitor_metric_undefined", {
        "model": "credit", "version": "1", "metric": metric, "sensitive_attribute": "sex",
        "reason": reason})


def _oracle(frame, metric, hour):
    """The metric computed directly on one hour's rows (independent of the pipeline)."""
    start, end = T0 + hour * H, T0 + (hour + 1) * H
    rows = frame[(frame["timestamp"] >= start) & (frame["timestamp"] < end)]
    if metric == DPD:
        return demographic_parity_difference(None, rows["prediction"].to_numpy(),
                                             sensitive_features=rows["sex"].to_numpy())
    return equalized_odds_difference(rows["label"].to_numpy(), rows["prediction"].to_numpy(),
                                     sensitive_features=rows["sex"].to_numpy())


# ------------------------------------------------------------------ labels overdue

def test_labels_that_stop_arriving_are_overdue_not_no_traffic(make_predictions):
    frame = make_predictions(n_hours=8, bias_from=4)
    frame.loc[frame["timestamp"] >= T0 + 2 * H, "label"] = np.nan  # labels stop at 02:00
    cfg = _config(extra="    labels_after: 1h\n")
    source, store = MemorySource(frame), MemoryCheckpoint()
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models, build_version="t")
    overdue = []
    for k in range(1, 9):  # a tick a minute after each window closes
        for r in run_once(cfg, {"credit": source}, store, now=T0 + k * H + M,
                          on_result=collector.observe):
            if r.phase == "labels" and r.end >= T0 + 3 * H:
                assert r.labels_overdue and r.errors == {}
                assert describe(r).endswith("not evaluated (labels overdue: no row labelled)")
        overdue.append(registry.get_sample_value("fairmonitor_labels_overdue_windows",
                                                 {"model": "credit"}))
    # labels of the window ending at k*H are due at (k+1)*H; windows from 02:00 have none:
    # the one ending 03:00 is the first overdue (tick 4), then one more per tick, never 0
    assert overdue == [0, 0, 0, 1, 2, 3, 4, 5]
    assert _undefined(registry, EOD, "labels_overdue") == 1.0
    assert _undefined(registry, EOD, "no_traffic") is None
    # the label-free metric is still the latest window's (DP of hour 7: 0.6)
    assert registry.get_sample_value(f"fairmonitor_{DPD}", {
        "model": "credit", "version": "1", "sensitive_attribute": "sex"}) == pytest.approx(
            _oracle(frame, DPD, 7))
    # labels are back for the hour 6 window: evaluated (EO of hour 6) and no longer overdue
    back = frame["timestamp"] >= T0 + 6 * H
    frame.loc[back, "label"] = frame.loc[back, "prediction"]
    results = run_once(cfg, {"credit": source}, store, now=T0 + 8 * H + 2 * M,
                       on_result=collector.observe)
    (relabelled,) = [r for r in results if r.end == T0 + 7 * H]
    assert relabelled.report.values[(EOD, "sex")] == pytest.approx(_oracle(frame, EOD, 6))
    assert registry.get_sample_value("fairmonitor_labels_overdue_windows",
                                     {"model": "credit"}) == 0


def test_partial_labels_below_min_label_coverage_are_overdue_but_evaluated(make_predictions):
    frame = make_predictions(n_hours=2)
    # window 2 (01:00-02:00): 30% of its rows labelled when due; coverage floor 0.5
    second = np.flatnonzero((frame["timestamp"] >= T0 + H).to_numpy())
    frame.loc[second[np.arange(second.size) % 10 >= 3], "label"] = np.nan
    cfg = _config(extra="    labels_after: 1h\n    relabel_within: 0s\n")
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models, build_version="t")
    results = run_once(cfg, {"credit": MemorySource(frame)}, MemoryCheckpoint(),
                       now=T0 + 3 * H, on_result=collector.observe)
    labelled = [r for r in results if r.phase == "labels"]
    assert [r.labels_overdue for r in labelled] == [False, True]
    assert labelled[1].label_coverage == pytest.approx(0.3)
    assert labelled[1].report.values[(EOD, "sex")] == pytest.approx(0.0)  # on labelled rows
    assert registry.get_sample_value("fairmonitor_labels_overdue_windows",
                                     {"model": "credit"}) == 1


def test_labels_overdue_count_survives_a_restart(tmp_path, make_predictions):
    frame = make_predictions(n_hours=4)
    frame["label"] = np.nan
    cfg = _config(extra="    labels_after: 1h\n    relabel_within: 0s\n")
    store = FileCheckpoint(tmp_path / "checkpoint.json")
    run_once(cfg, {"credit": MemorySource(frame)}, store, now=T0 + 4 * H)
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models, build_version="t")
    collector.restore("credit", FileCheckpoint(tmp_path / "checkpoint.json").load("credit").last)
    # windows ending 01:00, 02:00, 03:00 were due for labels at 04:00, none had one
    assert registry.get_sample_value("fairmonitor_labels_overdue_windows",
                                     {"model": "credit"}) == 3
    assert _undefined(registry, EOD, "labels_overdue") == 1.0


# ------------------------------------------------------------------ data errors

def test_a_label_typo_is_a_clear_data_error_not_a_bare_key_error(make_predictions):
    frame = make_predictions(n_hours=1)
    (result,) = run_once(_config(label="outcomes"), {"credit": MemorySource(frame)},
                         MemoryCheckpoint(), now=T0 + H)
    message = result.errors["data"]
    assert "KeyError" not in message
    assert message.startswith("models.credit.label: label column 'outcomes' is not in the "
                              "source; available columns: ['timestamp', 'model', 'version', "
                              "'sex', 'prediction', 'score', 'label']. Fix "
                              "models.credit.label in the config")


def test_a_missing_sensitive_column_of_a_sql_table_is_named_even_without_rows(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    PredictionLogger(url, model="credit", sensitive_features=["sex"]).close()
    source = SQLSource(url, columns=("gender", "label", "prediction"))
    cfg = _config(sensitive="gender")
    (result,) = run_once(cfg, {"credit": source}, MemoryCheckpoint(), now=T0 + H)
    assert result.errors["data"].startswith(
        "models.credit.sensitive_features[0]: sensitive feature column 'gender' is not in the "
        "source; available columns: ['id', 'timestamp', 'model', 'version', 'score', "
        "'prediction', 'label', 'labeled_at', 'features', 'sex']")


def test_data_error_holds_the_watermark_and_the_fixed_config_evaluates_the_windows(
        make_predictions):
    frame = make_predictions(n_hours=4, bias_from=2)
    source, store = MemorySource(frame), MemoryCheckpoint()
    registry = CollectorRegistry()
    typo = _config(label="outcomes")
    collector = FairnessCollector(registry, models=typo.models, build_version="t")
    for k in (1, 2, 3):
        results = run_once(typo, {"credit": source}, store, now=T0 + k * H + M,
                           on_result=collector.observe)
        # one failing window per tick, always the first held one
        assert [(r.end, set(r.errors)) for r in results] == [(T0 + H, {"data"})]
        assert store.load("credit").predictions_end == T0  # held
    assert registry.get_sample_value("fairmonitor_errors_total",
                                     {"model": "credit", "stage": "data"}) == 3
    # windows ending 01:00, 02:00 and 03:00 are due and held
    assert registry.get_sample_value("fairmonitor_data_error_windows", {"model": "credit"}) == 3
    fixed = _config()
    results = run_once(fixed, {"credit": source}, store, now=T0 + 4 * H + M,
                       on_result=collector.observe)
    assert [r.end for r in results] == [T0 + (h + 1) * H for h in range(4)]
    assert all(r.ok for r in results)
    for h, r in enumerate(results):
        assert r.report.values[(DPD, "sex")] == pytest.approx(_oracle(frame, DPD, h))
        assert r.report.values[(EOD, "sex")] == pytest.approx(_oracle(frame, EOD, h))
    assert [round(r.report.values[(DPD, "sex")], 6) for r in results] == [0, 0, 0.6, 0.6]
    assert store.load("credit").predictions_end == T0 + 4 * H
    assert registry.get_sample_value("fairmonitor_data_error_windows", {"model": "credit"}) == 0


def test_held_windows_beyond_catch_up_are_skipped_and_counted(make_predictions):
    frame = make_predictions(n_hours=5, bias_from=2)
    source, store = MemorySource(frame), MemoryCheckpoint()
    run_once(_config(label="outcomes", catch_up=2), {"credit": source}, store, now=T0 + 2 * H)
    assert store.load("credit").predictions_end == T0
    # the fixed config is loaded by a restarted monitor (a new process: a checkpoint object of
    # its own); in the same process, 3 simulated hours passing in milliseconds would be a
    # forward clock jump, whose windows are never skipped (issue 28, monitor/clock.py)
    store = MemoryCheckpoint(store.states)
    results = run_once(_config(catch_up=2), {"credit": source}, store, now=T0 + 5 * H)
    # five windows are due, the newest two (catch_up) are evaluated, three skipped
    assert [r.end for r in results] == [T0 + 4 * H, T0 + 5 * H]
    assert results[0].skipped_before == 3


def test_a_data_error_is_logged_once_per_cause_with_the_fix(make_predictions, caplog,
                                                           monkeypatch):
    from fairmonitor.monitor import job

    monkeypatch.setattr(job, "_data_causes", {})  # what earlier tests logged in this process
    frame = make_predictions(n_hours=3)
    source, store = MemorySource(frame), MemoryCheckpoint()
    with caplog.at_level(logging.WARNING, logger="fairmonitor.monitor.job"):
        for k in (1, 2, 3):
            run_once(_config(label="outcomes"), {"credit": source}, store, now=T0 + k * H)
    (record,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.ERROR
    text = record.getMessage()
    assert "label column 'outcomes' is not in the source" in text
    assert "available columns: ['timestamp'" in text and "Fix models.credit.label" in text


def test_an_unconvertible_label_is_a_data_error_that_holds(make_predictions):
    frame = make_predictions(n_hours=1)
    frame["label"] = frame["label"].map({0: "no", 1: "perhaps"})
    store = MemoryCheckpoint()
    (result,) = run_once(_config(), {"credit": MemorySource(frame)}, store, now=T0 + H)
    assert result.errors["data"].startswith("column 'label' must hold 0/1 or true/false; "
                                            "found ['perhaps']")
    assert store.load("credit").predictions_end == T0


# ------------------------------------------------------------------ CLI: --once and --check

ONCE = """
checkpoint: checkpoint.json
mlflow_spool: null
models:
  credit:
    tracking_uri: "{mlflow}"
    source: {{kind: {kind}, {where}}}
    sensitive_features: [{sensitive}]
    label: {label}
    prediction: prediction
    score: score
    window: 1h
    start: "{start}"
    metrics: [{DPD}]
"""


def _write(tmp_path, *, label="label", sensitive="sex", kind="sql", where=None,
           mlflow="sqlite:///unused.db", start=T0):
    where = where or f'url: "sqlite:///{tmp_path / "p.db"}"'
    path = tmp_path / "monitor.yaml"
    path.write_text(ONCE.format(mlflow=mlflow, kind=kind, where=where, sensitive=sensitive,
                                label=label, start=start.isoformat(), DPD=DPD))
    return path


def _log_rows(tmp_path, frame):
    with PredictionLogger(f"sqlite:///{tmp_path / 'p.db'}", model="credit", version="1",
                          sensitive_features=["sex"]) as log:
        log.log_frame(frame)


def test_once_exits_1_on_a_data_error_naming_the_column(tmp_path, make_predictions,
                                                        mlflow_tracking_uri, capsys,
                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - 2 * H
    frame = make_predictions(2)
    frame["timestamp"] = frame["timestamp"] + (start - T0)
    _log_rows(tmp_path, frame)
    path = _write(tmp_path, label="outcomes", mlflow=mlflow_tracking_uri, start=start)
    assert main(["monitor", "--config", str(path), "--once"]) == 1
    err = capsys.readouterr().err
    assert "data: models.credit.label: label column 'outcomes' is not in the source" in err
    assert FileCheckpoint(tmp_path / "checkpoint.json").load("credit").predictions_end == start


def test_check_lists_misnamed_columns_with_the_available_ones(tmp_path, make_predictions,
                                                             capsys):
    _log_rows(tmp_path, make_predictions(1))
    path = _write(tmp_path, label="outcomes", sensitive="gender")
    assert main(["monitor", "--config", str(path), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("monitor sources have 1 problem(s):\n")
    assert ("models.credit.label: label column 'outcomes' is not in table 'predictions' at "
            f"sqlite:///{tmp_path / 'p.db'}; models.credit.sensitive_features[0]: sensitive "
            "feature column 'gender' is not in table") in err
    assert "available columns: ['id', 'timestamp', 'model', 'version', 'score', " in err


def test_check_reports_a_missing_table(tmp_path, capsys):
    (tmp_path / "p.db").write_bytes(b"")
    assert main(["monitor", "--config", str(_write(tmp_path)), "--check"]) == 2
    assert "models.credit.source: table 'predictions' at sqlite:///" in capsys.readouterr().err


def test_check_accepts_a_source_with_every_column(tmp_path, make_predictions, capsys):
    _log_rows(tmp_path, make_predictions(1))
    assert main(["monitor", "--config", str(_write(tmp_path)), "--check"]) == 0
    assert capsys.readouterr().out.startswith("config OK: 1 model(s)")


def test_check_reads_the_first_file_schema_and_implausible_types(tmp_path, make_predictions,
                                                                capsys):
    folder = tmp_path / "preds"
    folder.mkdir()
    frame = make_predictions(1).drop(columns=["sex"])
    frame["prediction"] = frame["timestamp"]  # a datetime where 0/1 belongs
    frame.to_parquet(folder / "preds-2026-11-22.parquet")
    path = _write(tmp_path, kind="files", where=f'path: "{folder}"')
    assert main(["monitor", "--config", str(path), "--check"]) == 2
    err = capsys.readouterr().err
    assert "monitor sources have 2 problem(s)" in err
    assert "models.credit.sensitive_features[0]: sensitive feature column 'sex' is not in" in err
    assert ("models.credit.prediction: prediction column 'prediction' holds datetimes; "
            "expected 0/1 or true/false in") in err


def test_once_failing_stages_include_data():
    from fairmonitor.commands.monitor import FAILING_STAGES

    assert "data" in FAILING_STAGES


def test_min_label_coverage_is_validated():
    from fairmonitor.exceptions import ConfigError

    with pytest.raises(ConfigError, match=r"models.credit.min_label_coverage: must be a "
                                          r"fraction in \[0, 1\]"):
        _config(extra="    min_label_coverage: 2\n")
    assert _config().models["credit"].min_label_coverage == 0.5


def test_an_empty_frame_from_a_file_source_is_not_a_data_error():
    # no file covers the window: no columns but the timestamp; nothing to judge
    from fairmonitor.monitor.columns import frame_problem

    empty = pd.DataFrame({"timestamp": pd.Series([], dtype="datetime64[ns, UTC]")})
    assert frame_problem(_config().models["credit"], empty, labels=True) is None


def test_a_misnamed_timestamp_column_is_a_data_error_not_an_outage(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    PredictionLogger(url, model="credit", sensitive_features=["sex"]).close()
    source = SQLSource(url, timestamp_column="ts")
    store = MemoryCheckpoint()
    (result,) = run_once(_config(), {"credit": source}, store, now=T0 + H)
    assert set(result.errors) == {"data"}
    assert result.errors["data"].startswith(
        "models.credit.source.timestamp_column: timestamp column 'ts' is not in table "
        f"'predictions' at sqlite:///{tmp_path / 'p.db'}; available columns: ['id', "
        "'timestamp', ")
    assert store.load("credit").predictions_end == T0
