from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fairmonitor.exceptions import ConfigError
from fairmonitor.monitor.config import (
    check_config,
    format_duration,
    load_config,
    parse_duration,
)
from fairmonitor.report.evidence import Budget
from fairmonitor.report.thresholds import Threshold

MINIMAL = """
models:
  credit:
    source: {kind: sql, url: "sqlite:///predictions.db"}
    sensitive_features: [sex, race]
    prediction: prediction
    label: label
    window: 1h
    metrics: [demographic_parity_difference, demographic_parity_ratio,
              equalized_odds_difference]
"""


def _errors(text: str) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as info:
        load_config(text)
    return info.value.errors  # type: ignore[attr-defined]


def test_minimal_config_defaults():
    cfg = load_config(MINIMAL)
    m = cfg.models["credit"]
    assert cfg.listen_address == "127.0.0.1:9464"
    assert (cfg.host, cfg.port) == ("127.0.0.1", 9464)
    assert cfg.catch_up == 100
    assert cfg.timezone == "UTC"
    assert cfg.tick == timedelta(hours=1)
    assert cfg.checkpoint.kind == "file"
    assert cfg.checkpoint.path == Path.cwd() / "fairmonitor-checkpoint.json"
    assert m.mode == "tumbling"
    assert m.every == timedelta(hours=1)
    assert m.labels_after == timedelta(0)
    # relative SQLite URLs resolve like every other path: against the config's directory
    assert m.tracking_uri == f"sqlite:///{Path.cwd() / 'mlflow.db'}"
    assert m.experiment == "fairmonitor-credit"
    assert m.model_uri is None
    # the evaluator's defaults (issue 26: one default offline and online)
    assert (m.min_group_size, m.min_condition_size) == (30, 10)
    assert m.label_metrics == ("equalized_odds_difference",)
    assert m.label_free_metrics == ("demographic_parity_difference", "demographic_parity_ratio")
    assert m.source.table == "predictions"


def test_full_config_from_file(tmp_path):
    (tmp_path / "ref.csv").write_text("sex,label\nF,1\n")
    path = tmp_path / "monitor.yaml"
    path.write_text("""
listen_address: 127.0.0.1:0
checkpoint: {kind: sql, url: "sqlite:///state.db"}
catch_up: 5
tick: 30s
models:
  credit:
    model: models:/credit@champion
    tracking_uri: http://127.0.0.1:5000
    source: {kind: files, path: preds, pattern: "dt=*/hour=*/*.parquet"}
    sensitive_features: [sex]
    score: score
    label: label
    window: 1h
    every: 5m
    labels_after: 24h
    start: 2026-11-22T00:00:00Z
    metrics: [demographic_parity_difference, demographic_parity_ratio,
              equal_opportunity_difference]
    min_group_size: 30
    thresholds:
      demographic_parity_difference: {warning: 0.1, critical: 0.2}
      demographic_parity_ratio: {warning: 0.8, critical: 0.7}
      equal_opportunity_difference:
        - {warning: 0.1, critical: 0.3}
        - {attribute: sex, critical: 0.25}
    reference: {path: ref.csv}
  fraud:
    model: {name: fraud, version: 4}
    source: {kind: sql, url: "postgresql+psycopg2://u@127.0.0.1/db", table: preds,
             model_column: null}
    sensitive_features: sex
    prediction: pred
    window: 1d
    every: 1d
    mode: tumbling
    metrics: [demographic_parity_difference]
""")
    cfg = load_config(path)
    credit, fraud = cfg.models["credit"], cfg.models["fraud"]
    assert cfg.tick == timedelta(seconds=30)
    assert cfg.port == 0
    assert cfg.checkpoint.url == f"sqlite:///{tmp_path / 'state.db'}"
    assert credit.model_uri == "models:/credit@champion"
    assert (credit.registered_model, credit.model_alias) == ("credit", "champion")
    assert credit.mode == "sliding"
    assert credit.every == timedelta(minutes=5)
    assert credit.start == datetime(2026, 11, 22, tzinfo=UTC)
    assert credit.source.path == tmp_path / "preds"
    assert credit.reference is not None
    assert credit.reference.path == tmp_path / "ref.csv"
    assert credit.thresholds == (
        Threshold("demographic_parity_difference", 0.1, 0.2, "upper"),
        Threshold("demographic_parity_ratio", 0.8, 0.7, "lower"),  # the registry's bound
        Threshold("equal_opportunity_difference", 0.1, 0.3, "upper"),
        Threshold("equal_opportunity_difference", None, 0.25, "upper", "sex"),
    )
    assert fraud.model_uri == "models:/fraud/4"
    assert fraud.sensitive_features == ("sex",)
    assert fraud.source.model_column is None
    assert fraud.source.table == "preds"


