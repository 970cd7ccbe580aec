"""MlflowSink against a real sqlite tracking store: keys, steps, timestamps, runs, retries."""

from __future__ import annotations

import logging
import shutil
import socket
import time
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from types import SimpleNamespace as NS

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from fairmonitor.monitor.sinks.mlflow import MONITORING_TAG, MlflowSink, SpoolWriteError
from fairmonitor.report import Window, evaluate_window

END = datetime(2026, 11, 22, 10, tzinfo=UTC)
DP_SEX = "fairness/demographic_parity_difference/sex"


def window_result(model, version, index, pred, *, race="abbaabba", intervals=False):
    # without intervals unless asked: the queue tests count values, one per (metric, attribute)
    report = evaluate_window(
        Window({"sex": list("FFFFMMMM"), "race": list(race)}, y_pred=pred),
        metrics=["demographic_parity_difference"], confidence_level=0.95 if intervals else None)
    end = END + timedelta(hours=index)
    return NS(model=model, version=version, index=index, end=end, report=report,
              errors=MappingProxyType({}))


def models(uri, experiment, *names):
    return {n: NS(tracking_uri=uri, experiment=experiment) for n in names}


def run_of(uri, experiment, model, version, kind="window"):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id],
                              filter_string=f"tags.`{MONITORING_TAG}` = 'true'")
    found = [r for r in runs if r.data.tags["fairmonitor.model"] == model
             and r.data.tags["fairmonitor.version"] == version
             and r.data.tags["fairmonitor.evaluation"] == kind]
    assert len(found) == 1
    return found[0]


def history(uri, run, key):
    return [(m.value, m.step, m.timestamp) for m in MlflowClient(uri).get_metric_history(
        run.info.run_id, key)]


def test_window_values_land_with_step_and_window_end(mlflow_tracking_uri):
    uri = mlflow_tracking_uri
    sink = MlflowSink(models(uri, "sink-steps", "credit"))
    sink.submit(window_result("credit", "3", 7, [1, 1, 1, 0, 1, 0, 0, 0]))
    sink.submit(window_result("credit", "3", 8, [1, 0, 1, 0, 1, 0, 1, 0]))
    assert sink.flush()
    run = run_of(uri, "sink-steps", "credit", "3")
    ms = int((END + timedelta(hours=7)).timestamp() * 1000)
    assert history(uri, run, DP_SEX) == [(0.5, 7, ms), (0.0, 8, ms + 3_600_000)]


def test_keys_are_the_plugin_keys_and_nan_is_skipped(mlflow_tracking_uri):
    uri = mlflow_tracking_uri
    sink = MlflowSink(models(uri, "sink-keys", "credit"))
    # one race group: DP on race is NaN
    sink.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0], race="aaaaaaaa",
                              intervals=True))
    assert sink.flush()
    run = run_of(uri, "sink-keys", "credit", "3")
    dp = "demographic_parity_difference"
    # each defined value comes with its interval and chance level (issue 16); the NaN value on
    # race and its NaN interval are skipped
    assert sorted(run.data.metrics) == sorted(
        f"fairness/{part}{dp}/{attr}" for part in ("", "ci_lower/", "ci_upper/", "chance/")
        for attr in ("sex", "sex:race"))
    m = run.data.metrics
    assert m[f"fairness/ci_lower/{dp}/sex"] <= m[DP_SEX] <= m[f"fairness/ci_upper/{dp}/sex"]
    assert 0 < m[f"fairness/chance/{dp}/sex"] < 1


def test_a_restarted_sink_finds_its_run_again(mlflow_tracking_uri):
    uri = mlflow_tracking_uri
    first = MlflowSink(models(uri, "sink-restart", "credit"))
    first.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))
    assert first.flush()
    second = MlflowSink(models(uri, "sink-restart", "credit"))
    second.submit(window_result("credit", "3", 2, [1, 1, 1, 0, 1, 0, 0, 0]))
    assert second.flush()
    run = run_of(uri, "sink-restart", "credit", "3")  # asserts a single run
    assert [step for _, step, _ in history(uri, run, DP_SEX)] == [1, 2]


