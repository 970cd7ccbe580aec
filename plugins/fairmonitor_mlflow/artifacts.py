"""Artifacts of a fairness evaluation: tables, plots and the report, written then logged.

Layout under the run's ``fairness/`` artifact directory (base names are unique, as
``EvaluationResult.save`` requires)::

    fairness_report.html            the report: verdicts, tables, plots inline, links
    fairness_report.json            everything in the report, machine-readable
    fairness_groups.csv / .json     one row per (attribute, group): counts and rates
                                    (multiclass: per class too, column ``class``)
    fairness_classes.csv            multiclass: one row per (metric, attribute, class)
    fairness_pairwise.json          every pairwise matrix; one CSV each under pairwise/
    fairness_robustness.json        per-level robustness results (when computed)
    plots/fairness_*.png            score CDFs (ABCC shaded), MADD histograms, robustness curves
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import numpy as np

from fairmonitor import METRICS, WindowReport
from fairmonitor.exceptions import InvalidInputError
from fairmonitor.metrics import encode_groups, group_rates
from fairmonitor.report.registry import class_key, split_class_key

from . import plots
from .config import FairnessConfig
from .tracking import robustness_details, safe_name
from .window import BuiltWindow

__all__ = ["Written", "class_table", "group_table", "log_artifacts", "pairwise_matrices",
           "write_artifacts"]

ARTIFACT_DIR = "fairness"


@dataclass(frozen=True)
class Written:
    """One artifact file: its path relative to the artifact directory, kind and content."""

    path: str
    kind: str  # "csv", "json", "png", "html"
    content: Any
    title: str = ""

    @property
    def name(self) -> str:
        """Key in ``EvaluationResult.artifacts``: the base name with its extension joined."""
        base, ext = os.path.splitext(os.path.basename(self.path))
        return f"{base}_{ext.lstrip('.')}"


def _file_part(name: Any) -> str:
    return re.sub(r"[^\w.-]", "_", safe_name(name).replace(":", "_x_"))


def _jsonable(value: Any) -> Any:
    """Plain JSON: NaN/inf become null, arrays lists, tuples lists, numpy scalars numbers."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | np.ndarray):
        return [_jsonable(v) for v in (value.tolist() if isinstance(value, np.ndarray) else value)]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _label(label: Any) -> str:
    return ":".join(map(str, label)) if isinstance(label, tuple) else str(label)


def _attributes(report: WindowReport, window: Any) -> dict[str, dict[str, Any]]:
    # each column on its own; the one attribute that is not a column is their intersection
    cols = dict(window.sensitive_features)
    return {attr: {attr: cols[attr]} if attr in cols else cols for attr in report.attributes}


def _group_means(groups: Any, values: Any, weights: Any = None) -> list[Any]:
    if values is None:
        return [None] * groups.n_groups
    w = np.ones(groups.codes.size) if weights is None else np.asarray(weights, dtype=float)
    sums = np.bincount(groups.codes, weights=np.asarray(values, dtype=float) * w,
                       minlength=groups.n_groups)
    totals = np.bincount(groups.codes, weights=w, minlength=groups.n_groups)
    return [float(a / b) if b else None for a, b in zip(sums, totals, strict=True)]


def _group_totals(groups: Any, mask: Any, w: Any) -> Any:
    """Return the weight of the rows of each group where ``mask`` holds (missing groups out)."""
    kept = groups.codes >= 0
    return np.bincount(groups.codes[kept], weights=mask[kept] * w[kept],
                       minlength=groups.n_groups)


def _ratio(num: Any, den: Any) -> list[float | None]:
    """``num / den`` per group; None (NaN in the CSV) where the denominator is 0: undefined."""
    return [float(n) / float(d) if d else None for n, d in zip(num, den, strict=True)]


def _group_auc(groups: Any, y_true: Any, y_score: Any, weights: Any = None
               ) -> list[float | None]:
    """ROC AUC per group, None where a group lacks a class (AUC is undefined there)."""
    from sklearn.metrics import roc_auc_score

    if y_true is None or y_score is None:
        return [None] * groups.n_groups
    out: list[float | None] = []
    for k in range(groups.n_groups):
        rows = groups.codes == k
        t = np.asarray(y_true)[rows]
        w = None if weights is None else np.asarray(weights)[rows]
        out.append(float(roc_auc_score(t, np.asarray(y_score, dtype=float)[rows],
                                       sample_weight=w))
                   if 0 < t.sum() < t.size else None)
    return out


