"""``fairmonitor demo`` end to end, in fast mode, in a temporary working directory.

One run of the scenario (module fixture): train, register, evaluate through MLflow, replay six
hourly windows with the bias from window 4 on, run the real monitor service and scrape it. The
alert state must be ok before the biased window and warning or critical from it on, both in the
scraped gauges and in the service's window results; MLflow must hold the evaluation and the
monitoring history. A second run through the CLI, in the same directory, checks that re-running
is safe.
"""

from __future__ import annotations

import io
import socket
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from fairmonitor.cli import build_parser, main
from fairmonitor.commands.demo import options_from_args
from fairmonitor.demo._replay import free_port_or
from fairmonitor.demo.scenario import DemoOptions, run_demo
from fairmonitor.monitor.config import load_config

EOPP = "equal_opportunity_difference"
BIAS_FROM = 3  # fast mode: windows 1-3 clean, 4-6 biased


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo")


@pytest.fixture(scope="module")
def demo(workdir: Path) -> tuple[Any, str]:
    out = io.StringIO()
    result = run_demo(DemoOptions(workdir=workdir, port=0, fast=True), out=out)
    return result, out.getvalue()


def test_the_bias_starts_at_the_expected_window(demo: tuple[Any, str]) -> None:
    result, _ = demo
    assert (len(result.states), result.bias.from_window) == (6, BIAS_FROM)


def test_scraped_alert_state_is_ok_before_the_bias_and_alerting_from_it_on(
        demo: tuple[Any, str]) -> None:
    result, _ = demo
    alerting = [s.alerts[(EOPP, "sex")] >= 1 for s in result.states]
    assert alerting == [False] * BIAS_FROM + [True] * (6 - BIAS_FROM)


def test_service_results_flip_at_the_biased_window(demo: tuple[Any, str]) -> None:
    result, _ = demo
    statuses = [s.results[0].report.statuses[(EOPP, "sex")] for s in result.states]
    assert [v != "ok" for v in statuses] == [False] * BIAS_FROM + [True] * (6 - BIAS_FROM)


def test_transition_is_reported_as_ok(demo: tuple[Any, str]) -> None:
    result, out = demo
    assert result.transition_ok
    assert "exactly where the bias was injected" in out


def test_scraped_gauges_equal_the_service_results(demo: tuple[Any, str]) -> None:
    result, _ = demo
    scraped = [s.values[(EOPP, "sex")] for s in result.states]
    computed = [s.results[0].report.values[(EOPP, "sex")] for s in result.states]
    assert scraped == computed


def test_each_tick_evaluated_exactly_its_own_window(demo: tuple[Any, str]) -> None:
    result, _ = demo
    windows = [(r.start, r.end) for s in result.states for r in s.results]
    assert windows == [(s.start, s.end) for s in result.states]


def test_mlflow_run_holds_the_fairness_evaluation(demo: tuple[Any, str]) -> None:
    result, _ = demo
    run = MlflowClient(result.tracking_uri).get_run(result.champion.run_id)
    keys = {f"fairness/{m}/{a}" for m in (EOPP, "demographic_parity_difference",
                                          "robustness_delta_max") for a in ("sex", "race")}
    assert keys <= set(run.data.metrics)


def test_mlflow_evaluation_values_are_the_evaluators(demo: tuple[Any, str]) -> None:
    result, _ = demo
    run = MlflowClient(result.tracking_uri).get_run(result.champion.run_id)
    key = f"fairness/{EOPP}/sex"
    assert run.data.metrics[key] == result.champion.metrics[key]


def test_evaluation_tags_say_ok(demo: tuple[Any, str]) -> None:
    result, _ = demo
    run = MlflowClient(result.tracking_uri).get_run(result.champion.run_id)
    assert run.data.tags["fairness.status"] == "ok"


def test_champion_alias_points_at_the_registered_version(demo: tuple[Any, str]) -> None:
    result, _ = demo
    mv = MlflowClient(result.tracking_uri).get_model_version_by_alias("adult-income",
                                                                       "champion")
    assert str(mv.version) == result.champion.version


def test_monitoring_run_holds_one_point_per_window_at_its_step(demo: tuple[Any, str]) -> None:
    result, _ = demo
    history = MlflowClient(result.tracking_uri).get_metric_history(result.monitoring_run_id,
                                                                   f"fairness/{EOPP}/sex")
    expected = list(zip(result.steps, [s.values[(EOPP, "sex")] for s in result.states],
                        strict=True))
    assert sorted((m.step, m.value) for m in history) == expected


def test_steps_are_consecutive_window_indexes(demo: tuple[Any, str]) -> None:
    result, _ = demo
    first = result.steps[0]
    assert result.steps == list(range(first, first + 6))


def test_everything_is_written_under_the_workdir(demo: tuple[Any, str], workdir: Path) -> None:
    result, _ = demo
    names = {p.name for p in workdir.iterdir()}
    assert {"mlflow.db", "predictions.db", "monitor.yaml", "checkpoint.json", "artifacts",
            "dashboards"} <= names


def test_generated_config_is_a_valid_monitor_config(demo: tuple[Any, str]) -> None:
    result, _ = demo
    config = load_config(result.files["config"])
    assert config.models["adult-income"].model_uri == "models:/adult-income@champion"


def test_rules_and_dashboard_are_generated(demo: tuple[Any, str]) -> None:
    result, _ = demo
    assert all(result.files[k].is_file() for k in ("rules", "grafana_rules", "dashboard"))


def test_output_says_where_to_look(demo: tuple[Any, str]) -> None:
    result, out = demo
    db = result.workdir / "mlflow.db"
    lines = ["mlflow ui --backend-store-uri sqlite:///", str(db), result.metrics_url,
             "docker compose -f docker/compose.yaml up", "no longer served"]
    assert [line in out for line in lines] == [True] * len(lines)


def test_output_describes_the_injected_bias(demo: tuple[Any, str]) -> None:
    _, out = demo
    assert "the scores of sex=Female are multiplied by 0.6" in out


def test_rerun_in_the_same_workdir_through_the_cli(demo: tuple[Any, str], workdir: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["demo", "--fast", "--workdir", str(workdir), "--port", "0"])
    out = capsys.readouterr().out
    assert (code, "registered adult-income version 2" in out) == (0, True)


def test_cli_options_map_to_demo_options(tmp_path: Path) -> None:
    args = build_parser().parse_args(["demo", "--fast", "--serve", "--workdir", str(tmp_path),
                                      "--port", "0", "--tick", "0.2"])
    assert options_from_args(args) == DemoOptions(workdir=tmp_path, port=0, fast=True,
                                                  serve=True, seed=0, tick_seconds=0.2)


def test_cli_defaults_to_the_demo_directory_and_port_9464() -> None:
    args = build_parser().parse_args(["demo"])
    assert (args.workdir, args.port, args.fast, args.serve) == (Path("demo"), 9464, False,
                                                                False)


def test_cli_rejects_a_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--port", "70000"])
    assert (code, "--port" in capsys.readouterr().err) == (2, True)


def test_taken_port_falls_back_to_a_free_one() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert free_port_or("127.0.0.1", s.getsockname()[1]) == (0, True)