def _with_model(value: str) -> str:
    return MINIMAL.replace("    window: 1h", f"    window: 1h\n    model: {value}")


def test_model_uri_forms():
    assert load_config(_with_model("credit")).models["credit"].model_uri == "models:/credit"
    assert load_config(_with_model("models:/credit/12")).models["credit"].model_version == "12"
    m = load_config(_with_model("{name: c, alias: prod}")).models["credit"]
    assert m.model_uri == "models:/c@prod"


def test_model_mapping_errors():
    assert _errors(_with_model("{name: c, alias: prod, version: 2}")) == (
        "models.credit.model: give 'version' or 'alias', not both",)
    assert _errors(_with_model("{alias: prod, version: v2}")) == (
        "models.credit.model.name: required; give a string",
        "models.credit.model: give 'version' or 'alias', not both",
        "models.credit.model.version: must be a version number; got 'v2'",
    )


def test_all_errors_listed_with_dotted_paths_values_and_allowed():
    text = """
listen_address: localhost
timezone: Europe/Paris
catch_up: 0
polling: 1
models:
  credit:
    model: models:/credit/x
    source: {kind: kafka}
    sensitive_features: [sex]
    prediction: prediction
    window: 1 hour
    every: 2h
    mode: hopping
    labels_after: 24h
    metrics: [demographic_parity_difference, dp, equalized_odds_difference]
    min_group_size: -3
    thresholds:
      demographic_parity_difference: {warning: 0.3, critical: 0.2, bound: upward}
      demographic_parity_ratio: {warning: 0.8}
      abc: {warning: 1}
      equalized_odds_difference: {warnin: 0.1}
"""
    assert _errors(text) == (
        "polling: unknown key 'polling'; allowed keys: listen_address, checkpoint, mlflow_spool, "
        "catch_up, timezone, tick, mlflow_timeout, models",
        "listen_address: must be 'host:port' with a port in 0..65535; got 'localhost'",
        "timezone: must be one of ['UTC']; got 'Europe/Paris'",
        "catch_up: must be a positive integer; got 0",
        "models.credit.model: must be 'models:/<name>@<alias>', 'models:/<name>/<version>', a "
        "registered model name or a mapping; got 'models:/credit/x'",
        "models.credit.source.kind: must be one of ['sql', 'files', 'spark']; got 'kafka'",
        "models.credit.source.url: required; give a string",
        "models.credit.metrics[1]: unknown metric 'dp'; allowed: demographic_parity_difference, "
        "demographic_parity_ratio, equalized_odds_difference, equal_opportunity_difference"
        + _more_metrics(),
        "models.credit.metrics[2]: 'equalized_odds_difference' needs labels; set 'label' to the "
        "label column",
        "models.credit.window: must be a duration like '30s', '5m', '1h' or '1d'; got '1 hour'",
        "models.credit.mode: must be one of ['tumbling', 'sliding']; got 'hopping'",
        "models.credit.every: must not exceed window (1h); got 2h",
        "models.credit.labels_after: is set but no 'label' column is configured",
        "models.credit.thresholds.demographic_parity_difference.bound: must be one of "
        "['upper', 'lower']; got 'upward'",
        "models.credit.thresholds.demographic_parity_difference: with bound 'upper' warning "
        "must be <= critical; got warning=0.3, critical=0.2",
        "models.credit.thresholds.demographic_parity_ratio: metric 'demographic_parity_ratio' "
        "is not monitored; add it to 'metrics' (or 'reference.metrics') or remove this "
        "threshold",
        "models.credit.thresholds.abc: unknown metric 'abc'; allowed: "
        "demographic_parity_difference, demographic_parity_ratio, equalized_odds_difference, "
        "equal_opportunity_difference" + _more_metrics(),
        "models.credit.thresholds.equalized_odds_difference.warnin: unknown key 'warnin'; "
        "allowed keys: warning, critical, bound, attribute, "
        "against_direction, compare",
        "models.credit.thresholds.equalized_odds_difference: give at least one of 'warning' or "
        "'critical'",
        "models.credit.min_group_size: must be a positive integer; got -3",
    )


