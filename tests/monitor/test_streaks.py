"""Alert streaks counted by the monitor (issue 24): the state machine, the job, the gauges.

The reported defect: persistence was wall-clock arithmetic in PromQL, so one window at DP 0.41
followed by two empty windows paged critical ("for 2 windows or more"). Here a streak counts
evaluated windows only; every expected count below is derived by hand from the sequence.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace as NS

import pandas as pd
import pytest
from prometheus_client import CollectorRegistry

from fairmonitor.monitor.checkpoint import FileCheckpoint, ModelState
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sinks.prometheus import FairnessCollector
from fairmonitor.monitor.sources import MemorySource
from fairmonitor.monitor.streaks import Streaks, advance
from fairmonitor.report.thresholds import Threshold

from .conftest import prediction_frame

DPD = "demographic_parity_difference"
T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)
THRESHOLDS = (Threshold(DPD, warning=0.1, critical=0.2),)
WARN, CRIT = (DPD, "sex", "warning"), (DPD, "sex", "critical")
TOO_FEW = f"{DPD} is undefined: sensitive attribute 'sex' has a single group 'F'."


_INDEX = iter(range(1, 1 << 30))


def _window(value=None, *, rows=100, reason="", phase="full", errors=None, lower=math.nan,
            rollup="", index=None):
    """A WindowResult-like window (the next index): ``value`` None is an empty window."""
    report = None
    if value is not None:
        iv = NS(lower=lower, upper=math.nan, chance=math.nan)
        report = NS(values={(DPD, "sex"): value}, intervals={(DPD, "sex"): iv},
                    reasons={(DPD, "sex"): reason} if reason else {})
    return NS(rollup=rollup, errors=errors or {}, phase=phase,
              n_rows=0 if value is None and not errors else rows, report=report,
              index=next(_INDEX) if index is None else index)


def _empty():
    return _window(None)


def _undef():
    return _window(math.nan, reason=TOO_FEW)


def _run(windows, thresholds=THRESHOLDS, start=None, policy=None):
    """The streaks after each window."""
    out, s = [], start or Streaks()
    for w in windows:
        s = advance(s, w, thresholds, budget=policy)
        out.append(s)
    return out


def _counts(states, key):
    return [s.breach.get(key, 0) for s in states]


def test_breach_undefined_empty_breach_pages_exactly_at_the_nth_window():
    states = _run([_window(0.41), _undef(), _empty(), _window(0.41)])
    # critical needs 2: the undefined and the empty window neither count nor reset
    assert _counts(states, CRIT) == [1, 1, 1, 2]
    assert [n >= 2 for n in _counts(states, CRIT)] == [False, False, False, True]
    assert _counts(states, WARN) == [1, 1, 1, 2]  # warning needs 3: not yet


def test_one_breach_then_empty_windows_never_pages():
    """The reported scenario: DP 0.41 once, then empty windows."""
    states = _run([_window(0.41)] + [_empty()] * 5)
    assert _counts(states, CRIT) == [1] * 6
    assert states[-1].no_traffic == 5


def test_firing_then_undefined_is_held_then_inside_resolves():
    states = _run([_window(0.3), _window(0.3), _undef(), _empty(),
                   _window(0.15), _window(0.05)])
    # 0.15 is inside critical (resets it) but beyond warning (counts on)
    assert _counts(states, CRIT) == [1, 2, 2, 2, 0, 0]
    assert _counts(states, WARN) == [1, 2, 2, 2, 3, 0]


def test_failed_and_labels_windows_hold_and_rollups_do_not_touch_streaks():
    states = _run([_window(0.3), _window(None, errors={"data": "KeyError"}),
                   _window(None, errors={"source": "down"}), _window(None, phase="labels"),
                   _window(0.01, rollup="1d")])
    assert _counts(states, CRIT) == [1, 1, 1, 1, 1]
    # no traffic counts only empty windows of the predictions: none of those
    assert [s.no_traffic for s in states] == [0, 0, 0, 0, 0]


def test_undefined_windows_count_alerting_reasons_only():
    pending = _window(math.nan, reason="labels not available")
    states = _run([_undef(), pending, _empty(), _undef(), _window(0.05), _undef()])
    assert [s.undefined.get((DPD, "sex"), 0) for s in states] == [1, 1, 1, 2, 0, 1]


def test_no_traffic_counts_empty_windows_and_rows_reset_it():
    states = _run([_empty(), _empty(), _window(0.05), _empty()])
    assert [s.no_traffic for s in states] == [1, 2, 0, 1]


def test_compare_bound_counts_the_unfair_side_bound():
    bound = (Threshold(DPD, warning=0.1, critical=0.2, compare="bound"),)
    # the point value breaches every time; the lower bound only in the 2nd and 3rd window;
    # a NaN bound (no interval) is no evidence either way: the streak holds
    states = _run([_window(0.3, lower=0.05), _window(0.3, lower=0.25),
                   _window(0.3, lower=math.nan), _window(0.3, lower=0.25)], bound)
    assert _counts(states, CRIT) == [0, 1, 1, 2]


def test_override_governs_its_attribute_and_intersections_need_a_threshold():
    thresholds = (Threshold(DPD, warning=0.1), Threshold(DPD, warning=0.5, attribute="sex"))
    inter = NS(values={(DPD, "sex"): 0.3, (DPD, "race"): 0.3, (DPD, "sex:race"): 0.9},
               intervals={}, reasons={})
    s = advance(Streaks(), NS(rollup="", errors={}, phase="full", n_rows=10, report=inter,
                              index=7), thresholds)
    assert s.breach == {(DPD, "race", "warning"): 1}


def test_json_round_trip_keeps_attribute_names_with_colons():
    from fairmonitor.report.evidence import Evidence

    s = Streaks({(DPD, "sex:race", "critical"): 3, WARN: 1}, {(DPD, "age"): 2}, 4,
                {(DPD, "sex:race", "warning"): Evidence(3.5, 2)}, {DPD: 12})
    assert Streaks.from_json(s.to_json()) == s
    assert Streaks.from_json(None) == Streaks()


# ------------------------------------------------------------------ the job and checkpoint
def _config(tmp_path, windows=""):
    return load_config(f"""
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: [{DPD}]
    thresholds:
      {DPD}: {{warning: 0.1, critical: 0.3}}
{windows}""", base_dir=tmp_path)


def _hours(frame, keep):
    hours = ((frame["timestamp"] - T0) // H).astype(int)
    return frame[hours.isin(keep)].reset_index(drop=True)


def test_job_counts_only_evaluated_windows(tmp_path):
    # bias (DP 0.6) in hour 3, hours 4 and 5 empty, bias again in hour 6
    frame = _hours(prediction_frame(n_hours=7, bias_from=3, label=False), [0, 1, 2, 3, 6])
    store = FileCheckpoint(tmp_path / "cp.json")
    results = run_once(_config(tmp_path), {"credit": MemorySource(frame)}, store,
                       now=T0 + 7 * H)
    crit = [r.streaks.breach.get((DPD, "sex", "critical"), 0) for r in results]
    assert [r.n_rows for r in results] == [200, 200, 200, 200, 0, 0, 200]
    assert crit == [0, 0, 0, 1, 1, 1, 2]
    assert [r.streaks.no_traffic for r in results] == [0, 0, 0, 0, 1, 2, 0]
    saved = Streaks.from_json(store.load("credit").streaks)
    assert saved == results[-1].streaks


def test_restart_mid_breach_keeps_the_streak(tmp_path):
    frame = prediction_frame(n_hours=6, bias_from=3, label=False)
    cfg = _config(tmp_path, "    alert_windows: {warning: 3, critical: 3}\n")
    first = run_once(cfg, {"credit": MemorySource(frame)}, FileCheckpoint(tmp_path / "cp.json"),
                     now=T0 + 5 * H)  # hours 3 and 4 breach: a streak of 2, not firing yet
    assert first[-1].streaks.breach[(DPD, "sex", "critical")] == 2
    # a new process on the same checkpoint file: the third breaching window fires
    second = run_once(cfg, {"credit": MemorySource(frame)},
                      FileCheckpoint(tmp_path / "cp.json"), now=T0 + 6 * H)
    assert [r.streaks.breach[(DPD, "sex", "critical")] for r in second] == [3]


def test_a_failed_checkpoint_write_does_not_move_the_streak(tmp_path):
    class Failing(FileCheckpoint):
        def save(self, model, state):
            if state.streaks:
                raise OSError("disk full")
            super().save(model, state)

    frame = prediction_frame(n_hours=2, bias_from=0, label=False)
    store = Failing(tmp_path / "cp.json")
    results = run_once(_config(tmp_path), {"credit": MemorySource(frame)}, store, now=T0 + 2 * H)
    assert results[0].streaks is None and "checkpoint" in results[0].errors
    assert store.load("credit").streaks == {}


# ------------------------------------------------------------------ the exported gauges
def _sample(registry, name, **labels):
    return registry.get_sample_value(f"fairmonitor_{name}", labels)


def test_collector_exports_streaks_and_required_windows(tmp_path):
    cfg = _config(tmp_path, "    alert_windows: {warning: 4, critical: 2, undefined: 3}\n")
    frame = _hours(prediction_frame(n_hours=6, bias_from=3, label=False), [0, 1, 2, 3, 5])
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models)
    run_once(cfg, {"credit": MemorySource(frame)}, FileCheckpoint(tmp_path / "cp.json"),
             now=T0 + 6 * H, on_result=collector.observe)
    ids = dict(model="credit", metric=DPD, sensitive_attribute="sex", bound="upper")
    # hour 3 breaches, hour 4 is empty, hour 5 breaches: 2 windows of each severity
    assert _sample(registry, "breach_windows", **ids, severity="critical") == 2.0
    assert _sample(registry, "breach_windows", **ids, severity="warning") == 2.0
    assert _sample(registry, "breach_windows_required", **ids, severity="critical") == 2.0
    assert _sample(registry, "breach_windows_required", **ids, severity="warning") == 4.0
    assert _sample(registry, "undefined_windows", model="credit", metric=DPD,
                   sensitive_attribute="sex") == 0.0
    assert _sample(registry, "no_traffic_windows", model="credit") == 0.0
    assert _sample(registry, "undefined_windows_required", model="credit") == 3.0


def test_service_restores_the_streak_gauges_at_start(tmp_path):
    from fairmonitor.monitor.service import MonitorService

    cfg = _config(tmp_path)
    store = FileCheckpoint(tmp_path / "cp.json")
    streaks = Streaks({(DPD, "sex", "critical"): 5}, {}, 1)
    store.save("credit", ModelState(T0, T0, streaks=streaks.to_json()))
    registry = CollectorRegistry()
    MonitorService(cfg, registry=registry, sources={"credit": MemorySource(pd.DataFrame())},
                   checkpoint=store, sink=NS(), tick_seconds=60)
    ids = dict(model="credit", metric=DPD, sensitive_attribute="sex", bound="upper")
    assert _sample(registry, "breach_windows", **ids, severity="critical") == 5.0
    assert _sample(registry, "no_traffic_windows", model="credit") == 1.0


@pytest.mark.parametrize("raw", ["3", "{warning: 0}", "{windows: 2}"])
def test_alert_windows_are_validated(tmp_path, raw):
    from fairmonitor.exceptions import ConfigError

    with pytest.raises(ConfigError, match=r"models\.credit\.alert_windows"):
        _config(tmp_path, f"    alert_windows: {raw}\n")


# ------------------------------------------------------------------ compare: budget
def _budget_policy(page_level, stride=1):
    from fairmonitor.monitor.streaks import Budget as Policy
    from fairmonitor.report.evidence import Budget

    # Ville's calibration: the hand computations below are of log(1 + R) alone (the
    # overshoot credit has its own tests in tests/report/test_evidence.py)
    return Policy(Budget(calibration="ville"), page_level, 0.95, stride)


def _softplus(y):
    return y + math.log1p(math.exp(-y))


def test_budget_series_breach_on_their_evidence_by_hand():
    """DP warning 0.1: g0 = 0.05, g1 = 0.15; intervals +-0.0588 at 95% give s = 0.0300."""
    from statistics import NormalDist

    budget = (Threshold(DPD, warning=0.1, compare="budget"),)
    h = math.log1p(10 * 24 * 90)  # 10 series, hourly windows, 1 false page per 90 days
    s = 0.0588 / NormalDist().inv_cdf(0.975)
    a = (0.15 - 0.05) / s**2
    fold = math.log(NormalDist().cdf(0.15 / s) + math.exp(-2 * a * 0.05)
                    * NormalDist().cdf(0.05 / s))
    first = _softplus(a * (0.15 - 0.10) - fold)            # 5.56 < h = 9.98
    second = _softplus(first + a * (0.15 - 0.10) - fold)   # 11.11 >= h: breaches

    def w(value, lower=None):
        lower = value - 0.0588 if lower is None else lower
        win = _window(value, lower=lower)
        win.report.intervals[(DPD, "sex")] = NS(lower=lower, upper=value + 0.0588,
                                                chance=math.nan)
        return win

    states = _run([w(0.15), w(0.15, lower=math.nan), w(0.15), w(0.0)], budget,
                  policy=_budget_policy(h))
    stats = [s.evidence.get((DPD, "sex", "warning")) for s in states]
    assert stats[0].statistic == pytest.approx(first, abs=1e-9)
    assert stats[1] == stats[0]  # no interval: the evidence and the streak hold
    assert stats[2].statistic == pytest.approx(second, abs=1e-9)
    assert first < h <= second
    # one breaching window fires a budget series (required 1); the fair window clears it
    # and restarts the evidence (the page cleared)
    assert [s.breach.get((DPD, "sex", "warning"), 0) for s in states] == [0, 0, 1, 0]
    assert stats[3].statistic == 0.0 and stats[3].windows == 0


def test_budget_evidence_skips_overlapping_sliding_windows():
    budget = (Threshold(DPD, warning=0.1, compare="budget"),)
    windows = [_window(0.15, lower=0.15 - 0.0588, index=i) for i in (10, 11, 12)]
    for win in windows:
        win.report.intervals[(DPD, "sex")] = NS(lower=0.15 - 0.0588, upper=0.15 + 0.0588,
                                                chance=math.nan)
    states = _run(windows, budget, policy=_budget_policy(9.98, stride=2))
    assert [s.evidence[(DPD, "sex", "warning")].windows for s in states] == [1, 1, 2]


def test_a_window_relabelled_later_is_counted_once():
    first = _window(0.3, index=5)
    again = _window(0.3, index=5, phase="labels")  # late labels: the same window again
    states = _run([first, again, _window(0.3, index=6)])
    assert _counts(states, CRIT) == [1, 1, 2]
    # a window whose labels had not arrived at all counts when they do
    pending = _window(math.nan, reason="labels not available", index=7)
    labelled = _window(0.3, index=7, phase="labels")
    assert _counts(_run([pending, labelled], start=states[-1]), CRIT) == [2, 3]


def test_budget_mode_in_the_job_and_the_gauges(tmp_path):
    cfg = load_config(f"""
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: [{DPD}]
    thresholds:
      {DPD}: {{warning: 0.1, critical: 0.3, compare: budget}}
