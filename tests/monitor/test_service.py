"""MonitorService: ticks, bounded runs, stop, faults, logs, the HTTP endpoint, SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from fairmonitor.monitor import job
from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.service import MonitorService, ReplayClock, parse_listen_address
from fairmonitor.monitor.sources import MemorySource

T0 = datetime(2026, 11, 22, tzinfo=UTC)  # where conftest's prediction_frame starts
HOUR = timedelta(hours=1)
DP = "demographic_parity_difference"


def config_text(source_url="sqlite:///unused.db", extra=""):
    return f"""
models:
  credit:
    source: {{kind: sql, url: "{source_url}"}}
    sensitive_features: [sex]
    label: label
    prediction: prediction
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [{DP}, equalized_odds_difference]
    thresholds:
      {DP}: {{warning: 0.1, critical: 0.2}}
{extra}"""


@pytest.fixture
def config(tmp_path):
    return load_config(config_text(), base_dir=tmp_path)


@pytest.fixture
def frame(make_predictions):
    """Six hours of 200 predictions; parity gap 0 in hours 0-2, 0.6 from hour 3 on."""
    return make_predictions(bias_from=3)


class FakeSink:
    """Stands in for MlflowSink (tested on its own against a real store)."""

    def __init__(self, fail=False):
        self.fail, self.submitted, self.flushes = fail, [], 0

    def submit(self, result):
        if self.fail:
            raise ConnectionError("tracking server down")
        self.submitted.append(result)

    def submit_reference(self, *args, **kwargs):
        pass

    def flush(self):
        self.flushes += 1
        return True

    pending = 0


def service(config, frame, *, source=None, sink=None, hours=6, **kw):
    source = source or MemorySource(frame)
    kw.setdefault("clock", ReplayClock(T0 + HOUR, HOUR, stop=T0 + hours * HOUR))
    return MonitorService(config, registry=CollectorRegistry(), sources={"credit": source},
                          checkpoint=MemoryCheckpoint(), sink=sink or FakeSink(),
                          listen_address="127.0.0.1:0", tick_seconds=0.05, **kw)


def value(svc, name, **labels):
    return svc.registry.get_sample_value(name, {"model": "credit", **labels})


def test_each_tick_evaluates_the_windows_due_at_the_clock(config, frame):
    svc = service(config, frame)
    assert [len(svc.tick()) for _ in range(3)] == [1, 1, 1]


def test_tick_feeds_the_collector_and_the_sink(config, frame):
    sink = FakeSink()
    svc = service(config, frame, sink=sink)
    for _ in range(4):
        svc.tick()
    assert value(svc, "fairmonitor_alert_state", version="1", metric=DP,
                 sensitive_attribute="sex") == 2.0
    assert (len(sink.submitted), sink.flushes) == (4, 4)


def test_run_stops_after_max_ticks_and_closes_the_endpoint(config, frame):
    svc = service(config, frame)
    ports = []
    svc._on_tick = lambda n, results: ports.append(svc.address[1])
    assert svc.run(max_ticks=3) == 0
    assert svc.ticks == 3
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/metrics", timeout=2)


def test_run_for_bounds_the_wall_time(config, frame):
    svc = service(config, frame)
    started = time.monotonic()
    svc.run(run_for=0.5)
    assert time.monotonic() - started < 5


def test_stop_from_another_thread_ends_run(config, frame):
    svc = service(config, frame)
    timer = threading.Timer(0.3, svc.stop)
    timer.start()
    started = time.monotonic()
    svc.run()
    timer.join()
    assert time.monotonic() - started < 5


def test_endpoint_serves_the_registry_while_running(config, frame):
    bodies = []

    def scrape(n, results):
        url = f"http://127.0.0.1:{svc.address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            bodies.append(response.read().decode())

    svc = service(config, frame, on_tick=scrape)
    svc.run(max_ticks=1)
    assert 'fairmonitor_window_samples{model="credit"} 200.0' in bodies[0]


def test_source_outage_is_counted_and_does_not_stop_the_service(config, frame):
    source = MemorySource(frame)
    source.down = True
    svc = service(config, frame, source=source)
    svc.tick()
    svc.tick()
    assert value(svc, "fairmonitor_errors_total", stage="source") == 2.0


def test_failing_mlflow_hook_is_counted_under_mlflow(config, frame):
    svc = service(config, frame, sink=FakeSink(fail=True))
    svc.tick()
    assert value(svc, "fairmonitor_errors_total", stage="mlflow") == 1.0


def test_mlflow_values_wait_in_the_spool_across_a_restart(tmp_path, frame):
    """The service's own sink spools beside the checkpoint file: values it could not write
    before stopping are queued again by the next service started from the same config."""
    (tmp_path / "down").write_text("a file where the tracking store's directory should be")
    text = config_text().replace(
        "    window: 1h\n", f"    window: 1h\n    tracking_uri: sqlite:///{tmp_path}/down/m.db\n")
    config = load_config(text, base_dir=tmp_path)
    assert config.mlflow_spool == tmp_path / "fairmonitor-mlflow-pending.jsonl"
    svc = MonitorService(config, registry=CollectorRegistry(), sources={"credit":
                         MemorySource(frame)}, checkpoint=MemoryCheckpoint(),
                         clock=ReplayClock(T0 + HOUR, HOUR, stop=T0 + 3 * HOUR),
                         listen_address="127.0.0.1:0", tick_seconds=0.05)
    svc.tick()
    svc.tick()
    waiting = svc.sink.pending
    assert waiting > 0 and config.mlflow_spool.exists()
    again = MonitorService(config, registry=CollectorRegistry(), sources={"credit":
                           MemorySource(frame)}, checkpoint=MemoryCheckpoint(),
                           listen_address="127.0.0.1:0", tick_seconds=0.05)
    assert again.sink.pending == waiting


def test_a_crashing_job_is_a_scheduler_error_not_a_crash(config, frame, monkeypatch, caplog):
    def boom(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(job, "run_once", boom)
    svc = service(config, frame)
    with caplog.at_level(logging.ERROR, logger="fairmonitor.monitor.service"):
        assert svc.tick() == []
    assert value(svc, "fairmonitor_errors_total", stage="scheduler") == 1.0


def test_one_info_line_per_window(config, frame, caplog):
    svc = service(config, frame)
    with caplog.at_level(logging.INFO, logger="fairmonitor.monitor.service"):
        svc.tick()
    lines = [r for r in caplog.records if r.name == "fairmonitor.monitor.service"]
    assert [(r.levelname, "verdict=ok" in r.getMessage()) for r in lines] == [("INFO", True)]


def test_threshold_crossing_is_a_warning_once(config, frame, caplog):
    svc = service(config, frame)
    with caplog.at_level(logging.INFO, logger="fairmonitor.monitor.service"):
        for _ in range(5):  # windows 0-2 fair, 3-4 biased
            svc.tick()
    warnings = [r.getMessage() for r in caplog.records
                if r.name == "fairmonitor.monitor.service" and r.levelno == logging.WARNING]
    assert warnings == [f"threshold crossed: credit {DP}[sex]=0.6 ok -> critical "
                        "(window ending 2026-11-22T04:00:00+00:00)"]


@pytest.fixture
def config_with_reference(tmp_path):
    (tmp_path / "reference.csv").write_text("sex,label,prediction\nF,1,1\nM,0,0\n")
    extra = """    model: models:/credit@champion
    reference: {path: reference.csv}
