from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from fairmonitor.metrics import demographic_parity_difference
from fairmonitor.monitor.checkpoint import FileCheckpoint, MemoryCheckpoint, ModelState
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import (
    describe,
    evaluate_model_window,
    labels_pending_count,
    next_run,
    run_once,
)
from fairmonitor.monitor.sources import MemorySource

T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)
DPD = "demographic_parity_difference"
DPR = "demographic_parity_ratio"
EOD = "equal_opportunity_difference"


def _config(extra: str = "", *, catch_up: int = 100, model: str = ""):
    return load_config(f"""
catch_up: {catch_up}
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: [{DPD}, {DPR}, {EOD}]
    thresholds:
      {DPD}: {{warning: 0.1, critical: 0.3}}
      {DPR}: {{warning: 0.8, critical: 0.5}}
{model}{extra}""")


def test_bias_flips_statuses_from_ok_to_critical_at_the_injected_window(make_predictions):
    source = MemorySource(make_predictions(n_hours=6, bias_from=3))
    results = run_once(_config(), {"credit": source}, MemoryCheckpoint(), now=T0 + 6 * H)
    assert [r.start for r in results] == [T0 + k * H for k in range(6)]
    assert [r.status for r in results] == ["ok"] * 3 + ["critical"] * 3
    dpd = [r.report.values[(DPD, "sex")] for r in results]
    assert dpd == pytest.approx([0.0, 0.0, 0.0, 0.6, 0.6, 0.6])
    # the ratio breaches its LOWER bound, the registry's default for higher-is-fairer metrics
    assert results[3].report.values[(DPR, "sex")] == pytest.approx(0.25)
    assert results[3].report.statuses[(DPR, "sex")] == "critical"
    assert results[2].report.statuses[(DPR, "sex")] == "ok"
    assert all(r.ok for r in results)
    assert [r.n_rows for r in results] == [200] * 6
    assert results[0].phase == "full"
    assert results[0].labels_included
    assert results[0].index == (T0 + H - datetime(1970, 1, 1, tzinfo=UTC)) // H
    assert results[1].index == results[0].index + 1


def test_restart_resumes_without_skipping_or_repeating(tmp_path, make_predictions):
    frame = make_predictions(n_hours=6)
    cfg = _config()
    first = MemorySource(frame)
    done1 = run_once(cfg, {"credit": first}, FileCheckpoint(tmp_path / "cp.json"),
                     now=T0 + timedelta(hours=3, minutes=30))
    # the process dies; a new one starts with a new checkpoint object on the same file
    second = MemorySource(frame)
    store = FileCheckpoint(tmp_path / "cp.json")
    done2 = run_once(cfg, {"credit": second}, store, now=T0 + 6 * H)
    again = run_once(cfg, {"credit": second}, store, now=T0 + 6 * H + timedelta(minutes=59))
    ends = [r.end for r in done1 + done2]
    assert ends == [T0 + k * H for k in range(1, 7)]
    assert again == []
    assert store.load("credit").predictions_end == T0 + 6 * H


def test_without_start_a_new_monitor_begins_with_the_latest_window(make_predictions):
    cfg = load_config(_config_text_without_start())
    results = run_once(cfg, {"credit": MemorySource(make_predictions(n_hours=6))},
                       MemoryCheckpoint(), now=T0 + timedelta(hours=5, minutes=20))
    assert [r.end for r in results] == [T0 + 5 * H]


def _config_text_without_start() -> str:
    return f"""
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    metrics: [{DPD}]
"""


def test_catch_up_cap_skips_the_oldest_with_a_warning(make_predictions, caplog):
    source = MemorySource(make_predictions(n_hours=6))
    with caplog.at_level(logging.WARNING, logger="fairmonitor.monitor.job"):
        results = run_once(_config(catch_up=2), {"credit": source}, MemoryCheckpoint(),
                           now=T0 + 6 * H)
    assert [r.end for r in results] == [T0 + 5 * H, T0 + 6 * H]
    assert ("credit: 4 missed full window(s) beyond the catch-up cap (2) were skipped"
            in caplog.text)
    # issue 15 item 11: the rows of skipped windows are in no value: counted, not only logged
    assert [r.skipped_before for r in results] == [4, 0]
    from prometheus_client import CollectorRegistry

    from fairmonitor.monitor.sinks.prometheus import FairnessCollector

    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=_config().models)
    for r in results:
        collector.observe(r)
    assert registry.get_sample_value("fairmonitor_windows_skipped_total",
                                     {"model": "credit"}) == 4.0


