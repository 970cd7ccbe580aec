"""The demo scenario: the five steps of :mod:`fairmonitor.demo`, printed as they run.

Choices:

- Everything lives under one working directory (default ``./demo``): ``mlflow.db`` (kept across
  runs, so the registry and the run history grow; a re-run registers a new version and moves the
  ``champion`` alias), ``artifacts/``, and files rewritten by every run: ``predictions.db``,
  ``checkpoint.json``, ``monitor.yaml``, ``dashboards/``. Nothing is written anywhere else.
- The monitor alerts on equal opportunity and equalized odds for ``sex``: on Adult the champion's
  true-positive rates of women and men are close (a gap of about 0.05-0.1), while its selection
  rates are not (a demographic parity gap near 0.17, mostly the data's different base rates).
  Thresholds: warning 0.2, critical 0.3, above the hourly noise of a 5,000-row window (standard
  error about 0.04, largest value over the unbiased hours 0.14) and below the injected fault
  (about 0.33, lowest biased hour 0.25). ``race`` is monitored
  without alerts: its smaller groups have too few positives per hour for a stable rate gap.
- Global MLflow state (tracking and registry URI) is set for the scenario and restored after,
  so the demo can run inside a larger process (the tests).
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from ._env import mlflow_store, quiet_logs
from ._model import (
    LABEL,
    SENSITIVE,
    Champion,
    ensure_experiment,
    evaluation_table,
    group_counts,
    prepare_data,
    register_and_evaluate,
    train,
)
from ._replay import (
    WindowState,
    excerpt,
    free_port_or,
    header_line,
    replay,
    transition_line,
    utc_hour,
)
from ._stream import Bias, monitor_yaml, production_stream, sqlite_url, stream_summary

__all__ = ["DemoOptions", "DemoResult", "Scenario", "run_demo"]

MODEL = "adult-income"            # registered model name = monitor name
ALIAS = "champion"
EXPERIMENT = "fairmonitor-demo"   # the training + evaluation runs
MONITOR_EXPERIMENT = f"fairmonitor-{MODEL}"
HOST = "127.0.0.1"
WINDOW = timedelta(hours=1)
MIN_GROUP_SIZE = 100
LIMITS = {"warning": 0.2, "critical": 0.3}
#: thresholds of the offline evaluation (every attribute)
EVAL_THRESHOLDS = {"equal_opportunity_difference": LIMITS, "equalized_odds_difference": LIMITS,
                   "robustness_delta_max": {"warning": 0.05, "critical": 0.1}}
#: what the monitor computes per window, and its alert thresholds (sex only, see above)
MONITOR_METRICS = ("equal_opportunity_difference", "equalized_odds_difference",
                   "demographic_parity_difference", "abcc")
MONITOR_THRESHOLDS = {m: [{"attribute": "sex", **LIMITS}] for m in MONITOR_METRICS[:2]}
SHOWN = tuple((m, "sex") for m in MONITOR_METRICS)
#: the injected fault: women's scores are cut by 40% (their selection rate drops from about 8%
#: to 3%, their true positive rate from about 0.56 to 0.26: equal opportunity ~0.33)
BIAS_FACTOR = 0.6


@dataclass(frozen=True)
class Scenario:
    """Sizes of one run of the demo."""

    train_rows: int | None       # None: every training row
    eval_rows: int
    robustness: dict[str, Any]   # the evaluator's robustness settings
    n_windows: int
    bias_from: int               # 0-based window where the fault starts
    rows_per_window: int
    tick_seconds: float


FULL = Scenario(None, 5000, {}, 24, 12, 5000, 0.5)
FAST = Scenario(6000, 1500, {"levels": [0.5], "n_repeats": 2}, 6, 3, 5000, 0.1)


@dataclass(frozen=True)
class DemoOptions:
    """What ``fairmonitor demo`` takes from the command line."""

    workdir: Path = Path("demo")
    port: int = 9464
    fast: bool = False
    serve: bool = False
    seed: int = 0
    tick_seconds: float | None = None

    @property
    def scenario(self) -> Scenario:
        """The sizes for this mode."""
        return FAST if self.fast else FULL


@dataclass(frozen=True)
class DemoResult:
    """What the demo did, for tests and callers."""

    workdir: Path
    tracking_uri: str
    champion: Champion
    bias: Bias
    states: list[WindowState]         # one per replayed window, from /metrics
    steps: list[int]                  # MLflow step of each window (WindowSpan.index)
    monitoring_run_id: str | None
    metrics_url: str
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def transition_ok(self) -> bool:
        """Alert state ok before the biased window, warning or critical from it on."""
        k = self.bias.from_window
        return (all(s.alert == 0 for s in self.states[:k])
                and all(s.alert >= 1 for s in self.states[k:]))


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory when inside it (what the user types)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def _reset(workdir: Path) -> None:
    """Remove the files every run rewrites (never anything else in the directory)."""
    for name in ("predictions.db", "predictions.db-journal", "checkpoint.json",
                 "checkpoint.json.1"):  # and its previous generation
        (workdir / name).unlink(missing_ok=True)


def _step(out: TextIO, n: int, title: str) -> float:
    print(f"\n[{n}/5] {title}", file=out, flush=True)
    return time.perf_counter()


def _elapsed(seconds: float) -> str:
    """``83.2`` -> ``'1m 23s'``; ``4.23`` -> ``'4.2 s'``.

    >>> _elapsed(83.2), _elapsed(4.23)
    ('1m 23s', '4.2 s')
    """
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)}m {int(round(seconds % 60)):02d}s"


def run_demo(options: DemoOptions, out: TextIO | None = None) -> DemoResult:
    """Run the whole scenario, printing to ``out`` (default stdout); return what it did."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    out = out or sys.stdout
    started = time.perf_counter()
    workdir = options.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    _reset(workdir)
    uri = sqlite_url(workdir / "mlflow.db")
    mode = "fast" if options.fast else "full"
    print(f"fairmonitor demo ({mode} mode): the whole loop on bundled data, all local, in "
          f"{_shown_path(workdir)}/", file=out, flush=True)
    import mlflow  # noqa: F401  (first: importing it resets the levels _quiet_logs sets)

    with quiet_logs(), mlflow_store(uri):
        result = _run(options, workdir, uri, out)
    done = "stopped serving /metrics; demo" if options.serve else "demo"
    print(f"\n{done} finished in {_elapsed(time.perf_counter() - started)}", file=out,
          flush=True)
    return result