"""
    return load_config(config_text(extra=extra), base_dir=tmp_path)


def test_new_version_report_reaches_gauges_and_mlflow(config_with_reference, frame,
                                                      monkeypatch):
    from fairmonitor.monitor.versions import NewVersion, VersionResult
    from fairmonitor.report import Window, evaluate_window

    report = evaluate_window(Window({"sex": list("FFMM")}, y_pred=[1, 1, 1, 0]),
                             metrics=["demographic_parity_ratio"])
    new = NewVersion("credit", "credit", "9", "champion", "models:/credit/9")

    def evaluate_new_versions(config, checkpoint, *, on_report=None, **kwargs):
        on_report(new, report)
        return [VersionResult("credit", "9", new.uri, report)]

    monkeypatch.setattr(job, "evaluate_new_versions", evaluate_new_versions)
    sink = FakeSink()
    sink.submit_reference = lambda *args, **kwargs: sink.submitted.append(args)
    svc = service(config_with_reference, frame, sink=sink)
    svc.tick()
    # demographic_parity_ratio is not a window metric of this config: exported from reference
    assert value(svc, "fairmonitor_demographic_parity_ratio", version="9",
                 sensitive_attribute="sex") == 0.5
    assert sink.submitted[-1] == ("credit", "9", report)


def test_unreachable_registry_is_an_mlflow_error(config_with_reference, frame, monkeypatch):
    from fairmonitor.monitor.versions import VersionResult

    monkeypatch.setattr(job, "evaluate_new_versions", lambda *a, **k: [
        VersionResult("credit", "", "models:/credit@champion", None, {"mlflow": "refused"})])
    svc = service(config_with_reference, frame)
    svc.tick()
    assert value(svc, "fairmonitor_errors_total", stage="mlflow") == 1.0


def test_replay_clock_stops_at_its_end():
    clock = ReplayClock(T0, HOUR, stop=T0 + 2 * HOUR)
    assert [clock() for _ in range(4)] == [T0, T0 + HOUR, T0 + 2 * HOUR, T0 + 2 * HOUR]


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:9464", ("127.0.0.1", 9464)), ("[::1]:0", ("::1", 0)), ("host:80", ("host", 80))])
def test_parse_listen_address(text, expected):
    assert parse_listen_address(text) == expected


@pytest.mark.parametrize("text", ["9464", "127.0.0.1", ":9464", "host:port"])
def test_parse_listen_address_rejects(text):
    with pytest.raises(ValueError, match="listen address must look like 127.0.0.1:9464"):
        parse_listen_address(text)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_shuts_down_cleanly_and_restores_handlers(config, frame, signum):
    before = signal.getsignal(signum)
    # pytest runs tests in the main thread, so run() installs its handlers here
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signum))
    timer.start()
    svc = service(config, frame)
    started = time.monotonic()
    assert svc.run() == 0
    timer.join()
    assert (time.monotonic() - started < 10, signal.getsignal(signum)) == (True, before)


def on_window_ends(config, frame, **kw):
    """A service on the wall clock's window-end scheduling (no clock, no ``tick_seconds``)."""
    return MonitorService(config, registry=CollectorRegistry(), sources={"credit":
                          MemorySource(frame)}, checkpoint=MemoryCheckpoint(), sink=FakeSink(),
                          listen_address="127.0.0.1:0", **kw)