""", base_dir=tmp_path)
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models)
    frame = prediction_frame(n_hours=5, bias_from=3, label=False)
    results = run_once(cfg, {"credit": MemorySource(frame)}, FileCheckpoint(tmp_path / "c.json"),
                       now=T0 + 5 * H, on_result=collector.observe)
    # a gap of 0.6 with 100 rows a group (s ~ 0.057) is ~9 standard errors past g1 for both
    # levels: both severities breach on the first biased window, and one window fires
    assert [r.streaks.breach.get(CRIT, 0) for r in results] == [0, 0, 0, 1, 2]
    ids = dict(model="credit", metric=DPD, sensitive_attribute="sex", bound="upper")
    h = math.log1p(2 * 24 * 90)  # 2 budget series (warning, critical), hourly windows
    assert _sample(registry, "breach_evidence_page_level", model="credit") == pytest.approx(h)
    assert _sample(registry, "breach_windows_required", **ids, severity="critical") == 1.0
    assert _sample(registry, "breach_evidence", **ids, severity="critical") >= h
    saved = Streaks.from_json(FileCheckpoint(tmp_path / "c.json").load("credit").streaks)
    assert saved.evidence[CRIT].statistic == pytest.approx(
        results[-1].streaks.evidence[CRIT].statistic)


def test_budget_evidence_discounts_the_pairs_of_more_groups():
    """Three groups: the value is the largest of 3 pair gaps, so the window's log e-value
    loses log 3 (report.evidence.comparisons); without group counts, two groups are assumed."""
    from fairmonitor.report.evidence import Budget, increment

    budget = (Threshold(DPD, warning=0.1, compare="budget"),)
    step = increment(value=0.15, lower=0.15 - 0.0588, upper=0.15 + 0.0588, level=0.1,
                     bound="upper", budget=Budget())
    for groups, expected in ((None, step), (["a", "b", "c"], step - math.log(3))):
        win = _window(0.15, lower=0.15 - 0.0588)
        win.report.intervals[(DPD, "sex")] = NS(lower=0.15 - 0.0588, upper=0.15 + 0.0588,
                                                chance=math.nan)
        if groups is not None:
            win.report.group_counts = {"sex": dict.fromkeys(groups, 500)}
        (state,) = _run([win], budget, policy=_budget_policy(9.98))
        assert state.evidence[(DPD, "sex", "warning")].statistic == pytest.approx(
            _softplus(expected), abs=1e-12)