def _more_metrics() -> str:
    from fairmonitor import METRICS

    rest = list(METRICS)[4:]
    return "".join(f", {m}" for m in rest)


def test_error_message_has_header_and_one_line_per_error():
    with pytest.raises(ConfigError) as info:
        load_config("models: {credit: {window: 5x}}\ntimezone: CET")
    lines = str(info.value).splitlines()
    assert lines[0] == "monitor config has 6 errors:"
    assert lines[1] == "  timezone: must be one of ['UTC']; got 'CET'"
    assert len(lines) == 7


def test_single_error_header_is_singular():
    with pytest.raises(ConfigError, match=r"^monitor config has 1 error:\n  models\.credit\."
                                          r"every: tumbling windows advance by their size \(1h\)"
                                          r"; got 5m; drop 'every' or set mode: sliding$"):
        load_config(MINIMAL + "    every: 5m\n    mode: tumbling\n")


def test_threshold_attribute_must_be_an_evaluated_attribute():
    errors = _errors(MINIMAL + """    thresholds:
      demographic_parity_difference: {attribute: age, warning: 0.1}
""")
    assert errors == (
        "models.credit.thresholds.demographic_parity_difference.attribute: must be one of "
        "['sex', 'race', 'sex:race']; got 'age'",
    )


def test_metric_needing_the_model_belongs_to_reference():
    from fairmonitor import METRICS

    needs_model = [m for m, s in METRICS.items() if s.needs_model]
    if not needs_model:  # the robustness family registers these; parity alone has none
        pytest.fail("no registered metric calls the model; this test needs one")
    text = MINIMAL.replace("equalized_odds_difference]", f"{needs_model[0]}]")
    assert _errors(text) == (
        f"models.credit.metrics[2]: {needs_model[0]!r} calls the model, which production "
        "windows do not; list it under 'reference.metrics' instead",
    )


def test_reference_needs_model_and_existing_file(tmp_path):
    errors = _errors(MINIMAL + f"    reference: {{path: {tmp_path / 'missing.csv'}}}\n")
    assert errors == (
        f"models.credit.reference.path: file not found: '{tmp_path / 'missing.csv'}'",
        "models.credit.reference: needs 'model' (the MLflow model whose versions to evaluate)",
    )


def test_missing_file_and_bad_yaml():
    with pytest.raises(ConfigError, match=r"cannot read monitor config 'nope\.yaml': No such"):
        load_config("nope.yaml")
    with pytest.raises(ConfigError, match="monitor config is not valid YAML"):
        load_config("models: [a\n b: c")
    assert _errors("- a\n- b") == (
        "the top level must be a mapping with keys listen_address, checkpoint, mlflow_spool, "
        "catch_up, timezone, tick, mlflow_timeout, models; got ['a', 'b']",)
    assert _errors("") == ("models: required; give a mapping of model name to its settings, "
                           "e.g. models: {credit: {...}}",)


def test_checkpoint_shorthands():
    assert load_config(MINIMAL + "checkpoint: sqlite:///m.db\n").checkpoint.kind == "sql"
    cp = load_config(MINIMAL + "checkpoint: state/cp.json\n").checkpoint
    assert (cp.kind, cp.path) == ("file", Path.cwd() / "state" / "cp.json")


def test_mlflow_spool_defaults_beside_a_checkpoint_file():
    assert load_config(MINIMAL + "checkpoint: state/cp.json\n").mlflow_spool == \
        Path.cwd() / "state" / "fairmonitor-mlflow-pending.jsonl"
    # a SQL checkpoint may mean no writable disk: no default file
    assert load_config(MINIMAL + "checkpoint: sqlite:///m.db\n").mlflow_spool is None