def test_each_version_gets_its_own_run(mlflow_tracking_uri):
    uri = mlflow_tracking_uri
    sink = MlflowSink(models(uri, "sink-versions", "credit"))
    sink.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))
    sink.submit(window_result("credit", "4", 2, [1, 0, 1, 0, 1, 0, 1, 0]))
    assert sink.flush()
    run4 = run_of(uri, "sink-versions", "credit", "4")
    assert history(uri, run4, DP_SEX)[0][:2] == (0.0, 2)


def test_reference_evaluation_goes_to_its_own_run_at_step_0(mlflow_tracking_uri):
    uri = mlflow_tracking_uri
    sink = MlflowSink(models(uri, "sink-reference", "credit"))
    report = window_result("credit", "5", 0, [1, 1, 1, 0, 1, 0, 0, 0]).report
    sink.submit_reference("credit", "5", report, when=END)
    assert sink.flush()
    run = run_of(uri, "sink-reference", "credit", "5", kind="reference")
    assert history(uri, run, DP_SEX) == [(0.5, 0, int(END.timestamp() * 1000))]


def _failing_uri(tmp_path):
    """A sqlite URI whose directory is a file: every write fails until :func:`_bring_back`."""
    blocker = tmp_path / "later"
    blocker.write_text("a file where the store's directory should be: every write fails")
    return blocker, f"sqlite:///{blocker / 'mlflow.db'}"


def _bring_back(blocker, migrated_uri):
    """The server comes back: the directory appears, holding a migrated store (a copy, which
    saves the 10 s of migrations)."""
    blocker.unlink()
    blocker.mkdir()
    shutil.copy(migrated_uri.removeprefix("sqlite:///"), blocker / "mlflow.db")


def test_failed_writes_are_kept_and_retried_without_duplicates(mlflow_tracking_uri, tmp_path,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)  # a new store creates ./mlruns in the cwd
    blocker, uri = _failing_uri(tmp_path)
    errors = []
    sink = MlflowSink(models(uri, "sink-retry", "credit"),
                      on_error=lambda model, stage: errors.append((model, stage)))
    sink.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))
    assert not sink.flush()
    sink.submit(window_result("credit", "3", 2, [1, 0, 1, 0, 1, 0, 1, 0]))
    assert not sink.flush()
    assert (sink.pending, errors) == (6, [("credit", "mlflow")] * 2)
    _bring_back(blocker, mlflow_tracking_uri)
    assert sink.flush()
    assert sink.flush()  # nothing left: nothing written twice
    run = run_of(uri, "sink-retry", "credit", "3")
    assert [(v, s) for v, s, _ in history(uri, run, DP_SEX)] == [(0.5, 1), (0.0, 2)]


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_tracking_server_fails_fast_and_keeps_values(monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    errors = []
    sink = MlflowSink(models(f"http://127.0.0.1:{_closed_port()}", "x", "credit"),
                      on_error=lambda model, stage: errors.append(stage))
    sink.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))
    started = time.monotonic()
    assert not sink.flush()
    assert time.monotonic() - started < 10
    assert (sink.pending, errors) == (3, ["mlflow"])


def test_queue_overflow_drops_the_oldest_and_says_so(tmp_path, caplog):
    (tmp_path / "file").write_text("not a directory")
    uri = f"sqlite:///{tmp_path / 'file' / 'mlflow.db'}"
    sink = MlflowSink(models(uri, "x", "credit"), max_pending=4)
    with caplog.at_level(logging.WARNING, logger="fairmonitor.monitor.sinks.mlflow"):
        sink.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))
        sink.submit(window_result("credit", "3", 2, [1, 1, 1, 0, 1, 0, 0, 0]))
    assert (sink.pending, sink.dropped) == (3, 3)
    assert "dropped the 3 oldest values" in caplog.text