def _run(options: DemoOptions, workdir: Path, uri: str, out: TextIO) -> DemoResult:
    from mlflow.tracking import MlflowClient

    sc = options.scenario
    t = _step(out, 1, "Train a model on UCI Adult and register it in MLflow")
    data = prepare_data(seed=options.seed, train_rows=sc.train_rows)
    model = train(data)
    print(f"  logistic regression on {len(data.train):,} rows ({len(data.held_out):,} held "
          f"out); sex and race are not model inputs", file=out)
    client = MlflowClient(uri)
    experiment_id = ensure_experiment(client, EXPERIMENT, workdir / "artifacts" / "demo")
    ensure_experiment(client, MONITOR_EXPERIMENT, workdir / "artifacts" / "monitoring")
    evaluator_config = {"sensitive_features": list(SENSITIVE), "min_group_size": MIN_GROUP_SIZE,
                        "intersection": False, "thresholds": EVAL_THRESHOLDS,
                        "robustness": sc.robustness, "rng": options.seed}
    champion = register_and_evaluate(model, data, client=client, experiment_id=experiment_id,
                                     name=MODEL, alias=ALIAS, evaluator_config=evaluator_config,
                                     eval_rows=sc.eval_rows, seed=options.seed)
    print(f"  registered {MODEL} version {champion.version} (alias {ALIAS}) in "
          f"sqlite:///{_shown_path(workdir / 'mlflow.db')}, run {champion.run_id}  "
          f"[{_elapsed(time.perf_counter() - t)}]", file=out)

    _step(out, 2, 'Fairness evaluation: mlflow.models.evaluate(..., evaluators=["fairness"])')
    _print_evaluation(champion, data, out)

    t = _step(out, 3, "Replay a production stream into a SQLite prediction log")
    bias = Bias("sex", "Female", BIAS_FACTOR, sc.bias_from)
    start = utc_hour() - sc.n_windows * WINDOW
    stream = _write_stream(data, champion, bias, start, sc, workdir, options.seed)
    s = stream_summary(stream, bias)
    end = start + sc.n_windows * WINDOW
    print(f"  {sc.n_windows} hourly windows of {sc.rows_per_window:,} predictions, "
          f"{start:%Y-%m-%d %H:%M} -> {end:%Y-%m-%d %H:%M} UTC, scored by "
          f"models:/{MODEL}@{ALIAS}", file=out)
    print(f"  written with PredictionLogger to {_shown_path(workdir / 'predictions.db')} "
          "(labels arrive with the predictions in this replay)", file=out)
    print(f"  INJECTED BIAS: {bias.describe(start, WINDOW)}: a simulated upstream fault that "
          "hits women only.", file=out)
    print(f"  effect on women: selection rate {s['selection_before']:.1%} -> "
          f"{s['selection_after']:.1%}; of women who do earn >50K the model selects "
          f"{s['tpr_before']:.0%} -> {s['tpr_after']:.0%}  "
          f"[{_elapsed(time.perf_counter() - t)}]", file=out, flush=True)

    return _monitor(options, workdir, uri, champion, bias, start, out)


