"""One active monitor per checkpoint (issue 28 items 1, 5, 7): the lease, fencing, hot standbys,
failover and a prompt SIGTERM.

The lease classes are tested in-process (SQLite and the session's PostgreSQL); the failover
tests run real ``python -m fairmonitor.cli monitor`` processes (``replicas.Stack``) on one SQL
checkpoint, kill (SIGKILL), pause (SIGSTOP/SIGCONT) and stop (SIGTERM) them by PID, cut the
network to PostgreSQL with a proxy the test owns, and check MLflow against an independent
recomputation of every window: 0 lost, 0 duplicated, 0 wrong. Bounds are generous (lease +
tick + a margin for a loaded machine); ``benchmarks/bench_failover.py`` measures them.
"""

from __future__ import annotations

import contextlib
import signal
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fairmonitor.monitor.checkpoint import MemoryCheckpoint, ModelState, SQLCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.leadership import FileLease, LeaseKeeper, LeaseLost, SQLLease
from fairmonitor.monitor.service import MonitorService
from fairmonitor.monitor.sources import MemorySource
from fairmonitor.monitor.summary_store import SQLSummaryStore

from .conftest import T0, prediction_frame
from .replicas import Stack, TcpProxy, create_database, wait_for

LEASE = 2.0  # seconds: the replicas' lease
#: failover bound asserted: the lease, a third of it (the standby's polling), one tick (1 s),
#: and a margin for a machine shared with other test runs
FAILOVER_BOUND = LEASE + LEASE / 3 + 1.0 + 8.0
#: SIGTERM bound asserted: the documented 5 s flush budget + a window in flight + margin
SIGTERM_BOUND = 5.0 + 10.0


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ck.db'}"
    return request.getfixturevalue("postgres_url")


# ------------------------------------------------------------------ the leases, in-process
def test_file_lease_one_holder_identity_written_released_on_exit(tmp_path):
    path = tmp_path / "state" / "ck.json.lock"
    a, b = FileLease(path, holder="host-a:1"), FileLease(path, holder="host-b:2")
    assert a.acquire() and not b.acquire()
    assert path.read_text().split()[:2] == ["1", "host-a:1"]  # token and holder, for humans
    a.fence()  # held: writes go ahead
    a.release()
    assert b.acquire() and b.token == 2
    with pytest.raises(LeaseLost):
        a.fence()
    b.release()


def test_file_lease_refuses_writes_once_its_lock_file_is_replaced(tmp_path):
    path = tmp_path / "ck.json.lock"
    a = FileLease(path, holder="a")
    assert a.acquire()
    path.unlink()  # someone removed it: another process could now lock a new file
    with pytest.raises(LeaseLost):
        a.fence()
    assert a.refused == 1 and a.token is None


def test_sql_lease_takeover_after_expiry_fences_the_former_leader(db_url):
    table = _unique("lease")
    a = SQLLease(db_url, table, seconds=0.3, holder="a")
    b = SQLLease(db_url, table, seconds=0.3, holder="b")
    try:
        assert a.acquire() and a.token == 1
        assert not b.acquire()  # first look: the row is alive as far as b knows
        a.renew()
        time.sleep(0.1)
        assert not b.acquire()  # a renewed (beat moved): b starts counting again
        time.sleep(0.4)  # a is "paused" past its lease
        assert b.acquire() and b.token == 2
        with pytest.raises(LeaseLost, match="token 1 is no longer current"):
            a.renew()
        with pytest.raises(LeaseLost):
            a.fence()  # and every later write
        assert a.refused == 2
        b.renew()  # the new leader is unaffected
        b.release()
        c = SQLLease(db_url, table, seconds=60, holder="c")
        assert c.acquire() and c.token == 3  # released: no need to wait for the lease
        c.close()
    finally:
        a.close()
        b.close()