def group_table(report: WindowReport, window: Any, config: FairnessConfig) -> Any:
    """One row per (attribute, group), like fairlearn's ``MetricFrame.by_group``.

    Columns: count, inclusion (``min_group_size``), selection rate, TPR, FPR, FNR, precision,
    accuracy, base rate (``positive_label_rate``), mean score, ROC AUC and the calibration gap
    (mean score minus base rate; precision gaps are predictive parity); a rate whose
    denominator is 0 in a group (e.g. TPR without positives) is left empty, never 0. With the
    window's ``sample_weight`` every rate and mean is weighted (``count`` stays rows).
    """
    import pandas as pd

    rows = []
    for attr, cols in _attributes(report, window).items():
        with warnings.catch_warnings():  # a group without positives has a NaN rate, by design
            warnings.simplefilter("ignore")
            weights = window.sample_weight
            rates = group_rates(window.y_true, window.y_pred, sensitive_features=cols,
                                sample_weight=weights)
            groups = encode_groups(cols, n_samples=window.n_rows)
        base = _group_means(groups, window.y_true, weights)
        score = _group_means(groups, window.y_score, weights)
        extra: dict[str, list[Any]] = {k: [None] * groups.n_groups
                                       for k in ("false_negative_rate", "precision", "accuracy")}
        if window.y_true is not None and window.y_pred is not None:
            t = np.asarray(window.y_true).astype(bool)
            p = np.asarray(window.y_pred).astype(bool)

            w = np.ones(window.n_rows) if weights is None else weights
            tp, fp, fn, tn = (_group_totals(groups, mask, w)
                              for mask in (t & p, ~t & p, t & ~p, ~t & ~p))
            extra = {"false_negative_rate": _ratio(fn, tp + fn),
                     "precision": _ratio(tp, tp + fp),
                     "accuracy": _ratio(tp + tn, tp + fp + fn + tn)}
        auc = _group_auc(groups, window.y_true, window.y_score, weights)
        for k, label in enumerate(rates.labels):
            rows.append({
                "attribute": attr, "group": _label(label), "count": int(rates.counts[k]),
                "included": bool(rates.counts[k] >= config.min_group_size),
                "selection_rate": float(rates.selection_rate[k]),
                "true_positive_rate": (None if rates.true_positive_rate is None
                                       else float(rates.true_positive_rate[k])),
                "false_positive_rate": (None if rates.false_positive_rate is None
                                        else float(rates.false_positive_rate[k])),
                "false_negative_rate": extra["false_negative_rate"][k],
                "precision": extra["precision"][k], "accuracy": extra["accuracy"][k],
                "positive_label_rate": base[k], "mean_score": score[k], "roc_auc": auc[k],
                # calibration in the large: a calibrated model's mean score is its base rate
                "calibration_gap": (None if base[k] is None or score[k] is None
                                    else score[k] - base[k]),
            })
    return pd.DataFrame(rows)


def _groups_table(report: WindowReport, window: Any, config: FairnessConfig) -> Any:
    """:func:`group_table`; of a multiclass window, each class's one-vs-rest rows (``class``)."""
    import pandas as pd

    if window.classes is None:
        return group_table(report, window, config)
    return pd.concat([group_table(report, window.one_vs_rest(c), config).assign(**{"class": c})
                      for c in window.classes], ignore_index=True)


def class_table(report: WindowReport) -> Any:
    """One row per (metric, attribute, class) of a multiclass report, the worst class marked.

    Columns: metric, attribute, class, value, status (the class's threshold verdict), worst
    (True for the class the metric's own value reports), reason (why a value is NaN).
    """
    import pandas as pd

    rows = []
    for (key, attr), value in report.values.items():
        metric, label = split_class_key(key)
        if label is None:
            continue
        worst = getattr(report.details.get((metric, attr)), "label", None)
        rows.append({"metric": metric, "attribute": attr, "class": label, "value": value,
                     "status": report.statuses.get((key, attr)),
                     "worst": worst is not None and str(worst) == label,
                     "reason": report.reasons.get((key, attr))})
    return pd.DataFrame(rows, columns=["metric", "attribute", "class", "value", "status",
                                       "worst", "reason"])


def _class_scores(window: Any, metric: str, detail: Any) -> tuple[str, Any]:
    """Return the metric's registry name and the scores its value reads (one class's)."""
    base, label = split_class_key(metric)
    if window.classes is None or window.y_score is None:
        return base, window.y_score
    if label is None:  # the worst class: its own column
        label = getattr(detail, "label", None)
    match = [c for c in window.classes if str(c) == str(label)]
    return base, None if not match else window.one_vs_rest(match[0]).y_score