def test_next_tick_is_the_next_window_end_plus_settle(config, frame):
    svc = on_window_ends(config, frame, settle_seconds=2)
    now = T0 + 5 * HOUR + timedelta(minutes=20)
    # hourly windows and the default tick (the smallest `every`, 1h): the window end wins
    assert svc.next_tick(now) == T0 + 6 * HOUR + timedelta(seconds=2)
    fast = load_config(config_text(extra="tick: 10m\n"), base_dir=config.checkpoint.path.parent)
    svc = on_window_ends(fast, frame)
    # a retry interval shorter than the time to the next end (a source may be down)
    assert svc.next_tick(now) == now + timedelta(minutes=10)


def test_a_retry_never_evaluates_a_window_before_its_settle(config, frame):
    """CI saw ticks run 0.035-0.07 s after 1-second windows closed, under a 0.1 s settle: a
    tick that ended within the settle of a window end set the retry (one window later) inside
    the next window's settle, and the chain of retries kept that phase."""
    every_40m = load_config(config_text(extra="tick: 40m\n"),
                            base_dir=config.checkpoint.path.parent)
    svc = on_window_ends(every_40m, frame, settle_seconds=2)
    end = T0 + 6 * HOUR
    # the retry would land on the window end, or one second after it: both wait for the settle
    assert svc.next_tick(end - timedelta(minutes=40)) == end + timedelta(seconds=2)
    assert svc.next_tick(end - timedelta(minutes=40) + timedelta(seconds=1)) == \
        end + timedelta(seconds=2)
    # a retry before the window end runs as it is: it evaluates only windows that settled
    early = end - timedelta(minutes=40) - timedelta(seconds=1)
    assert svc.next_tick(early) == end - timedelta(seconds=1)


def test_a_catch_up_tick_never_evaluates_a_window_within_its_settle(config, frame):
    """The start-up tick (and a takeover's) ran at once: started half a second after a window
    end within its settle, it evaluated that window before the rows written just after
    its end arrived, and moved the checkpoint past it."""
    svc = on_window_ends(config, frame, settle_seconds=2)
    end = T0 + 6 * HOUR
    settled = end + timedelta(seconds=2)
    # within the settle of a window end (its end included): at that settle
    assert svc.catch_up_at(end) == settled
    assert svc.catch_up_at(end + timedelta(seconds=0.5)) == settled
    # once it settled, or before the end: at once
    assert svc.catch_up_at(settled) == settled
    later = end + timedelta(minutes=20)
    assert svc.catch_up_at(later) == later
    assert svc.catch_up_at(end - timedelta(seconds=1)) == end - timedelta(seconds=1)


def test_start_up_and_takeover_schedule_their_catch_up_after_the_settle(config, frame,
                                                                        monkeypatch):
    """What start() and a takeover schedule half a second after a window end (the wall clock
    frozen there)."""
    import fairmonitor.monitor.service as service_module

    end = T0 + 6 * HOUR

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return end + timedelta(seconds=0.5)

    svc = on_window_ends(config, frame, settle_seconds=2)
    scheduled: list[datetime] = []
    monkeypatch.setattr(svc, "_schedule", scheduled.append)
    monkeypatch.setattr(service_module, "datetime", Frozen)
    try:
        svc.start()
        svc._role_changed(True)  # the lease taken over at the same moment
    finally:
        svc.shutdown()
    assert scheduled == [end + timedelta(seconds=2)] * 2