def test_sql_checkpoint_and_summary_writes_of_a_stale_leader_are_rolled_back(db_url):
    table = _unique("ck")
    a = SQLLease(db_url, f"{table}_lease", seconds=0.2, holder="a")
    b = SQLLease(db_url, f"{table}_lease", seconds=0.2, holder="b")
    ck = SQLCheckpoint(db_url, table)
    store = SQLSummaryStore(db_url, f"{table}_summaries")
    try:
        assert a.acquire()
        ck.fence = store.fence = a.fence
        good = ModelState(predictions_end=T0 + timedelta(hours=3))
        ck.save("credit", good)
        store.put("credit", 7, "predictions", b"seven")
        assert not b.acquire()
        time.sleep(0.3)
        assert b.acquire()  # a paused past its lease
        with pytest.raises(LeaseLost):
            ck.save("credit", ModelState(predictions_end=T0 + timedelta(hours=9)))
        with pytest.raises(LeaseLost):
            store.prune("credit", 100)
        with pytest.raises(LeaseLost):
            store.put("credit", 7, "predictions", b"other")
        # nothing of the refused writes reached the database
        assert SQLCheckpoint(db_url, table).load("credit") == good
        assert store.get("credit", [7], "predictions") == {7: b"seven"}
        ck.fence = store.fence = b.fence  # the new leader writes
        ck.save("credit", ModelState(predictions_end=T0 + timedelta(hours=4)))
    finally:
        for closeable in (a, b, ck, store):
            closeable.close()


def test_leader_paused_inside_a_postgres_transaction_does_not_keep_the_lease(postgres_url):
    import sqlalchemy as sa

    table = _unique("lease")
    a = SQLLease(postgres_url, table, seconds=1.0, holder="a")
    b = SQLLease(postgres_url, table, seconds=1.0, holder="b")
    try:
        assert a.acquire()
        conn = a.engine.connect()
        tx = conn.begin()
        a.fence(conn)  # a write in flight holds the lease row's lock... and the process stops
        t0 = time.monotonic()
        taken = False
        while not taken:
            assert time.monotonic() - t0 < 15, "the paused transaction kept the lease row"
            # an OperationalError: the row is still locked, try again
            with contextlib.suppress(sa.exc.OperationalError):
                taken = b.acquire()  # waits at most lock_timeout, never hangs
            time.sleep(0.1)
        assert b.token == 2
        with pytest.raises(sa.exc.DBAPIError):  # the server ended the paused transaction
            tx.commit()
        conn.close()
    finally:
        a.close()
        b.close()


def test_keeper_steps_down_when_renewals_fail_for_a_lease(tmp_path):
    url = f"sqlite:///{tmp_path / 'ck.db'}"
    lease = SQLLease(url, "ck_lease", seconds=0.3, holder="a")
    changes = []
    keeper = LeaseKeeper(lease, changes.append)
    assert keeper.step() and changes == [True]

    def unreachable(conn=None):
        raise OSError("connection refused")

    lease.renew = unreachable  # the database is cut off
    assert keeper.step()  # a failed renewal alone keeps the role...
    time.sleep(0.35)
    assert not keeper.step()  # ...until a lease has passed since the last one
    assert changes == [True, False] and lease.token is None
    lease.close()


# ------------------------------------------------------------------ the service, in-process
CONFIG = """
checkpoint: {{kind: sql, url: "sqlite:///{db}", lease: 60s}}
mlflow_spool: null
models:
  credit:
    tracking_uri: "sqlite:///{tmp}/mlflow.db"
    source: {{kind: sql, url: "sqlite:///{tmp}/unused.db"}}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    start: "{start}"
    metrics: [demographic_parity_difference]
"""


class _Sink:
    pending = dropped = spool_bytes = 0

    def __init__(self):
        self.submitted = []

    def submit(self, r):
        self.submitted.append(r.index)

    def submit_reference(self, *a, **k):
        pass

    def flush(self):
        return True


