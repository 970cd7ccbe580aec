"""The fairmonitor Grafana dashboard, generated with grafana-foundation-sdk (Grafana 11.6 flavour).

One dashboard for every monitored model, driven by query variables on the exporter's labels
(``model``, ``version``, ``attribute``, ``metric``), so it needs no regeneration when models,
metrics or thresholds change. Rows:

- **Fairness**: the alert state of every (model, metric, attribute) as a state timeline (green
  ok, orange warning, red critical, from ``fairmonitor_alert_state``); a table of undefined
  values and why; one time-series panel per metric (repeated over ``$metric``) with the
  configured thresholds drawn as dashed lines (the ``fairmonitor_threshold*`` series:
  thresholds are never copied into the dashboard).
- **Groups and robustness**: rows per group of each sensitive attribute; the robustness curve
  (fairness gap under noise over the clean gap) by noise level.
- **Monitor health**: time since the last successful window and since the latest window end,
  windows waiting for labels, rows per window, errors by stage, evaluation duration.

Every panel queries the provisioned Prometheus data source by uid (``fairmonitor-prometheus``,
see :mod:`.provisioning`). The SDK is imported here only: install the ``dashboards`` extra.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import (
    barchart,
    prometheus,
    stat,
    statetimeline,
    table,
    timeseries,
)
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from ._common import DASHBOARD_UID, DATASOURCE, NAMESPACE, fairness_name_regex
from .grafana_alerts import ALERT_STATE_PANEL_ID

__all__ = ["build_dashboard", "render_dashboard"]

_DS = dm.DataSourceRef(type_val=DATASOURCE["type"], uid=DATASOURCE["uid"])
_M = 'model=~"$model"'
_MVA = 'model=~"$model", version=~"$version", sensitive_attribute=~"$attribute"'
_ALL = dm.VariableOption(selected=True, text="All", value="$__all")
_SEVERITY_COLOURS = (("ok", "green"), ("warning", "orange"), ("critical", "red"))


def _query(expr: str, legend: str = "", ref: str = "A", *, instant: bool = False,
           table_format: bool = False) -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(_DS)
    if legend:
        q = q.legend_format(legend)
    if instant:
        q = q.instant()
    if table_format:
        q = q.format(PromQueryFormat.TABLE)
    return q


def _variable(name: str, label: str, query: str, regex: str | None = None) -> db.QueryVariable:
    v = (db.QueryVariable(name).label(label).datasource(_DS).query(query)
         .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC)
         .multi(True).include_all(True).current(_ALL))
    if regex is not None:
        v = v.regex(regex)
    if name != "metric":  # "All" of a repeat variable must expand to each value
        v = v.all_value(".*")
    return v


def _dashed(colour: str) -> list[dm.DynamicConfigValue]:
    return [dm.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": colour}),
            dm.DynamicConfigValue(id_val="custom.lineStyle",
                                  value={"fill": "dash", "dash": [10, 10]}),
            dm.DynamicConfigValue(id_val="custom.fillOpacity", value=0)]


def _band_edge(fill: int) -> list[dm.DynamicConfigValue]:
    """Return a confidence bound: a thin dotted line; the upper one shaded down to the axis."""
    return [dm.DynamicConfigValue(id_val="custom.lineStyle",
                                  value={"fill": "dot", "dash": [0, 8]}),
            dm.DynamicConfigValue(id_val="custom.lineWidth", value=1),
            dm.DynamicConfigValue(id_val="custom.fillOpacity", value=fill)]


def _severity_steps() -> db.ThresholdsConfig:
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps([
        dm.Threshold(value=None, color="green"), dm.Threshold(value=1, color="orange"),
        dm.Threshold(value=2, color="red")])


def _fairness_panels() -> list[Any]:
    state = (
        statetimeline.Panel().id(ALERT_STATE_PANEL_ID).title("Alert state")
        .description("Threshold verdict of the latest value of each metric and sensitive "
                     "attribute: green ok, orange warning, red critical (the most specific "
                     "configured threshold). Metrics without a threshold are not shown.")
        .datasource(_DS).span(24).height(7)
        .with_target(_query(
            f'max by (model, metric, sensitive_attribute) ({NAMESPACE}_alert_state{{{_MVA}, '
            'metric=~"$metric"})', "{{model}} · {{metric}} · {{sensitive_attribute}}"))
        .mappings([dm.ValueMap(options={
            str(code): dm.ValueMappingResult(text=text, color=colour, index=code)
            for code, (text, colour) in enumerate(_SEVERITY_COLOURS)})])
        .thresholds(_severity_steps())
        .color_scheme(db.FieldColor().mode(dm.FieldColorModeId.THRESHOLDS))
        .show_value(cm.VisibilityMode.NEVER).merge_values(True).min(0).max(2)
    )
    per_metric = (
        timeseries.Panel().id(3).title("$metric")
        .description("The metric per sensitive attribute, its 95% confidence band (dotted "
                     "lower and upper bounds: the value's sampling noise; a threshold with "
                     "compare: bound alerts when the band's unfair side crosses it) and the "
                     "configured warning (orange) and critical (red) thresholds as dashed "
                     "lines. A gap means the value was undefined (see the table below). "
                     "For a multiclass model the metric's line is its worst class, and each "
                     "class against the rest has a line of its own (class c).")
        .datasource(_DS).span(12).height(8).repeat("metric").repeat_direction("h")
        .max_per_row(2)
        .with_target(_query(f'{{__name__=~"{NAMESPACE}_${{metric}}", {_MVA}}}',
                            "{{model}} · {{sensitive_attribute}} · v{{version}}"))
        .with_target(_query(f'{NAMESPACE}_threshold{{{_M}, metric=~"${{metric}}"}}',
                            "{{model}} {{severity}} threshold ({{bound}})", "B"))
        .with_target(_query(
            f'{NAMESPACE}_threshold_by_attribute{{{_M}, metric=~"${{metric}}", '
            'sensitive_attribute=~"$attribute"}',
            "{{model}} · {{sensitive_attribute}} {{severity}} threshold ({{bound}})", "C"))
        .with_target(_query(
            f'{NAMESPACE}_metric_lower_bound{{{_MVA}, metric=~"${{metric}}"}}',
            "{{model}} · {{sensitive_attribute}} · v{{version}} lower bound", "D"))
        .with_target(_query(
            f'{NAMESPACE}_metric_upper_bound{{{_MVA}, metric=~"${{metric}}"}}',
            "{{model}} · {{sensitive_attribute}} · v{{version}} upper bound", "E"))
        .with_target(_query(f'{{__name__=~"{NAMESPACE}_${{metric}}_by_class", {_MVA}}}',
                            "{{model}} · {{sensitive_attribute}} · class {{class}} · "
                            "v{{version}}", "F"))
        .override_by_regexp(".*lower bound$", _band_edge(0))
        .override_by_regexp(".*upper bound$", _band_edge(8))
        .override_by_regexp(".*warning threshold.*", _dashed("orange"))
        .override_by_regexp(".*critical threshold.*", _dashed("red"))
        .legend(cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.LIST)
                .placement(cm.LegendPlacement.BOTTOM).show_legend(True))
        .line_width(2).show_points(cm.VisibilityMode.AUTO).span_nulls(False)
    )
    undefined = (
        table.Panel().id(4).title("Undefined values (latest window)")
        .description("Metric values that are NaN on the latest window, with the reason: "
                     "labels_pending, insufficient_data, too_few_groups, error or undefined. "
                     "They are not "
                     "exported as values, so they never trigger a threshold alert.")
        .datasource(_DS).span(24).height(6)
        .with_target(_query(f"{NAMESPACE}_metric_undefined{{{_MVA}}}", instant=True,
                            table_format=True))
        .with_transformation(dm.DataTransformerConfig(id_val="organize", options={
            "excludeByName": {"Time": True, "Value": True, "__name__": True, "job": True,
                              "instance": True}}))
    )
    # the repeated panel comes last: Grafana lays its clones out below the other panels
    return [state, undefined, per_metric]


def _group_panels() -> list[Any]:
    groups = (
        timeseries.Panel().id(6).title("Rows per group")
        .description("Rows of each group of each sensitive attribute in the latest window "
                     "(groups below min_group_size are left out of the metrics).")
        .datasource(_DS).span(12).height(8)
        .with_target(_query(f"{NAMESPACE}_group_samples{{{_MVA}}}",
                            "{{model}} · {{sensitive_attribute}}={{group}}"))
        .min(0)
    )
    curve = "{{model}} · {{sensitive_attribute}} · {{metric}}"
    robustness = (
        barchart.Panel().id(7).title("Robustness curve by noise level")
        .description("Fairness gap under input noise over the clean gap, per noise level "
                     "(1 = unchanged by noise). One bar per model, attribute and metric.")
        .datasource(_DS).span(12).height(8)
        .with_target(_query(
            f'label_join({NAMESPACE}_robustness_ratio_by_level{{{_MVA}}}, "curve", " · ", '
            '"model", "sensitive_attribute", "metric")', curve, instant=True,
            table_format=True))
        .with_transformation(dm.DataTransformerConfig(id_val="groupingToMatrix", options={
            "columnField": "curve", "rowField": "level", "valueField": "Value"}))
        .with_transformation(dm.DataTransformerConfig(id_val="sortBy", options={
            "sort": [{"field": "level\\curve"}]}))
        .x_field("level\\curve").show_value(cm.VisibilityMode.AUTO).axis_soft_min(0)
    )
    return [groups, robustness]


def _stat(panel_id: int, title: str, description: str, expr: str, unit: str,
          no_value: str) -> stat.Panel:
    return (stat.Panel().id(panel_id).title(title).description(description).datasource(_DS)
            .span(6).height(5).with_target(_query(expr, "{{model}}", instant=True))
            .unit(unit).no_value(no_value).graph_mode(cm.BigValueGraphMode.NONE)
            # neutral colour: Grafana's default steps (red from 80) mean nothing here
            .color_mode(cm.BigValueColorMode.NONE)
            .thresholds(db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE)
                        .steps([dm.Threshold(value=None, color="text")]))
            .text_mode(cm.BigValueTextMode.VALUE_AND_NAME)
            .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False)))


def _health_panels() -> list[Any]:
    ts = f"{NAMESPACE}_window_last_success_timestamp_seconds"
    panels: list[Any] = [
        _stat(9, "Since last successful window",
              "Time since a window was last evaluated without a source error. The "
              "FairmonitorWindowStale alert fires after 3 cadences.",
              f"time() - ({ts}{{{_M}}} > 0)", "s", "never"),
        _stat(10, "Since latest window end",
              "Age of the data behind the current values (end of the latest evaluated "
              "window).",
              f"time() - ({NAMESPACE}_window_end_timestamp_seconds{{{_M}}} > 0)", "s", "none"),
        _stat(11, "Windows waiting for labels",
              "Evaluated windows whose label metrics wait for ground truth (labels_after).",
              f"{NAMESPACE}_labels_pending_windows{{{_M}}}", "none", "0"),
        _stat(12, "Rows in latest window", "Rows fetched for the latest evaluated window.",
              f"{NAMESPACE}_window_samples{{{_M}}}", "short", "0"),
    ]
    errors = (
        timeseries.Panel().id(13).title("Errors by stage")
        .description("Errors of the monitor pipeline per stage (source, data, metric, mlflow, "
                     "export, scheduler). The FairmonitorErrors alert fires on any.")
        .datasource(_DS).span(8).height(8)
        .with_target(_query(
            f"sum by (model, stage) (increase({NAMESPACE}_errors_total{{{_M}}}"
            "[$__rate_interval]))", "{{model}} · {{stage}}"))
        .draw_style(cm.GraphDrawStyle.BARS).fill_opacity(60).min(0).unit("short")
    )
    duration = (
        timeseries.Panel().id(14).title("Window evaluation duration")
        .description("Time to fetch and evaluate the latest window.")
        .datasource(_DS).span(8).height(8)
        .with_target(_query(f"{NAMESPACE}_window_evaluation_duration_seconds{{{_M}}}",
                            "{{model}}"))
        .unit("s").min(0)
    )
    evaluated = (
        timeseries.Panel().id(15).title("Windows evaluated")
        .description("Window evaluations completed per interval (every phase), and the "
                     "monitor version.")
        .datasource(_DS).span(8).height(8)
        .with_target(_query(f"sum by (model) (increase({NAMESPACE}_windows_evaluated_total"
                            f"{{{_M}}}[$__rate_interval]))", "{{model}}"))
        .with_target(_query(f"count by (version) ({NAMESPACE}_build_info)",
                            "fairmonitor {{version}}", "B"))
        .draw_style(cm.GraphDrawStyle.BARS).fill_opacity(60).min(0).unit("short")
    )
    return [*panels, errors, duration, evaluated]


def build_dashboard() -> dict[str, Any]:
    """Return the dashboard as a JSON-compatible dict (Grafana's classic model, schema 41)."""
    gauges = f'{{__name__=~"{fairness_name_regex()}"'
    builder = (
        db.Dashboard("Fairness monitor").uid(DASHBOARD_UID)
        .description("Fairness metrics, thresholds, alert states and monitor health "
                     "exported by `fairmonitor monitor`. Generated by `fairmonitor "
                     "dashboards`; do not edit in the UI.")
        .tags(["fairness", "fairmonitor"]).timezone("utc").refresh("1m")
        .time("now-24h", "now").tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .with_variable(_variable("model", "Model",
                                 f"label_values({NAMESPACE}_window_samples, model)"))
        .with_variable(_variable("version", "Version",
                                 f'label_values({gauges}, {_M}}}, version)'))
        .with_variable(_variable("attribute", "Sensitive attribute",
                                 f'label_values({gauges}, {_M}, version=~"$version"}}, '
                                 "sensitive_attribute)"))
        .with_variable(_variable("metric", "Metric",
                                 f"label_values({gauges}, {_M}}}, __name__)",
                                 regex=f"/^{NAMESPACE}_(.+)$/"))
        .with_row(db.Row("Fairness").id(1))
    )
    for panel in _fairness_panels():
        builder = builder.with_panel(panel)
    builder = builder.with_row(db.Row("Groups and robustness").id(5))
    for panel in _group_panels():
        builder = builder.with_panel(panel)
    builder = builder.with_row(db.Row("Monitor health").id(8))
    for panel in _health_panels():
        builder = builder.with_panel(panel)
    result: dict[str, Any] = json.loads(json.dumps(builder.build(), cls=JSONEncoder))
    return result


def render_dashboard() -> str:
    """Return the dashboard JSON text committed as ``dashboards/fairmonitor.json``."""
    return json.dumps(build_dashboard(), indent=2, ensure_ascii=False) + "\n"
