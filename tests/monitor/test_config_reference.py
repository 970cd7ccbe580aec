"""The config reference (docs site) lists every key the schema reads, with the real defaults.

Issue 15 item 18: timestamp_column, start, tick, mode, intersection, options were undocumented.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fairmonitor.monitor.config import format_duration, load_config, schema
from fairmonitor.monitor.config.reference import ENTRIES, markdown

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _keys(section):
    return {key for s, key, _, _ in ENTRIES if s == section}


def test_reference_names_exactly_the_keys_the_schema_reads():
    assert _keys("") == set(schema._TOP_KEYS)
    assert _keys("checkpoint") == {"kind", "path", "url", "table", "lease"}
    assert _keys("models.<name>") == set(schema._MODEL_KEYS)
    assert _keys("models.<name>.source") == set(schema._SOURCE_KEYS)
    assert _keys("models.<name>.thresholds.<metric>") == set(schema._THRESHOLD_KEYS)
    assert _keys("models.<name>.reference") == set(schema._REFERENCE_KEYS)
    assert _keys("models.<name>.alert_windows") == {"warning", "critical", "undefined"}
    assert _keys("models.<name>.alerting.budget") == set(schema._BUDGET_KEYS)
    assert set(schema._ALERTING_KEYS) == {"budget"}  # documented in the alerting entry


def test_reference_defaults_are_the_loaded_defaults(tmp_path):
    cfg = load_config("""
models:
  credit:
    source: {kind: files, path: preds}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    labels_after: 2h
    window: 1h
    metrics: [demographic_parity_difference]
""", base_dir=tmp_path)
    m, src = cfg.models["credit"], cfg.models["credit"].source
    default = {(s, k): d for s, k, d, _ in ENTRIES}
    loaded = {
        ("", "listen_address"): cfg.listen_address, ("", "catch_up"): str(cfg.catch_up),
        ("", "timezone"): cfg.timezone, ("", "mlflow_timeout"): format_duration(
            cfg.mlflow_timeout),
        ("", "checkpoint"): cfg.checkpoint.path.name, ("", "mlflow_spool"): cfg.mlflow_spool.name,
        ("checkpoint", "kind"): cfg.checkpoint.kind,
        ("models.<name>", "tracking_uri"): m.tracking_uri.replace(f"{tmp_path}/", ""),
        ("models.<name>", "experiment"): m.experiment.replace("credit", "<name>"),
        ("models.<name>", "decision_threshold"): str(m.decision_threshold),
        ("models.<name>", "min_group_size"): str(m.min_group_size),
        ("models.<name>", "intersection"): str(m.intersection).lower(),
        ("models.<name>", "seed"): str(m.seed),
        ("models.<name>", "relabel_within"): "labels_after" if m.relabel_within == m.labels_after
        else "?",
        ("models.<name>.source", "pattern"): src.pattern,
        ("models.<name>.source", "timestamp_column"): src.timestamp_column,
        ("models.<name>.source", "model_column"): src.model_column,
        ("models.<name>.source", "version_column"): src.version_column,
        ("models.<name>.source", "features_column"): src.features_column,
        ("models.<name>.source", "timeout"): format_duration(src.timeout),
        **{("models.<name>.alert_windows", k): str(getattr(m.alert_windows, k))
           for k in ("warning", "critical", "undefined")},
    }
    assert {k: default[k] for k in loaded} == loaded
    budget = load_config("""
models:
  credit:
    source: {kind: files, path: preds}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    metrics: [demographic_parity_difference]
    thresholds: {demographic_parity_difference: {warning: 0.1, compare: budget}}
""", base_dir=tmp_path).models["credit"].budget
    section = "models.<name>.alerting.budget"
    keys = ("false_pages", "null_fraction", "alternative_fraction")
    assert {k: float(default[(section, k)]) for k in keys} == {k: getattr(budget, k) for k in keys}
    assert default[(section, "per")] == f"{budget.days:g}d"
    assert format_duration(load_config("""
models:
  credit:
    source: {kind: sql, url: "sqlite://"}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    metrics: [demographic_parity_difference]
""").models["credit"].labels_after) == default[("models.<name>", "labels_after")]


def test_docs_configuration_page_is_the_generated_reference():
    # the page includes what docs/conf.py writes before each build: markdown() itself
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert "```{include} _generated/config-reference.md" in page
    spec = importlib.util.spec_from_file_location("fairmonitor_docs_conf", DOCS / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    assert conf.config_reference() == markdown() + "\n"