def test_source_down_retries_the_same_window_next_tick(make_predictions, caplog):
    source = MemorySource(make_predictions(n_hours=3))
    store = MemoryCheckpoint()
    cfg = _config()
    source.down = True
    with caplog.at_level(logging.WARNING):
        failed = run_once(cfg, {"credit": source}, store, now=T0 + 3 * H)
    assert len(failed) == 1  # later windows wait: the watermark never jumps a gap
    assert failed[0].report is None
    assert failed[0].errors == {"source": "WindowUnavailableError: memory source is down "
                                          "(down=True)"}
    assert failed[0].status == "undefined"
    assert "not evaluated (source: WindowUnavailableError" in caplog.text
    assert store.load("credit").predictions_end == T0
    source.down = False
    recovered = run_once(cfg, {"credit": source}, store, now=T0 + 3 * H)
    assert [r.end for r in recovered] == [T0 + H, T0 + 2 * H, T0 + 3 * H]


def test_empty_window_completes_as_no_traffic_not_as_an_error(make_predictions):
    source = MemorySource(make_predictions(n_hours=2))
    store = MemoryCheckpoint()
    results = run_once(_config(), {"credit": source}, store, now=T0 + 3 * H)
    assert [r.n_rows for r in results] == [200, 200, 0]
    assert results[2].errors == {}
    assert results[2].report is None
    assert results[2].status == "undefined"
    assert describe(results[2]).endswith("0 rows, not evaluated (no traffic)")
    assert store.load("credit").predictions_end == T0 + 3 * H


def test_failing_metric_is_recorded_and_the_others_still_computed(make_predictions):
    cfg = _config(f"    options: {{{DPD}: {{min_group_size: -1}}}}\n")
    results = run_once(cfg, {"credit": MemorySource(make_predictions(n_hours=1))},
                       MemoryCheckpoint(), now=T0 + H)
    (result,) = results
    assert set(result.errors) == {"metric"}
    assert result.errors["metric"].startswith(f"{DPD}/sex: error: ")
    assert np.isnan(result.report.values[(DPD, "sex")])
    assert result.report.values[(DPR, "sex")] == pytest.approx(1.0)


def test_missing_column_is_a_data_error(make_predictions):
    frame = make_predictions(n_hours=1).drop(columns=["sex"])
    (result,) = run_once(_config(), {"credit": MemorySource(frame)}, MemoryCheckpoint(),
                         now=T0 + H)
    assert result.errors["data"].startswith(
        "models.credit.sensitive_features[0]: sensitive feature column 'sex' is not in the "
        "source; available columns: ['timestamp', 'model', 'version', 'prediction', 'score', "
        "'label']")


def test_label_metrics_wait_for_labels_after_the_delay(make_predictions):
    frame = make_predictions(n_hours=3, bias_from=1)
    labels = frame["label"].copy()
    frame["label"] = np.nan  # labels have not arrived
    source = MemorySource(frame)
    cfg = _config("    labels_after: 24h\n")
    store = MemoryCheckpoint()
    early = run_once(cfg, {"credit": source}, store, now=T0 + 3 * H)
    assert [r.phase for r in early] == ["predictions"] * 3
    assert all(r.metrics == (DPD, DPR) for r in early)
    assert all(not r.labels_included for r in early)
    assert all((EOD, "sex") not in r.report.values for r in early)
    assert labels_pending_count(cfg, store, now=T0 + 3 * H) == {"credit": 3}
    # a day later the labels are in: the label metrics of the first two windows are due
    frame["label"] = labels
    done = run_once(cfg, {"credit": source}, store, now=T0 + 26 * H)
    assert [r.phase for r in done] == ["predictions"] * 23 + ["labels"] * 2
    late = done[-2:]
    assert [r.end for r in late] == [T0 + H, T0 + 2 * H]
    assert all(r.labels_included and r.metrics == (EOD,) for r in late)
    assert set(late[0].report.values) == {(EOD, "sex")}
    assert late[1].report.values[(EOD, "sex")] == pytest.approx(0.0)
    # windows 3h..26h are closed and wait for their labels
    assert labels_pending_count(cfg, store, now=T0 + 26 * H) == {"credit": 24}
    assert store.load("credit") == ModelState(T0 + 26 * H, T0 + 2 * H)