def _print_evaluation(champion: Champion, data: Any, out: TextIO) -> None:
    from .. import METRICS
    from ..report.thresholds import Threshold

    thresholds = [Threshold(m, lim["warning"], lim["critical"], METRICS[m].default_bound)
                  for m, lim in EVAL_THRESHOLDS.items()]
    print(f"  {champion.n_rows:,} held-out rows; groups under {MIN_GROUP_SIZE} rows are left "
          "out of every metric", file=out)
    for attr in SENSITIVE:
        counts = group_counts(champion.metrics, attr)
        shown = ", ".join(f"{g} {n:,}" + (" (left out)" if n < MIN_GROUP_SIZE else "")
                          for g, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        print(f"  {attr}: {shown}", file=out)
    computed = {k.split("/")[1] for k in champion.metrics if k.count("/") == 2}
    for title, names in (
            ("fairness of the predictions", [m for m in METRICS
                                             if m in computed and not METRICS[m].needs_model]),
            ("robustness: the gaps under noise on the model's inputs",
             [m for m in METRICS if m in computed and METRICS[m].needs_model])):
        if names:
            print(f"\n  {title}", file=out)
            for line in evaluation_table(champion.metrics, thresholds, SENSITIVE, names):
                print(line, file=out)
    status = champion.tags.get("fairness.status", "?")
    print(f"\n  verdict: {status} (run tag fairness.status; breaches: "
          f"{champion.tags.get('fairness.breaches', '?')})", file=out)
    held = data.held_out
    rates = held.groupby("sex")[LABEL].mean()
    dpd = champion.metrics.get("fairness/demographic_parity_difference/sex", math.nan)
    print(f"  note: the selection-rate gap on sex (demographic parity {dpd:.2f}) mostly mirrors "
          f"the data: {rates.get('Female', math.nan):.0%} of women and "
          f"{rates.get('Male', math.nan):.0%} of men earn >50K. The monitor alerts on equal "
          "opportunity / equalized odds instead: of the people who do earn >50K, does the "
          "model find women as often as men?", file=out, flush=True)


def _write_stream(data: Any, champion: Champion, bias: Bias, start: Any, sc: Scenario,
                  workdir: Path, seed: int) -> Any:
    import mlflow

    from ..monitor.sources.logger import PredictionLogger

    model = mlflow.sklearn.load_model(f"models:/{MODEL}@{ALIAS}")
    pool = data.held_out[list(SENSITIVE)].copy()
    pool["score"] = model.predict_proba(data.held_out[list(data.inputs)])[:, 1]
    pool["label"] = data.held_out[LABEL].to_numpy()
    stream = production_stream(pool, start=start, window=WINDOW, n_windows=sc.n_windows,
                               rows_per_window=sc.rows_per_window, bias=bias, seed=seed)
    with PredictionLogger(sqlite_url(workdir / "predictions.db"), model=MODEL,
                          version=champion.version, sensitive_features=list(SENSITIVE)) as log:
        log.log_frame(stream[[*SENSITIVE, "score", "prediction", "label", "timestamp"]])
    return stream


def _generate_alerting(config: Any, out_dir: Path) -> tuple[dict[str, Path], str | None]:
    """Write the rules and the dashboard for the demo config; (paths, why the dashboard is not)."""
    from ..alerting.provisioning import write_dashboards, write_rules
    from ..alerting.rules import AlertOptions

    files: dict[str, Path] = {}
    # the Grafana of the docker stack (docker/compose.yaml), as `fairmonitor demo` prints
    options = AlertOptions(grafana_url="http://localhost:3000")
    rules, grafana_rules = write_rules(config, out_dir, options, source="monitor.yaml")
    files.update(rules=rules, grafana_rules=grafana_rules)
    try:
        files["dashboard"] = write_dashboards(out_dir)[0]
    except ModuleNotFoundError as err:
        if err.name is None or not err.name.startswith("grafana_foundation_sdk"):
            raise
        return files, ("not generated (needs grafana-foundation-sdk: pip install "
                       "'fairmonitor[dashboards]'); the committed one is "
                       "dashboards/fairmonitor.json")
    return files, None


def _monitor(options: DemoOptions, workdir: Path, uri: str, champion: Champion, bias: Bias,
             start: Any, out: TextIO) -> DemoResult:
    from ..monitor.config import load_config
    from ..monitor.windows import window_index

    sc = options.scenario
    tick = options.tick_seconds or sc.tick_seconds
    t = _step(out, 4, f"Run the monitor service over the stream (one simulated hour every "
                      f"{tick:g} s)")
    port, fell_back = free_port_or(HOST, options.port)
    if fell_back:
        print(f"  port {options.port} is taken on {HOST}; serving on a free port instead",
              file=out)
    config_path = workdir / "monitor.yaml"
    config_path.write_text(monitor_yaml(
        model=MODEL, registered=MODEL, alias=ALIAS, tracking_uri=uri,
        experiment=MONITOR_EXPERIMENT, predictions_url=sqlite_url(workdir / "predictions.db"),
        listen_address=f"{HOST}:{options.port or 9464}", checkpoint="checkpoint.json",
        sensitive=SENSITIVE, start=start, window=WINDOW, metrics=MONITOR_METRICS,
        thresholds=MONITOR_THRESHOLDS, min_group_size=MIN_GROUP_SIZE,
        catch_up=max(100, sc.n_windows)), encoding="utf-8")
    config = load_config(config_path)
    files, no_dashboard = _generate_alerting(config, workdir / "dashboards")
    files["config"] = config_path
    limits = f"warning > {LIMITS['warning']:g}, critical > {LIMITS['critical']:g}"
    print(f"  config {_shown_path(config_path)}: metrics {', '.join(MONITOR_METRICS)} per "
          f"window on sex and race; alerts on {' and '.join(MONITOR_THRESHOLDS)} for sex "
          f"({limits})", file=out)
    mark = {bias.from_window + 1: f"  <- bias starts ({bias.column}={bias.group} scores "
                                  f"x{bias.factor:g})"}
    summary: dict[str, Any] = {}

    def on_done(states: list[WindowState], url: str, text: str) -> None:
        print(transition_line(states, bias.from_window), file=out, flush=True)
        print(f"  scrape of {url} after the last window (excerpt):", file=out)
        for line in excerpt(text, MODEL, "sex"):
            print(f"    {line}", file=out)
        summary["run_id"] = _monitoring_run(uri, champion.version)
        print(f"  MLflow: run {summary['run_id']} of experiment {MONITOR_EXPERIMENT} holds "
              "fairness/<metric>/<attribute>, one step per window  "
              f"[{_elapsed(time.perf_counter() - t)}]", file=out, flush=True)
        if options.serve:  # the service keeps running: say where to look now
            _where_to_look(workdir, url, files, no_dashboard, True, out)

    print(header_line(sc.n_windows, SHOWN), file=out, flush=True)
    states, url, _ = replay(config, model=MODEL, start=start, window=WINDOW,
                            n_windows=sc.n_windows, tick_seconds=tick,
                            listen_address=f"{HOST}:{port}", shown=SHOWN, out=out, mark=mark,
                            serve=options.serve, on_done=on_done)
    if not options.serve:
        _where_to_look(workdir, url, files, no_dashboard, False, out)
    return DemoResult(workdir, uri, champion, bias, states,
                      [window_index(WINDOW, s.end) for s in states], summary["run_id"], url,
                      files)


def _monitoring_run(uri: str, version: str) -> str | None:
    from mlflow.tracking import MlflowClient

    from ..monitor.sinks.mlflow import MONITORING_TAG

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(MONITOR_EXPERIMENT)
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id],
                              filter_string=f"tags.`{MONITORING_TAG}` = 'true'")
    for run in runs:
        tags = run.data.tags
        if (tags.get("fairmonitor.model") == MODEL and tags.get("fairmonitor.version") == version
                and tags.get("fairmonitor.evaluation", "window") == "window"):
            return str(run.info.run_id)
    return None