def _service(tmp_path, name, lease=None):
    path = tmp_path / "monitor.yaml"
    path.write_text(CONFIG.format(db=tmp_path / "ck.db", tmp=tmp_path, start=T0.isoformat()))
    config = load_config(path)
    sink = _Sink()
    frame = prediction_frame(n_hours=4, bias_from=2)
    svc = MonitorService(config, registry=CollectorRegistry(), sink=sink,
                         sources={"credit": MemorySource(frame)},
                         clock=lambda: T0 + timedelta(hours=4, minutes=1),
                         listen_address="127.0.0.1:0", lease=lease)
    return svc, sink


def test_a_standby_evaluates_nothing_and_exports_its_role_without_values(tmp_path):
    leader, leader_sink = _service(tmp_path, "a")
    standby, standby_sink = _service(tmp_path, "b")
    try:
        assert leader.is_leader and not standby.is_leader
        assert standby.tick() == [] and standby_sink.submitted == []
        assert len(leader.tick()) == 4 and len(leader_sink.submitted) == 4
        read = standby.registry.get_sample_value
        assert read("fairmonitor_leader") == 0 and read("fairmonitor_lease_token") == 0
        from fairmonitor import __version__

        assert read("fairmonitor_build_info", {"version": __version__}) == 1  # not "absent"
        # never led: no liveness of its own either (FairmonitorNeverEvaluated is per instance)
        assert read("fairmonitor_window_last_success_timestamp_seconds",
                    {"model": "credit"}) is None
        assert read("fairmonitor_demographic_parity_difference",
                    {"model": "credit", "sensitive_attribute": "sex", "version": "1"}) is None
        assert leader.registry.get_sample_value("fairmonitor_leader") == 1
        assert leader.registry.get_sample_value(
            "fairmonitor_demographic_parity_difference",
            {"model": "credit", "sensitive_attribute": "sex", "version": "1"}) == \
            pytest.approx(0.6)  # hour 3: F selected at 0.2, M at 0.8
    finally:
        standby.shutdown()
        leader.shutdown()  # releases the lease: the standby takes over at its next attempt
    again, sink = _service(tmp_path, "c")
    assert again.is_leader and again.tick() == []  # nothing due twice: the checkpoint moved
    again.shutdown()


def test_a_leader_that_stepped_down_keeps_its_frozen_liveness_not_its_values(tmp_path):
    url = f"sqlite:///{tmp_path / 'ck.db'}"
    leader, _ = _service(tmp_path, "a", lease=SQLLease(url, "t_lease", seconds=0.2))
    other, _ = _service(tmp_path, "b", lease=SQLLease(url, "t_lease", seconds=0.2))
    try:
        assert len(leader.tick()) == 4
        time.sleep(0.3)  # the leader "hangs" past its lease
        assert not other.keeper.step()  # first look at the row
        time.sleep(0.3)
        assert other.keeper.step()  # unchanged for a lease: taken over
        assert leader.tick() == []  # its renewal is refused: it steps down, evaluates nothing
        read = leader.registry.get_sample_value
        assert read("fairmonitor_leader") == 0
        assert read("fairmonitor_lease_fenced_writes_total") == 1
        assert read("fairmonitor_demographic_parity_difference",
                    {"model": "credit", "sensitive_attribute": "sex", "version": "1"}) is None
        # its liveness stays, frozen: WindowStale takes the freshest over the replicas
        assert read("fairmonitor_window_last_success_timestamp_seconds",
                    {"model": "credit"}) > 0
    finally:
        leader.shutdown()
        other.shutdown()


def test_once_refuses_to_run_while_another_monitor_leads(tmp_path, capsys):
    from fairmonitor.cli import main

    leader, _ = _service(tmp_path, "a")
    try:
        assert main(["monitor", "--config", str(tmp_path / "monitor.yaml"), "--once"]) == 1
        assert "another monitor holds the checkpoint's lease" in capsys.readouterr().err
    finally:
        leader.shutdown()