def test_labels_phase_uses_only_labelled_rows(make_predictions):
    frame = make_predictions(n_hours=1)
    frame.loc[frame.index[:50], "label"] = np.nan
    cfg = _config("    labels_after: 1h\n")
    src = MemorySource(frame)
    result = evaluate_model_window(cfg.models["credit"], src, T0, T0 + H, now=T0 + 2 * H,
                                   phase="labels")
    assert result.n_rows == 150
    assert result.labels_included


def test_full_phase_with_partial_labels(make_predictions):
    frame = make_predictions(n_hours=1)
    frame.loc[frame.index[:50], "label"] = np.nan
    result = evaluate_model_window(_config().models["credit"], MemorySource(frame), T0, T0 + H,
                                   now=T0 + H)
    assert result.n_rows == 200
    assert result.labels_included
    assert result.report.n_rows == 200
    assert result.report.values[(EOD, "sex")] == pytest.approx(0.0)
    assert result.ok


def test_missing_sensitive_values_are_grouped_by_default_or_dropped_and_counted(make_predictions):
    frame = make_predictions(n_hours=1)
    frame["sex"] = frame["sex"].astype(object)
    frame.loc[frame.index[:20], "sex"] = None
    grouped = evaluate_model_window(_config().models["credit"], MemorySource(frame), T0, T0 + H,
                                    now=T0 + H).report
    assert grouped.group_counts["sex"]["missing"] == 20
    kept = frame.iloc[20:]
    dropped = evaluate_model_window(_config("    missing: {sex: drop}\n").models["credit"],
                                    MemorySource(frame), T0, T0 + H, now=T0 + H).report
    assert dropped.n_rows == 180 and "missing" not in dropped.group_counts["sex"]
    assert dropped.values[(DPD, "sex")] == pytest.approx(demographic_parity_difference(
        None, kept["prediction"].to_numpy(), sensitive_features=kept["sex"].to_numpy()))
    assert "sensitive attribute 'sex': 20 row(s) with a missing value dropped from the window" \
        in dropped.notes
    with pytest.raises(Exception, match=r"missing.sex: must be one of \['group', 'drop', "
                                        r"'raise'\]; got 'skip'"):
        _config("    missing: {sex: skip}\n")


def test_full_phase_without_labels_gives_nan_with_reason(make_predictions):
    frame = make_predictions(n_hours=1, label=False).assign(label=np.nan)
    result = evaluate_model_window(_config().models["credit"], MemorySource(frame), T0, T0 + H,
                                   now=T0 + H)
    assert not result.labels_included
    assert np.isnan(result.report.values[(EOD, "sex")])
    assert result.report.reasons[(EOD, "sex")] == "labels not available"


def test_hooks_get_every_result_and_their_failures_are_recorded(make_predictions, caplog):
    seen = []

    def exporter(result):
        seen.append(result)
        raise ConnectionError("pushgateway unreachable")

    source = MemorySource(make_predictions(n_hours=2))
    store = MemoryCheckpoint()
    with caplog.at_level(logging.WARNING):
        results = run_once(_config(), {"credit": source}, store, now=T0 + 2 * H,
                           on_result={"export": exporter})
    assert [r.end for r in seen] == [T0 + H, T0 + 2 * H]
    assert seen[0].errors == {}  # the hook saw the result before it failed
    assert [r.errors for r in results] == [{"export": "ConnectionError: pushgateway "
                                                      "unreachable"}] * 2
    # an exporter holds no values the checkpoint must wait for
    assert store.load("credit").predictions_end == T0 + 2 * H
    assert "export hook" in caplog.text