def test_window_without_report_queues_nothing():
    sink = MlflowSink()
    sink.submit(NS(model="m", version="1", index=1, end=END, report=None, errors={}))
    assert sink.pending == 0


# --- the spool: pending values survive a restart ------------------------------------------------

def test_spool_keeps_unwritten_values_across_a_restart(mlflow_tracking_uri, tmp_path,
                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocker, uri = _failing_uri(tmp_path)
    spool = tmp_path / "pending.jsonl"
    first = MlflowSink(models(uri, "sink-spool", "credit"), spool=spool)
    first.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))
    first.submit(window_result("credit", "3", 2, [1, 0, 1, 0, 1, 0, 1, 0]))
    assert not first.flush()
    assert len(spool.read_text().splitlines()) == 2  # one line per window
    del first  # the process dies with the server still down
    _bring_back(blocker, mlflow_tracking_uri)
    second = MlflowSink(models(uri, "sink-spool", "credit"), spool=spool)
    assert second.pending == 6
    assert second.flush()
    assert not spool.exists()  # everything written: nothing left to keep
    run = run_of(uri, "sink-spool", "credit", "3")
    ms = int((END + timedelta(hours=1)).timestamp() * 1000)
    assert history(uri, run, DP_SEX) == [(0.5, 1, ms), (0.0, 2, ms + 3_600_000)]


def test_spool_resent_values_are_not_doubled(mlflow_tracking_uri, tmp_path):
    """A crash between a write and the spool's rewrite sends those values again; MLflow keeps
    one copy of a metric identical in key, value, step and timestamp."""
    uri, spool = mlflow_tracking_uri, tmp_path / "pending.jsonl"
    sink = MlflowSink(models(uri, "sink-resend", "credit"), spool=spool)
    sink.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))
    saved = spool.read_text()
    assert sink.flush()
    spool.write_text(saved)  # as if the process died before removing the spool
    again = MlflowSink(models(uri, "sink-resend", "credit"), spool=spool)
    assert again.pending == 3 and again.flush()
    run = run_of(uri, "sink-resend", "credit", "3")
    assert [(v, s) for v, s, _ in history(uri, run, DP_SEX)] == [(0.5, 1)]


def test_spool_with_partly_written_window_keeps_only_the_rest(tmp_path, monkeypatch):
    """Values already written leave the spool: a window split over MLflow batches that fails
    halfway is spooled with its unwritten values only."""
    import fairmonitor.monitor.sinks.mlflow as sink_module

    monkeypatch.setattr(sink_module, "_BATCH", 2)
    spool = tmp_path / "pending.jsonl"
    sink = MlflowSink(spool=spool)
    sink.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))  # 3 values
    calls = []

    def write_once(run_id, metrics):
        calls.append(len(metrics))
        if len(calls) > 1:
            raise ConnectionError("server went away")

    monkeypatch.setattr(sink, "_client", lambda uri: NS(log_batch=write_once))
    monkeypatch.setattr(sink, "_run_id", lambda client, item: "run")
    assert not sink.flush()
    assert calls == [2, 1] and sink.pending == 1
    assert len(MlflowSink(spool=spool)._queue[0].points) == 1


def test_unreadable_spool_is_moved_aside_not_emptied(tmp_path, caplog):
    spool = tmp_path / "pending.jsonl"
    spool.write_text('{"not": "a queue item"}\n')
    with caplog.at_level(logging.ERROR, logger="fairmonitor.monitor.sinks.mlflow"):
        sink = MlflowSink(spool=spool)
    assert sink.pending == 0 and not spool.exists()
    assert (tmp_path / "pending.jsonl.corrupt").read_text() == '{"not": "a queue item"}\n'
    assert "is unreadable" in caplog.text