@pytest.mark.parametrize(("line", "expected"), [
    ("mlflow_spool: spool/pending.jsonl\n", Path("spool") / "pending.jsonl"),
    ("mlflow_spool: null\n", None),
    ("mlflow_spool: ''\n", None),
])
def test_mlflow_spool_can_be_set_or_turned_off(line, expected):
    # a relative path resolves against the working directory when the config has no file;
    # read at run time (other tests' fixtures may have changed it since collection)
    expected = None if expected is None else Path.cwd() / expected
    assert load_config(MINIMAL + line).mlflow_spool == expected


def test_mlflow_spool_must_be_a_path():
    with pytest.raises(ConfigError, match=r"mlflow_spool: must be a string; got 3"):
        load_config(MINIMAL + "mlflow_spool: 3\n")


def test_check_config_summary(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(MINIMAL.replace("    window: 1h", "    window: 1h\n    every: 15m\n"
                                    "    labels_after: 1d\n    model: models:/credit@prod"))
    with pytest.raises(ConfigError, match="SQLite file not found"):
        check_config(path)  # --check reports what is missing, and creates nothing
    assert not (tmp_path / "predictions.db").exists()
    (tmp_path / "predictions.db").write_bytes(b"")
    lines = check_config(path)
    assert lines[0] == (f"config OK: 1 model(s); metrics on http://127.0.0.1:9464/metrics; "
                        f"checkpoint {tmp_path / 'fairmonitor-checkpoint.json'}; MLflow spool "
                        f"{tmp_path / 'fairmonitor-mlflow-pending.jsonl'}")
    assert lines[1] == ("credit: sliding 1h windows every 15m, labels after 1d, 3 metric(s), "
                        f"0 threshold(s), sql source sqlite:///{tmp_path / 'predictions.db'}, "
                        f"model models:/credit@prod, MLflow sqlite:///{tmp_path / 'mlflow.db'}")


@pytest.mark.parametrize(("text", "delta"), [("30s", timedelta(seconds=30)),
                                             ("5m", timedelta(minutes=5)),
                                             ("1h", timedelta(hours=1)),
                                             ("1d", timedelta(days=1)),
                                             ("0s", timedelta(0))])
def test_parse_duration(text, delta):
    assert parse_duration(text) == delta
    assert parse_duration(format_duration(delta)) == delta


@pytest.mark.parametrize("bad", ["5", "1.5h", "-1h", "1w", 5, None])
def test_parse_duration_rejects(bad):
    with pytest.raises(ValueError, match="must be a duration like '30s', '5m', '1h' or '1d'"):
        parse_duration(bad)


def test_routing_labels_team_and_owner():
    m = load_config(MINIMAL + "    team: risk\n    owner: alice@example.org\n").models["credit"]
    assert (m.team, m.owner) == ("risk", "alice@example.org")
    plain = load_config(MINIMAL).models["credit"]
    assert (plain.team, plain.owner) == (None, None)
    assert _errors(MINIMAL + "    team: [risk]\n") == (
        "models.credit.team: must be a string; got ['risk']",)


@pytest.mark.parametrize(("metric", "bound", "fairer", "default"), [
    ("demographic_parity_ratio", "upper", "higher", "lower"),
    ("demographic_parity_difference", "lower", "lower", "upper"),
])
def test_a_bound_on_the_fair_side_is_rejected(metric, bound, fairer, default):
    levels = "{warning: 0.7, critical: 0.6" if bound == "lower" else "{warning: 0.6, critical: 0.7"
    errors = _errors(MINIMAL + f"""    thresholds:
      {metric}: {levels}, bound: {bound}}}
""")
    assert errors == (
        f"models.credit.thresholds.{metric}.bound: {bound!r} on {metric}, where {fairer} is "
        f"fairer, alerts exactly when the model is fair; use bound {default!r} (the default), "
        "or set against_direction: true if that is really meant",)
    ok = load_config(MINIMAL + f"""    thresholds:
      {metric}: {levels}, bound: {bound}, against_direction: true}}
""").models["credit"].thresholds
    warning, critical = (0.7, 0.6) if bound == "lower" else (0.6, 0.7)
    assert ok == (Threshold(metric, warning, critical, bound=bound, against_direction=True),)


def test_the_documented_schema_example_loads_as_written():
    # the module docstring promises "load_config of this text works as is"
    import fairmonitor.monitor.config as config_module

    doc = config_module.__doc__
    block = doc[doc.index("::\n") + 3: doc.index("Every relative path")]
    cfg = load_config("\n".join(line[4:] for line in block.splitlines()))
    model = cfg.models["credit"]
    assert (model.label, model.labels_after.total_seconds(), cfg.port) == ("label", 86400.0, 9464)


BUDGETED = MINIMAL + """    thresholds:
      demographic_parity_difference: {warning: 0.1, critical: 0.2, compare: budget}
      demographic_parity_ratio: {warning: 0.8, compare: budget}
      equalized_odds_difference: {warning: 0.1, critical: 0.2}
"""


def test_a_budget_threshold_gets_the_default_budget_and_its_page_level():
    m = load_config(BUDGETED).models["credit"]
    assert m.budget == Budget()
    attributes = ["sex", "race", "sex:race"]  # the intersection: no threshold names it
    series = m.budget_series(attributes)
    assert series == (
        ("demographic_parity_difference", "sex", "warning"),
        ("demographic_parity_difference", "sex", "critical"),
        ("demographic_parity_difference", "race", "warning"),
        ("demographic_parity_difference", "race", "critical"),
        ("demographic_parity_ratio", "sex", "warning"),
        ("demographic_parity_ratio", "race", "warning"))
    assert m.budget_windows_per_day == 24.0
    assert m.page_level(attributes) == pytest.approx(math.log1p(6 * 24 * 90 / 1.0))
    assert load_config(MINIMAL).models["credit"].budget is None
    assert load_config(MINIMAL).models["credit"].page_level(attributes) is None


def test_the_alerting_budget_is_read_with_its_period():
    text = BUDGETED + """    alerting:
      budget: {false_pages: 2, per: 30d, null_fraction: 0.25, alternative_fraction: 2}
"""
    assert load_config(text).models["credit"].budget == Budget(
        false_pages=2.0, days=30.0, null_fraction=0.25, alternative_fraction=2.0)
    # the page level's calibration: the overshoot-corrected one by default, Ville's on request
    assert load_config(text).models["credit"].budget.calibration == "overshoot"
    ville = BUDGETED + "    alerting: {budget: {calibration: ville}}\n"
    assert load_config(ville).models["credit"].budget == Budget(calibration="ville")
    # a budget without a budget threshold is kept (it governs nothing yet)
    plain = MINIMAL + "    alerting: {budget: {false_pages: 1, per: 90d}}\n"
    assert load_config(plain).models["credit"].budget == Budget()


@pytest.mark.parametrize("alerting, expected", [
    ("{budget: {false_pages: 0}}",
     "models.credit.alerting.budget.false_pages: must be a positive number; got 0.0"),
    ("{budget: {per: 3 months}}", "models.credit.alerting.budget.per: "),
    ("{budget: {null_fraction: 1.5, alternative_fraction: 1.0}}",
     "models.credit.alerting.budget.null_fraction: must be below 'alternative_fraction'"),
    ("{budget: {null: 0.4}}", "models.credit.alerting.budget.null: YAML reads the key"),
    ("{budget: {pages: 1}}", "models.credit.alerting.budget.pages: unknown key 'pages'"),
    ("{budget: 1}", "models.credit.alerting.budget: must be a mapping with keys"),
    ("{persistence: 3}", "models.credit.alerting.persistence: unknown key 'persistence'"),
])
def test_alerting_budget_errors_name_the_key(alerting, expected):
    errors = _errors(BUDGETED + f"    alerting: {alerting}\n")
    assert any(e.startswith(expected) for e in errors), errors


def test_compare_budget_needs_an_interval_and_is_a_listed_choice():
    errors = _errors(MINIMAL + "    thresholds:\n"
                     "      demographic_parity_difference: {warning: 0.1, compare: sequential}\n")
    assert any("compare: must be one of ['value', 'bound', 'budget']" in e for e in errors), \
        errors