def test_stop_between_windows_leaves_the_checkpoint_at_the_last_done_window():
    from fairmonitor.monitor import job

    cfg = load_config_text()
    ck = MemoryCheckpoint()
    frame = prediction_frame(n_hours=6)
    calls = []

    def keep_going():
        calls.append(1)
        # SIGTERM arrives while the second window is evaluated: it completes, no third starts
        return len(calls) <= 3  # asked before the model, then before each window

    results = job.run_once(cfg, {"credit": MemorySource(frame)}, ck,
                           now=T0 + timedelta(hours=6, minutes=1), keep_going=keep_going)
    assert [r.end for r in results] == [T0 + timedelta(hours=h) for h in (1, 2)]
    assert ck.load("credit").predictions_end == T0 + timedelta(hours=2)
    rest = job.run_once(cfg, {"credit": MemorySource(frame)}, ck,
                        now=T0 + timedelta(hours=6, minutes=1))
    assert [r.end for r in rest] == [T0 + timedelta(hours=h) for h in range(3, 7)]


def test_stop_between_rollup_windows_keeps_the_rollup_watermark_at_the_last_done():
    from fairmonitor.monitor import job
    from fairmonitor.monitor.summary_store import MemorySummaryStore

    cfg = load_config_text("rollups: [2h]")
    ck, store = MemoryCheckpoint(), MemorySummaryStore()
    frame = prediction_frame(n_hours=8, bias_from=4)
    calls = []

    def keep_going():  # the model, 8 windows, the late-labels step, then one rollup window
        calls.append(1)
        return len(calls) <= 11

    now = T0 + timedelta(hours=8, minutes=1)
    first = job.run_once(cfg, {"credit": MemorySource(frame)}, ck, now=now, summaries=store,
                         keep_going=keep_going)
    assert [r.end for r in first if r.rollup] == [T0 + timedelta(hours=2)]
    assert ck.load("credit").rollups["2h"] == T0 + timedelta(hours=2)
    rest = job.run_once(cfg, {"credit": MemorySource(frame)}, ck, now=now, summaries=store)
    assert [r.end for r in rest if r.rollup] == [T0 + timedelta(hours=h) for h in (4, 6, 8)]
    # hours 2-4 balanced, 4-8 biased (F selected at 0.2, M at 0.8): exact rates per group
    assert [r.report.values[("demographic_parity_difference", "sex")]
            for r in rest if r.rollup] == pytest.approx([0.0, 0.6, 0.6])


def load_config_text(extra: str = ""):
    return load_config(f"""
checkpoint: unused.json
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [demographic_parity_difference]
    {extra}
""")


# ------------------------------------------------------------------ real processes
@pytest.fixture(scope="session")
def pg_mlflow_uri(postgres_url):
    """An MLflow tracking store in its own PostgreSQL database, migrated once.

    The tests that pause a process use it: a process stopped inside a write to a SQLite file
    holds that file's lock, and nobody can write it until it resumes (SQLite's locking, not the
    monitor's); a database server has no such shared file lock.
    """
    from mlflow.tracking import MlflowClient

    # the replicas write MLflow's database directly (a tracking server would hold the
    # transactions of a paused client, not the client): end a paused writer's transaction
    uri = create_database(postgres_url, _unique("mlflow")) + \
        "?options=-c%20idle_in_transaction_session_timeout%3D1000"
    MlflowClient(tracking_uri=uri).search_experiments()  # migrate before the replicas race
    return uri