def test_failing_mlflow_hook_holds_the_checkpoint_before_its_window(make_predictions):
    """The MLflow sink's values must be durable before the checkpoint moves past them: if it
    raises, the window is redone next tick and the exporter sees a checkpoint error."""
    seen = []

    def sink(result):
        raise RuntimeError("boom")

    sink.stage = "mlflow"
    store = MemoryCheckpoint()
    source = MemorySource(make_predictions(n_hours=2))
    results = run_once(_config(), {"credit": source}, store, now=T0 + 2 * H,
                       on_result=[sink, seen.append])
    assert len(results) == 1  # the second window waits for the first
    assert results[0].errors["mlflow"] == "RuntimeError: boom"
    assert results[0].errors["checkpoint"].startswith("not moved: the mlflow values")
    assert seen[0].errors == results[0].errors  # the exporter ran after the checkpoint
    assert store.load("credit").predictions_end == T0
    again = run_once(_config(), {"credit": source}, store, now=T0 + 2 * H,
                     on_result={"export": seen.append})
    assert [r.end for r in again] == [T0 + H, T0 + 2 * H]
    assert store.load("credit").predictions_end == T0 + 2 * H


def test_failed_checkpoint_write_is_an_error_and_stops_the_model(make_predictions, caplog):
    """Issue 15 item 1: a full checkpoint disk was only logged; the window counted as a
    success, was redone every tick and nothing could alert."""
    class FullDisk(MemoryCheckpoint):
        def save(self, model, state):
            if state.predictions_end is not None and state.predictions_end > T0:
                raise OSError(28, "No space left on device")
            super().save(model, state)

    seen = []
    source = MemorySource(make_predictions(n_hours=3))
    with caplog.at_level(logging.ERROR):
        results = run_once(_config(), {"credit": source}, FullDisk(), now=T0 + 3 * H,
                           on_result={"export": seen.append})
    assert len(results) == 1 and not results[0].ok
    assert "No space left on device" in results[0].errors["checkpoint"]
    assert seen[0].errors["checkpoint"] == results[0].errors["checkpoint"]
    assert "cannot save" in caplog.text


def test_version_is_the_most_frequent_in_the_window(make_predictions):
    frame = make_predictions(n_hours=1)
    frame.loc[frame.index[:150], "version"] = "2"
    result = evaluate_model_window(_config().models["credit"], MemorySource(frame), T0, T0 + H,
                                   now=T0 + H)
    assert result.version == "2"
    assert result.versions == {"2": 150, "1": 50}


def test_version_falls_back_to_the_configured_one(make_predictions):
    frame = make_predictions(n_hours=1).drop(columns=["version"])
    cfg = _config(model="    model: models:/credit/5\n").models["credit"]
    result = evaluate_model_window(cfg, MemorySource(frame), T0, T0 + H, now=T0 + H)
    assert result.version == "5"


def test_same_window_same_numbers(make_predictions):
    src = MemorySource(make_predictions(n_hours=1, bias_from=0))
    cfg = _config().models["credit"]
    a = evaluate_model_window(cfg, src, T0, T0 + H, now=T0 + H)
    b = evaluate_model_window(cfg, src, T0, T0 + H, now=T0 + 2 * H)
    assert dict(a.report.values) == dict(b.report.values)


def test_describe_is_one_line_with_the_breaches(make_predictions):
    src = MemorySource(make_predictions(n_hours=1, bias_from=0))
    result = evaluate_model_window(_config().models["credit"], src, T0, T0 + H, now=T0 + H)
    assert describe(result) == (
        f"credit v1 window #{result.index} [2026-11-22 00:00, 2026-11-22 01:00) full: 200 rows,"
        f" status critical ({DPD}/sex=0.6 critical, {DPR}/sex=0.25 critical)")


def test_only_faults_are_logged_above_debug(make_predictions, caplog):
    # the service logs the verdict of every window; the job adds warnings for faults only
    source = MemorySource(make_predictions(n_hours=2, bias_from=1))
    with caplog.at_level(logging.DEBUG, logger="fairmonitor.monitor.job"):
        run_once(_config(), {"credit": source}, MemoryCheckpoint(), now=T0 + 3 * H)
    levels = [r.levelname for r in caplog.records]
    assert levels == ["DEBUG", "DEBUG", "DEBUG"]  # ok, critical, empty window (no traffic)
    assert "not evaluated (no traffic)" in caplog.records[2].getMessage()