def _find_matrix(detail: Any) -> Any:
    """Find a pairwise matrix in a metric's result (duck-typed: ``.matrix`` and ``.labels``)."""
    if detail is None:
        return None
    if hasattr(detail, "matrix") and hasattr(detail, "labels"):
        return detail
    names = ([f.name for f in fields(detail)] if is_dataclass(detail)
             else list(getattr(detail, "__slots__", ())))
    for name in names:
        value = getattr(detail, name, None)
        if hasattr(value, "matrix") and hasattr(value, "labels"):
            return value
    return None


def pairwise_matrices(report: WindowReport, window: Any,
                      config: FairnessConfig) -> dict[tuple[str, str], Any]:
    """Every pairwise between-group matrix of the distribution metrics, by (metric, attribute).

    Taken from the metric's result when it holds one (MADD), else built with
    :func:`fairmonitor.metrics.pairwise_matrix` for the metrics it knows (ABCC, ABPC).
    """
    import fairmonitor.metrics as fm

    builder = getattr(fm, "pairwise_matrix", None)
    attrs = _attributes(report, window)
    out = {}
    for (metric, attr), value in report.values.items():
        detail = report.details.get((metric, attr))
        matrix = _find_matrix(detail)
        base, scores = _class_scores(window, metric, detail)
        spec = METRICS.get(base)
        if (matrix is None and builder is not None and spec is not None and scores is not None
                and spec.inputs == ("y_score",) and np.isfinite(value)):
            options = {k: v for k, v in config.options.get(base, {}).items() if k != "agg"}
            try:
                with warnings.catch_warnings():  # exclusions are in the report already
                    warnings.simplefilter("ignore")
                    matrix = builder(scores, sensitive_features=attrs[attr],
                                     metric=base, min_group_size=config.min_group_size,
                                     **options)
            except InvalidInputError:  # a score metric without a pairwise form
                matrix = None
        if matrix is not None:
            out[(metric, attr)] = matrix
    return out


def _metric_field(detail: Any, *names: str) -> Any:
    for name in names:
        value = getattr(detail, name, None)
        if value is not None:
            return value
    return None


def _plots(report: WindowReport, built: BuiltWindow, config: FairnessConfig,
           matrices: Mapping[tuple[str, str], Any]) -> list[tuple[str, Callable[[], Any], str]]:
    """Return ``[(path, build, title)]`` of the figures.

    Each figure is built only when written, so one that fails is isolated like any other
    artifact.
    """
    window = built.window
    out: list[tuple[str, Callable[[], Any], str]] = []
    if report.intervals:
        out.append(("plots/fairness_intervals.png", lambda: plots.metric_intervals(report),
                    "Values with their confidence intervals and chance levels"))
    attrs = _attributes(report, window)
    if built.task == "regression":  # residual distributions and prediction CDFs
        from .regression import regression_plots

        return out + regression_plots(report, window, config, attrs, _file_part)
    for suffix, key, scores in _score_views(window):
        out += _score_plots(report, config, matrices, attrs, suffix, key, scores)
    for attr, detail in robustness_details(report).items():
        out.append((f"plots/fairness_robustness__{_file_part(attr)}.png",
                    lambda attr=attr, detail=detail: plots.robustness_curve(attr, detail),
                    f"Robustness curve by {attr}"))
    return out


def _score_views(window: Any) -> list[tuple[str, Callable[[str], str], Any]]:
    """``(file suffix, report key of a metric, scores)``: one view, or one per class."""
    if window.y_score is None:
        return []
    if window.classes is None:
        return [("", lambda metric: metric, window.y_score)]
    return [(f"__class_{_file_part(c)}", lambda metric, c=c: class_key(metric, c),
             window.one_vs_rest(c).y_score) for c in window.classes]