def test_unwritable_spool_with_mlflow_down_refuses_the_values(tmp_path, monkeypatch, caplog):
    """Issue 15 item 6: an unwritable spool used to keep values in memory only, so a crash lost
    them with no self-metric. Now ``submit`` raises (the job then holds its checkpoint) and the
    failure is counted under the stage ``spool``."""
    monkeypatch.chdir(tmp_path)
    blocker, uri = _failing_uri(tmp_path)
    (tmp_path / "file").write_text("not a directory")
    spool = tmp_path / "file" / "pending.jsonl"
    errors = []
    sink = MlflowSink(models(uri, "sink-nospool", "credit"), spool=spool,
                      on_error=lambda model, stage: errors.append((model, stage)))
    with caplog.at_level(logging.WARNING, logger="fairmonitor.monitor.sinks.mlflow"), \
            pytest.raises(SpoolWriteError, match="could be neither spooled"):
        sink.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))
    assert errors == [("credit", "spool")]
    assert sink.spool_failures == 1
    assert "cannot write the MLflow spool" in caplog.text


def test_unwritable_spool_with_mlflow_up_writes_through(mlflow_tracking_uri, tmp_path):
    """Without a spool, durable means written: the values go to MLflow at once."""
    (tmp_path / "file").write_text("not a directory")
    errors = []
    sink = MlflowSink(models(mlflow_tracking_uri, "sink-through", "credit"),
                      spool=tmp_path / "file" / "pending.jsonl",
                      on_error=lambda model, stage: errors.append((model, stage)))
    sink.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))
    assert (sink.pending, errors) == (0, [("credit", "spool")])
    run = run_of(mlflow_tracking_uri, "sink-through", "credit", "3")
    assert [(v, s) for v, s, _ in history(mlflow_tracking_uri, run, DP_SEX)] == [(0.5, 1)]


def test_spool_is_append_only_private_and_masked(tmp_path):
    """Issue 15 items 6, 12, 14: the spool was rewritten whole every window (O(n^2) bytes),
    world-readable, with the tracking URI's password in clear."""
    spool = tmp_path / "pending.jsonl"
    sink = MlflowSink(models("http://monitor:s3cret@127.0.0.1:1", "e", "credit"), spool=spool)
    sizes = []
    for i in range(1, 41):
        sink.submit(window_result("credit", "3", i, [1, 1, 1, 0, 1, 0, 0, 0]))
        sizes.append(spool.stat().st_size)
    growth = np.diff(sizes)
    # each window appends its own line (a few bytes more as ids and steps get digits); a
    # rewrite of the whole queue would grow by the queue's size
    assert growth.max() - growth.min() <= 8
    assert sizes[-1] < 40 * 400
    assert oct(spool.stat().st_mode & 0o777) == "0o600"
    text = spool.read_text()
    assert "s3cret" not in text and "http://monitor:***@127.0.0.1:1" in text
    # a restart finds the real URI again (the configured one it masks)
    again = MlflowSink(models("http://monitor:s3cret@127.0.0.1:1", "e", "credit"), spool=spool)
    assert again.pending == 120
    assert {item.tracking_uri for item in again._queue} == {"http://monitor:s3cret@127.0.0.1:1"}
    # the same window submitted again (a crash before the checkpoint) replaces its values
    again.submit(window_result("credit", "3", 40, [1, 1, 1, 0, 1, 0, 0, 0]))
    assert again.pending == 120
    assert MlflowSink(models("http://monitor:s3cret@127.0.0.1:1", "e", "credit"),
                      spool=spool).pending == 120


def test_spool_ignores_a_last_line_cut_by_a_crash(tmp_path):
    spool = tmp_path / "pending.jsonl"
    sink = MlflowSink(spool=spool)
    sink.submit(window_result("credit", "3", 1, [1, 1, 1, 0, 1, 0, 0, 0]))
    with open(spool, "a") as f:
        f.write('{"id": 1, "tracking_uri": null, "exp')  # the crash cut this append
    assert MlflowSink(spool=spool).pending == 3