def test_run_once_needs_aware_now_and_a_source_per_model():
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        run_once(_config(), {}, MemoryCheckpoint(), now=datetime(2026, 11, 22))
    with pytest.raises(ValueError, match=r"no source given for model\(s\) \['credit'\]"):
        run_once(_config(), {}, MemoryCheckpoint(), now=T0)


def test_checkpoint_failure_skips_the_model_without_raising(make_predictions, caplog):
    class Broken(MemoryCheckpoint):
        def load(self, model):
            raise OSError("checkpoint store down")

    seen = []
    with caplog.at_level(logging.ERROR):
        results = run_once(_config(), {"credit": MemorySource(make_predictions(n_hours=1))},
                           Broken(), now=T0 + H, on_result={"export": seen.append})
    # one result without a report, so the exporter can count the fault
    assert [(r.report, dict(r.errors)) for r in results] == [
        (None, {"checkpoint": "unavailable: OSError: checkpoint store down"})]
    assert seen == results
    assert "checkpoint unavailable" in caplog.text


def test_logger_to_sql_source_to_run_once_with_late_labels(tmp_path, make_predictions,
                                                           postgres_url):
    """The whole input side on real databases: a serving app logs predictions, labels arrive
    a day later by id, the monitor evaluates label-free metrics at window close and the label
    metrics once the labels are in."""
    import uuid

    from fairmonitor.monitor.sources import build_sources
    from fairmonitor.monitor.sources.logger import PredictionLogger

    frame = make_predictions(n_hours=3, bias_from=2).assign(
        id=lambda f: [f"req-{i}" for i in range(len(f))])
    labels = frame.pop("label")
    for url in (f"sqlite:///{tmp_path / 'p.db'}", postgres_url):
        table = f"preds_{uuid.uuid4().hex[:8]}"
        with PredictionLogger(url, model="credit", version="1", sensitive_features=["sex"],
                              table=table) as logger:
            logger.log_frame(frame.drop(columns=["model"]))
        cfg = load_config(f"""
checkpoint: {{kind: sql, url: "{url}", table: cp_{table}}}
models:
  credit:
    source: {{kind: sql, url: "{url}", table: {table}}}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    window: 1h
    labels_after: 1d
    start: 2026-11-22T00:00:00Z
    metrics: [{DPD}, {EOD}]
    thresholds: {{{DPD}: {{warning: 0.1, critical: 0.3}}}}
""")
        from fairmonitor.monitor.checkpoint import open_checkpoint

        sources, store = build_sources(cfg), open_checkpoint(cfg.checkpoint)
        early = run_once(cfg, sources, store, now=T0 + 3 * H)
        assert [r.status for r in early] == ["ok", "ok", "critical"]
        assert [r.phase for r in early] == ["predictions"] * 3
        with PredictionLogger(url, model="credit", sensitive_features=["sex"],
                              table=table) as logger:
            assert logger.attach_labels(frame["id"], labels) == 600
        done = run_once(cfg, sources, store, now=T0 + 27 * H)
        late = [r for r in done if r.phase == "labels"]
        assert [(r.end, r.n_rows) for r in late] == [(T0 + k * H, 200) for k in (1, 2, 3)]
        assert [r.report.values[(EOD, "sex")] for r in late] == [0.0, 0.0, 0.0]
        for s in {id(s): s for s in sources.values()}.values():
            s.close()
        store.close()