def _where_to_look(workdir: Path, url: str, files: dict[str, Path],
                   no_dashboard: str | None, serving: bool, out: TextIO) -> None:
    db = _shown_path(workdir / "mlflow.db")
    print("\n[5/5] Where to look", file=out)
    print(f"  MLflow UI:  mlflow ui --backend-store-uri sqlite:///{db}\n"
          f"              then http://127.0.0.1:5000: experiment {EXPERIMENT} (training + "
          f"evaluation, artifacts under fairness/), {MONITOR_EXPERIMENT} (one step per "
          f"window); model {MODEL}@{ALIAS}", file=out)
    state = ("served until Ctrl-C" if serving else
             "no longer served: the demo has exited; `fairmonitor demo --serve` keeps it up")
    print(f"  /metrics:   {url}  ({state})", file=out)
    rules = ", ".join(_shown_path(files[k]) for k in ("rules", "grafana_rules") if k in files)
    print(f"  rules:      {rules}", file=out)
    dashboard = (_shown_path(files["dashboard"]) if "dashboard" in files else no_dashboard)
    print(f"  dashboard:  {dashboard}", file=out)
    print(f"  monitor:    fairmonitor monitor --config {_shown_path(files['config'])} --check  "
          f"(predictions in {_shown_path(workdir / 'predictions.db')})", file=out)
    print("  full stack: docker compose -f docker/compose.yaml up --build  (MLflow, monitor, "
          "Prometheus, Grafana on http://localhost:3000; from the repository root)",
          file=out, flush=True)