def test_ticks_follow_window_ends_on_the_wall_clock(tmp_path, make_predictions):
    """Default scheduling, 1-second windows: each tick runs just after a window closed."""
    text = config_text().replace("    window: 1h\n", "    window: 1s\n").replace(
        f'    start: "{T0.isoformat()}"\n', "")
    cfg = load_config(text, base_dir=tmp_path)
    ticks: list[tuple[datetime, list]] = []
    svc = on_window_ends(cfg, make_predictions(n_hours=1), settle_seconds=0.1,
                         on_tick=lambda n, results: ticks.append((datetime.now(UTC), results)))
    thread = threading.Thread(target=svc.run, kwargs={"max_ticks": 6}, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    assert len(ticks) == 6
    lags = []
    for at, results in ticks[1:]:  # the first tick runs at start-up
        # `at` is taken when the tick has finished; the newest window it evaluated had closed
        # and was at most one window old
        lag = (at - results[-1].end).total_seconds()
        assert 0.0 <= lag < 1.0, lag
        lags.append(lag)
    # Ticks wait `settle_seconds` (0.1 s) after a window end (the schedule itself is checked
    # exactly by test_next_tick_is_the_next_window_end_plus_settle and
    # test_a_retry_never_evaluates_a_window_before_its_settle). APScheduler runs a job once the
    # wall clock reaches its time, so a tick on time reads a lag of at least 0.1 s; one that
    # fires most of a window late on a loaded machine evaluates the window that closed
    # meanwhile and reads less, so only most ticks need show the settle.
    assert sum(lag >= 0.1 for lag in lags) >= 3, lags
    ends = [r.end for _, results in ticks for r in results]
    steps = [(b - a).total_seconds() for a, b in zip(ends, ends[1:], strict=False)]
    assert steps == [1.0] * (len(ends) - 1)


def test_restart_exports_the_last_reported_values_and_states_at_once(tmp_path, frame):
    """Issue 15 item 3: a restart blanked every fairness series and alert state until the next
    window closed, so firing alerts resolved on every deploy."""
    from fairmonitor.monitor.checkpoint import FileCheckpoint

    config = load_config(config_text(), base_dir=tmp_path)
    first = MonitorService(config, registry=CollectorRegistry(), sources={"credit":
                           MemorySource(frame)}, checkpoint=FileCheckpoint(tmp_path / "cp.json"),
                           sink=FakeSink(), clock=lambda: T0 + 5 * HOUR,
                           listen_address="127.0.0.1:0")
    first.tick()
    labels = {"version": "1", "metric": DP, "sensitive_attribute": "sex"}
    before = {name: value(first, name, **lab) for name, lab in [
        ("fairmonitor_alert_state", labels),
        (f"fairmonitor_{DP}", {"version": "1", "sensitive_attribute": "sex"}),
        ("fairmonitor_window_end_timestamp_seconds", {}),
        ("fairmonitor_window_last_success_timestamp_seconds", {}),
        ("fairmonitor_value_window_end_timestamp_seconds",
         {"metric": DP, "sensitive_attribute": "sex"})]}
    assert before["fairmonitor_alert_state"] == 2.0  # critical: the gap is 0.6 from hour 3
    assert before[f"fairmonitor_{DP}"] == pytest.approx(0.6)
    assert before["fairmonitor_value_window_end_timestamp_seconds"] == (T0 + 5 * HOUR).timestamp()
    # the process is replaced (deploy); nothing new is due yet
    second = MonitorService(config, registry=CollectorRegistry(), sources={"credit":
                            MemorySource(frame)}, checkpoint=FileCheckpoint(tmp_path / "cp.json"),
                            sink=FakeSink(), clock=lambda: T0 + 5 * HOUR,
                            listen_address="127.0.0.1:0")
    after = {name: value(second, name, **lab) for name, lab in [
        ("fairmonitor_alert_state", labels),
        (f"fairmonitor_{DP}", {"version": "1", "sensitive_attribute": "sex"}),
        ("fairmonitor_window_end_timestamp_seconds", {}),
        ("fairmonitor_window_last_success_timestamp_seconds", {}),
        ("fairmonitor_value_window_end_timestamp_seconds",
         {"metric": DP, "sensitive_attribute": "sex"})]}
    assert after == before
    assert second.tick() == []