def _score_plots(report: WindowReport, config: FairnessConfig,
                 matrices: Mapping[tuple[str, str], Any], attrs: Mapping[str, Any],
                 suffix: str, key: Callable[[str], str], scores: Any
                 ) -> list[tuple[str, Callable[[], Any], str]]:
    """Return the score CDF and MADD histogram figures of one view (``suffix``: its class)."""
    out: list[tuple[str, Callable[[], Any], str]] = []
    what = f" (class {suffix.removeprefix('__class_')} vs rest)" if suffix else ""
    for attr, cols in attrs.items():
        def cdf(attr: str = attr, cols: Any = cols) -> Any:
            matrix = matrices.get((key("abcc"), attr))
            pair = matrix.worst_pair() if hasattr(matrix, "worst_pair") else None
            return plots.score_cdfs(attr, cols, scores, min_group_size=config.min_group_size,
                                    value=report.values.get((key("abcc"), attr)), pair=pair)

        out.append((f"plots/fairness_score_cdf__{_file_part(attr)}{suffix}.png", cdf,
                    f"Score CDFs by {attr}{what}"))
        if (key("madd"), attr) in report.values:
            def hist(attr: str = attr, cols: Any = cols) -> Any:
                detail = report.details.get((key("madd"), attr))
                n_bins = _metric_field(detail, "n_bins") if detail is not None else None
                return plots.madd_histograms(attr, cols, scores,
                                             min_group_size=config.min_group_size,
                                             n_bins=int(n_bins) if n_bins else 50,
                                             value=report.values[(key("madd"), attr)])

            out.append((f"plots/fairness_madd_hist__{_file_part(attr)}{suffix}.png", hist,
                        f"MADD histograms by {attr}{what}"))
    return out


# row positions of the robustness subsample: up to max_rows numbers nobody reads in a report
_BULKY = frozenset({"sample_index"})


def _robustness_json(report: WindowReport) -> dict[str, Any]:
    out = {}
    for attr, detail in robustness_details(report).items():
        if is_dataclass(detail):
            out[attr] = {f.name: _jsonable(getattr(detail, f.name)) for f in fields(detail)
                         if f.name not in _BULKY}
        else:
            out[attr] = {name: _jsonable(getattr(detail, name, None))
                         for name in ("levels", "ratios", "gaps", "gap_se", "flip_rate")}
    return out


def report_dict(report: WindowReport, built: BuiltWindow, config: FairnessConfig,
                scalars: Mapping[str, float]) -> dict[str, Any]:
    """Describe the whole evaluation as plain JSON-able data."""
    values = []
    for (metric, attr), value in report.values.items():
        base, label = split_class_key(metric)
        spec = METRICS.get(base)
        iv = report.intervals.get((metric, attr))
        values.append({
            "metric": metric, "attribute": attr, "value": value, "class": label,
            "ci_lower": iv.lower if iv is not None else None,
            "ci_upper": iv.upper if iv is not None else None,
            "chance": iv.chance if iv is not None else None,
            "interval_method": iv.method if iv is not None else None,
            "interval_note": iv.reason if iv is not None else None,
            "key": f"fairness/{metric}/{safe_name(attr)}",
            "status": report.statuses.get((metric, attr)),
            "reason": report.reasons.get((metric, attr)),
            "direction": spec.direction if spec else None, "ideal": spec.ideal if spec else None,
            "help": spec.help if spec else None,
        })
    return _jsonable({
        "status": report.status, "n_rows": report.n_rows,
        "duration_seconds": report.duration_seconds,
        "inputs": built.sources, "values": values, "skipped": report.skipped,
        "notes": list(report.notes), "group_counts": report.group_counts,
        "thresholds": [{"metric": t.metric, "warning": t.warning, "critical": t.critical,
                        "bound": t.bound, "compare": t.compare} for t in config.thresholds],
        "config": {"sensitive_features": config.sensitive_features, "metrics": config.metrics,
                   "score_column": config.score_column, "pos_label": config.pos_label,
                   "threshold": config.threshold, "min_group_size": config.min_group_size,
                   "intersection": config.intersection, "robustness": dict(config.robustness),
                   "features": config.features, "options": config.options,
                   "model_uses_sensitive": config.model_uses_sensitive,
                   "rng": config.rng if isinstance(config.rng, int | None) else "Generator",
                   "missing": config.missing},
        "missing_counts": {attr: {"policy": how, "rows": n}
                           for attr, (how, n) in built.window.missing_counts.items()},
        "mlflow_metrics": scalars,
    })


def _guard(failures: list[str], what: str, step: Callable[[], Any]) -> Any:
    """Run one artifact step; a failure becomes a line in ``failures`` instead of an error.

    An artifact is a view of the metrics; it must never cost them (issue 13 item 1).
    """
    try:
        return step()
    except Exception as exc:  # any plot/table/IO error: the metrics are already computed
        failures.append(f"{what}: {type(exc).__name__}: {exc}")
        return None