def test_next_run_is_the_next_window_end_of_any_model():
    # credit: hourly windows; a 10-minute sliding model joins; labels 90m after the end
    cfg = _config(model=f"""  fast:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    window: 1h
    every: 10m
    labels_after: 90m
    metrics: [{DPD}, {EOD}]
""")
    now = T0 + 5 * H + timedelta(minutes=3)
    assert next_run(cfg, now) == T0 + 5 * H + timedelta(minutes=10)
    # exactly at an end, that window is due now: the next one is one cadence later
    assert next_run(cfg, T0 + 5 * H + timedelta(minutes=10)) == T0 + 5 * H + timedelta(minutes=20)
    hourly = _config()
    assert next_run(hourly, now) == T0 + 6 * H
    # the labelled phase of `fast` (end 04:00 + 90m = 05:30) comes before credit's 06:00
    only_labels = _config(model=f"""  fast:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    window: 1h
    labels_after: 90m
    metrics: [{EOD}]
""")
    assert next_run(only_labels, T0 + 5 * H + timedelta(minutes=3)) == (
        T0 + 5 * H + timedelta(minutes=30))


def test_a_window_is_due_at_the_run_next_run_names(make_predictions):
    """Scheduling at next_run evaluates the window that just closed, with no tick's delay."""
    source = MemorySource(make_predictions(n_hours=6))
    store = MemoryCheckpoint()
    cfg = _config()
    run_once(cfg, {"credit": source}, store, now=T0 + 2 * H + timedelta(minutes=7))
    at = next_run(cfg, T0 + 2 * H + timedelta(minutes=7))
    assert at == T0 + 3 * H
    (result,) = run_once(cfg, {"credit": source}, store, now=at)
    assert (result.start, result.end) == (T0 + 2 * H, T0 + 3 * H)
    assert run_once(cfg, {"credit": source}, store, now=at + timedelta(minutes=59)) == []


def test_late_labels_are_used_and_label_coverage_is_reported(make_predictions):
    """Issue 15 item 5: labels arriving after labels_after were never used, and EO computed on
    30% of the labels without saying so."""
    cfg = _config("    labels_after: 1h\n")
    full = make_predictions(n_hours=1)
    rng = np.random.default_rng(3)
    full["label"] = np.where(rng.uniform(size=len(full)) < 0.3, 1 - full["prediction"],
                             full["prediction"])  # a model with errors: EO gaps are not 0
    early = full.copy()
    early.loc[early.index[60:], "label"] = np.nan  # 30% labelled when the window is due
    source = MemorySource(early)
    store = MemoryCheckpoint()
    first = run_once(cfg, {"credit": source}, store, now=T0 + 2 * H)
    labelled = [r for r in first if r.phase == "labels"]
    assert [r.label_coverage for r in labelled] == [pytest.approx(0.3)]
    assert labelled[0].labelled_rows == 60
    assert store.load("credit").relabel == {str(labelled[0].index): 60}
    # nothing new: nothing evaluated again
    assert run_once(cfg, {"credit": source}, store, now=T0 + 2 * H + timedelta(minutes=5)) == []
    source.frames = full  # the late labels arrive
    late = run_once(cfg, {"credit": source}, store, now=T0 + 2 * H + timedelta(minutes=10))
    assert [(r.index, r.phase, r.label_coverage) for r in late] == [
        (labelled[0].index, "labels", 1.0)]
    oracle = evaluate_model_window(cfg.models["credit"], MemorySource(full), T0, T0 + H,
                                   now=T0 + 2 * H, phase="labels")
    assert late[0].report.values[(EOD, "sex")] == oracle.report.values[(EOD, "sex")]
    assert late[0].report.values[(EOD, "sex")] != labelled[0].report.values[(EOD, "sex")]
    assert store.load("credit").relabel == {}  # complete: no longer watched
    assert store.load("credit").labels_end == T0 + H  # the watermark did not move back


def test_late_labels_are_watched_only_within_relabel_within(make_predictions):
    cfg = _config("    labels_after: 1h\n    relabel_within: 30m\n")
    early = make_predictions(n_hours=1)
    early.loc[early.index[60:], "label"] = np.nan
    store = MemoryCheckpoint()
    run_once(cfg, {"credit": MemorySource(early)}, store, now=T0 + 2 * H)
    assert store.load("credit").relabel != {}
    late = run_once(cfg, {"credit": MemorySource(make_predictions(n_hours=1))}, store,
                    now=T0 + 2 * H + timedelta(minutes=31))
    assert [r for r in late if r.phase == "labels"] == []  # past the bound: not watched
    assert store.load("credit").relabel == {}