@pytest.fixture
def stack(tmp_path, mlflow_tracking_uri, request):
    made: list[Stack] = []

    def make(*, tracking_uri=None, **kw):
        s = Stack(tmp_path, tracking_uri or mlflow_tracking_uri, lease=LEASE,
                  experiment=_unique(request.node.name[:20]), **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop_all()


def _leader_and_standby(st: Stack):
    a = st.spawn("a")
    wait_for(lambda: a.leader() == 1, 90)
    b = st.spawn("b")
    wait_for(lambda: b.leader() == 0, 90)
    return a, b


def _verdict_lines(replica) -> int:
    return replica.log().count("verdict=")


def test_leader_killed_the_standby_takes_over_nothing_lost_or_doubled(stack):
    st = stack(n_windows=120)
    a, b = _leader_and_standby(st)
    wait_for(lambda: st.windows_done() >= 15, 120)
    assert _verdict_lines(b) == 0  # the standby evaluated nothing while a led
    assert not any("demographic_parity" in k for k in b.metrics())  # nor exported values
    a.signal(signal.SIGKILL)
    failover = wait_for(lambda: b.leader() == 1, 60, step=0.05)
    assert failover <= FAILOVER_BOUND
    wait_for(lambda: st.windows_done() >= st.n_windows, 240)
    assert st.check_mlflow() == {"expected": 120, "logged": 120, "lost": 0, "duplicated": 0,
                                 "wrong": 0}
    assert b.stop() == 0


def test_paused_leader_is_fenced_after_sigcont(stack, postgres_url, pg_mlflow_uri):
    st = stack(n_windows=120, seed=1, checkpoint_url=postgres_url, table=_unique("ha_ck"),
               tracking_uri=pg_mlflow_uri)
    a, b = _leader_and_standby(st)
    wait_for(lambda: st.windows_done() >= 15, 120)
    a.signal(signal.SIGSTOP)  # hung: alive, holding whatever it held, not renewing
    failover = wait_for(lambda: b.leader() == 1, 60, step=0.05)
    assert failover <= FAILOVER_BOUND
    done = st.windows_done()
    wait_for(lambda: st.windows_done() >= done + 5, 120)  # the new leader makes progress
    a.signal(signal.SIGCONT)
    wait_for(lambda: a.metrics().get("fairmonitor_lease_fenced_writes_total", 0) >= 1, 60)
    assert a.leader() == 0  # stepped down to standby
    assert a.log().count("write refused") == 1  # logged once, however many were refused
    wait_for(lambda: st.windows_done() >= st.n_windows, 240)
    assert st.check_mlflow() == {"expected": 120, "logged": 120, "lost": 0, "duplicated": 0,
                                 "wrong": 0}
    assert b.leader() == 1 and a.leader() == 0
    assert a.stop() == 0 and b.stop() == 0


def test_sigterm_during_a_catch_up_exits_promptly_with_a_consistent_checkpoint(stack):
    st = stack(n_windows=150, rows=2000, seed=2)
    a = st.spawn("a")
    wait_for(lambda: st.windows_done() >= 10, 120)
    lines = _verdict_lines(a)
    assert lines >= 5  # each window logged as it completes, not after the tick
    sent = time.monotonic()
    a.signal(signal.SIGTERM)
    code = a.proc.wait(60)
    latency = time.monotonic() - sent
    assert code == 0 and latency <= SIGTERM_BOUND
    done = st.windows_done()
    assert 10 <= done < st.n_windows  # stopped mid catch-up
    report = st.check_mlflow()
    # consistent: every window the checkpoint passed is in MLflow, none beyond it
    assert report == {"expected": 150, "logged": done, "lost": 150 - done, "duplicated": 0,
                      "wrong": 0}
    b = st.spawn("b")  # a restart finishes the work
    wait_for(lambda: st.windows_done() >= st.n_windows, 240)
    assert st.check_mlflow() == {"expected": 150, "logged": 150, "lost": 0, "duplicated": 0,
                                 "wrong": 0}
    assert b.stop() == 0


def test_network_to_postgres_cut_the_leader_steps_down_and_recovers(stack, postgres_url,
                                                                    pg_mlflow_uri):
    port = int(postgres_url.rsplit(":", 1)[1].split("/")[0])
    proxy = TcpProxy(port)
    via_proxy = postgres_url.replace(f":{port}/", f":{proxy.port}/")
    try:
        st = stack(n_windows=120, seed=3, checkpoint_url=postgres_url,
                   table=_unique("ha_ck"), tracking_uri=pg_mlflow_uri)
        a = st.spawn("a", via_proxy)  # a reaches PostgreSQL through the proxy, b directly
        wait_for(lambda: a.leader() == 1, 90)
        b = st.spawn("b")
        wait_for(lambda: b.leader() == 0, 90)
        wait_for(lambda: st.windows_done() >= 15, 120)
        proxy.cut()
        cut = time.monotonic()
        wait_for(lambda: b.leader() == 1, 60, step=0.05)
        assert time.monotonic() - cut <= FAILOVER_BOUND
        wait_for(lambda: a.leader() == 0, 30)  # a steps down (its /metrics still answers)
        proxy.restore()
        wait_for(lambda: st.windows_done() >= st.n_windows, 240)
        assert a.leader() == 0 and b.leader() == 1  # a is back, as a standby
        assert "Traceback" not in a.log()
        b.signal(signal.SIGKILL)  # and a takes over again when needed
        wait_for(lambda: a.leader() == 1, 60, step=0.05)
        assert st.check_mlflow() == {"expected": 120, "logged": 120, "lost": 0,
                                     "duplicated": 0, "wrong": 0}
        assert a.stop() == 0
    finally:
        proxy.close()


def test_sqlite_checkpoint_default_lease_is_thirty_seconds(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(CONFIG.format(db=tmp_path / "ck.db", tmp=tmp_path, start=T0.isoformat())
                    .replace(", lease: 60s", ""))
    assert load_config(path).checkpoint.lease is None
    svc, _ = _service(tmp_path, "x")
    assert svc.lease.seconds == 60.0  # as configured
    svc.shutdown()
    from fairmonitor.monitor.leadership import DEFAULT_LEASE_SECONDS, open_lease

    lease = open_lease(load_config(path).checkpoint)
    assert lease.seconds == DEFAULT_LEASE_SECONDS == 30.0
    lease.close()


def test_memory_checkpoint_needs_no_lease(tmp_path):
    svc, _ = _service(tmp_path, "x")
    svc.shutdown()
    path = tmp_path / "monitor.yaml"
    config = load_config(path)
    mem = MonitorService(config, registry=CollectorRegistry(), sink=_Sink(),
                         checkpoint=MemoryCheckpoint(),
                         sources={"credit": MemorySource(prediction_frame(n_hours=2))},
                         clock=lambda: T0 + timedelta(hours=2, minutes=1))
    assert mem.is_leader and mem.registry.get_sample_value("fairmonitor_leader") == 1
    mem.shutdown()


def test_a_standby_never_flushes_a_spool_it_shares(tmp_path):
    leader, leader_sink = _service(tmp_path, "a")
    standby, standby_sink = _service(tmp_path, "b")
    flushed = []
    standby_sink.flush = lambda: flushed.append("standby") or True
    leader_sink.flush = lambda: flushed.append("leader") or True
    standby.shutdown()
    leader.shutdown()
    assert flushed == ["leader"]


def test_compose_ha_override_adds_a_standby_on_the_same_state():
    import yaml

    docker = Path(__file__).resolve().parents[2] / "docker"
    base = yaml.safe_load((docker / "compose.yaml").read_text())["services"]
    ha = yaml.safe_load((docker / "compose.ha.yaml").read_text())["services"]
    standby, monitor = ha["monitor-standby"], base["monitor"]
    assert standby["image"] == monitor["image"]
    assert standby["volumes"] == monitor["volumes"]  # same config, same checkpoint volume
    assert standby["ports"] == ["127.0.0.1:9465:9464"]
    assert ha["prometheus"]["volumes"] == ["./prometheus.ha.yml:/etc/prometheus/prometheus.yml:ro"]
    prom = yaml.safe_load((docker / "prometheus.ha.yml").read_text())
    plain = yaml.safe_load((docker / "prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "fairmonitor")
    assert job["static_configs"][0]["targets"] == ["monitor:9464", "monitor-standby:9464"]
    job["static_configs"][0]["targets"] = ["monitor:9464"]
    assert prom == plain  # otherwise the same Prometheus