def write_artifacts(report: WindowReport, built: BuiltWindow, config: FairnessConfig,
                    scalars: Mapping[str, float], outdir: str,
                    failures: list[str] | None = None) -> list[Written]:
    """Write every artifact under ``outdir``; return what was written, report last.

    Each artifact is written on its own: one that fails is left out and described in
    ``failures`` (``"<artifact>: <error>"``), and the others are still written.
    """
    from PIL import Image

    from .report_html import render_html

    failures = [] if failures is None else failures
    written: list[Written] = []

    def put(path: str, kind: str, content: Any, title: str = "") -> None:
        full = os.path.join(outdir, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if kind == "csv":
            content.to_csv(full, index=False)
        elif kind in ("json", "html"):
            with open(full, "w", encoding="utf-8") as fh:
                if kind == "json":
                    json.dump(content, fh, indent=1, allow_nan=False)
                else:
                    fh.write(content)
        written.append(Written(path, kind, content, title))

    def groups() -> None:
        if built.task == "regression":  # errors per group, not rates
            from .regression import regression_group_table

            table = regression_group_table(report, built.window, config)
        else:
            table = _groups_table(report, built.window, config)
        put("fairness_groups.csv", "csv", table, "Groups (CSV)")
        put("fairness_groups.json", "json", _jsonable(table.to_dict(orient="records")),
            "Groups (JSON)")

    _guard(failures, "fairness_groups", groups)
    if built.window.classes is not None:
        _guard(failures, "fairness_classes.csv", lambda: put(
            "fairness_classes.csv", "csv", class_table(report), "Classes (CSV)"))
    matrices = _guard(failures, "pairwise matrices",
                      lambda: pairwise_matrices(report, built.window, config)) or {}
    if matrices:
        import pandas as pd

        _guard(failures, "fairness_pairwise.json", lambda: put(
            "fairness_pairwise.json", "json", _jsonable({
                f"{metric}/{attr}": {"labels": [_label(lab) for lab in m.labels],
                                     "counts": m.counts, "matrix": m.matrix}
                for (metric, attr), m in matrices.items()}), "Pairwise matrices (JSON)"))
        for (metric, attr), m in matrices.items():
            def matrix_csv(metric: str = metric, attr: str = attr, m: Any = m) -> None:
                labels = [_label(lab) for lab in m.labels]
                frame = pd.DataFrame(np.asarray(m.matrix), columns=labels).assign(group=labels)
                put(f"pairwise/fairness_pairwise__{metric}__{_file_part(attr)}.csv", "csv",
                    frame[["group", *labels]], f"{metric} pairwise, {attr}")

            _guard(failures, f"pairwise {metric}/{attr}", matrix_csv)
    robustness = _guard(failures, "fairness_robustness.json", lambda: _robustness_json(report))
    if robustness:
        _guard(failures, "fairness_robustness.json", lambda: put(
            "fairness_robustness.json", "json", robustness, "Robustness per level (JSON)"))
    for path, make, title in _plots(report, built, config, matrices):
        def plot(path: str = path, make: Callable[[], Any] = make, title: str = title) -> None:
            full = os.path.join(outdir, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            image = plots.save_png(make(), full)
            if image is None:  # a matplotlib figure: read the PNG back
                with Image.open(full) as img:
                    img.load()
                    image = img.copy()
            written.append(Written(path, "png", image, title))

        _guard(failures, path, plot)
    data = _guard(failures, "fairness_report.json",
                  lambda: report_dict(report, built, config, scalars))
    if data is not None:
        _guard(failures, "fairness_report.json",
               lambda: put("fairness_report.json", "json", data, "Report (JSON)"))
        data["artifact_failures"] = list(failures)
        _guard(failures, "fairness_report.html", lambda: put(
            "fairness_report.html", "html", render_html(data, written, outdir), "Report"))
    return written


def log_artifacts(run_id: str, outdir: str, written: list[Written]) -> dict[str, Any]:
    """Log ``outdir`` under the run's ``fairness/`` directory; return ``EvaluationArtifact``s."""
    from mlflow.models.evaluation.artifacts import (
        CsvEvaluationArtifact,
        ImageEvaluationArtifact,
        JsonEvaluationArtifact,
        TextEvaluationArtifact,
    )
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    client.log_artifacts(run_id, outdir, artifact_path=ARTIFACT_DIR)
    root = client.get_run(run_id).info.artifact_uri.rstrip("/")
    kinds = {"csv": CsvEvaluationArtifact, "json": JsonEvaluationArtifact,
             "png": ImageEvaluationArtifact, "html": TextEvaluationArtifact}
    return {w.name: kinds[w.kind](uri=f"{root}/{ARTIFACT_DIR}/{w.path}", content=w.content)
            for w in written}
