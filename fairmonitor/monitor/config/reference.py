"""The config reference: every key of the monitor YAML with its default and meaning.

The README's reference table is :func:`markdown` verbatim, and the tests check that this list
names exactly the keys the schema reads (:mod:`.schema`) with the defaults of the dataclasses
(:mod:`.model`), so the documentation cannot drift from the code.

>>> print(markdown().splitlines()[2])
| `listen_address` | `127.0.0.1:9464` | host:port of the Prometheus `/metrics` endpoint |
"""

from __future__ import annotations

__all__ = ["ENTRIES", "markdown"]

#: (section, key, default as written in YAML, meaning). Sections: "" (top level),
#: "checkpoint", "models.<name>", "models.<name>.source", "models.<name>.thresholds.<metric>",
#: "models.<name>.reference", "models.<name>.summaries", "models.<name>.alerting.budget",
#: "models.<name>.alert_windows".
ENTRIES: tuple[tuple[str, str, str, str], ...] = (
    ("", "listen_address", "127.0.0.1:9464", "host:port of the Prometheus `/metrics` endpoint"),
    ("", "checkpoint", "fairmonitor-checkpoint.json",
     "progress store: a file path, a SQLAlchemy URL or a mapping (below)"),
    ("", "mlflow_spool", "fairmonitor-mlflow-pending.jsonl",
     "journal of MLflow values not yet written; default beside a checkpoint file, none with a "
     "SQL checkpoint; `null`: memory only"),
    ("", "catch_up", "100", "most missed windows evaluated per model and phase in one tick"),
    ("", "timezone", "UTC", "window grid time zone (only UTC)"),
    ("", "tick", "the shortest `every`",
     "retry interval for windows a fault left due (windows are evaluated when they close)"),
    ("", "mlflow_timeout", "10s", "most time per MLflow request (no retries within a tick)"),
    ("", "models", "required", "mapping of model name (the source's `model` value) to settings"),
    ("checkpoint", "kind", "file", "`file` or `sql`"),
    ("checkpoint", "path", "fairmonitor-checkpoint.json", "JSON file (kind file)"),
    ("checkpoint", "url", "-", "SQLAlchemy URL (kind sql)"),
    ("checkpoint", "table", "fairmonitor_checkpoint", "table name (kind sql)"),
    ("checkpoint", "lease", "30s",
     "leadership lease: one active monitor per checkpoint, a standby takes over within it "
     "(docs/high-availability.md)"),
    ("models.<name>", "model", "-",
     "registered MLflow model: `models:/name@alias`, `models:/name/3`, a name, or a mapping"),
    ("models.<name>", "tracking_uri", "sqlite:///mlflow.db", "MLflow tracking URI"),
    ("models.<name>", "experiment", "fairmonitor-<name>", "MLflow experiment of the runs"),
    ("models.<name>", "source", "required", "where the logged predictions are (below)"),
    ("models.<name>", "sensitive_features", "required", "sensitive attribute columns"),
    ("models.<name>", "label", "-", "ground-truth column (0/1)"),
    ("models.<name>", "score", "-", "score column (probability of the positive class)"),
    ("models.<name>", "prediction", "-", "prediction column (0/1); `score` or `prediction` is "
     "required"),
    ("models.<name>", "features", "all other columns", "feature columns (metrics that read X)"),
    ("models.<name>", "decision_threshold", "0.5", "prediction = score >= threshold when only "
     "scores are given"),
    ("models.<name>", "window", "required", "window length, e.g. `1h`"),
    ("models.<name>", "every", "the window", "step between windows (sliding when shorter)"),
    ("models.<name>", "mode", "tumbling if every = window", "`tumbling` or `sliding`"),
    ("models.<name>", "labels_after", "0s", "label metrics wait this long after a window ends"),
    ("models.<name>", "relabel_within", "labels_after",
     "windows with missing labels are evaluated again for this long when more labels arrive"),
    ("models.<name>", "min_label_coverage", "0.5",
     "labelled fraction a window must reach by `labels_after`; below it its labels are overdue "
     "(`FairmonitorLabelsOverdue`)"),
    ("models.<name>", "start", "latest closed window",
     "first window to evaluate (ISO 8601, UTC); earlier history is backfilled"),
    ("models.<name>", "task", "binary",
     "the kind of model: `binary` (0/1 prediction, score in [0, 1]) or `regression` "
     "(continuous prediction and label; docs/regression.md)"),
    ("models.<name>", "metrics", "required", "metric names (`fairmonitor.METRICS`)"),
    ("models.<name>", "options", "{}", "per-metric keyword arguments"),
    ("models.<name>", "min_group_size", "30", "smaller groups are left out of a metric"),
    ("models.<name>", "min_condition_size", "10",
     "groups with fewer rows of what a rate conditions on (positives for TPR, negatives for "
     "FPR, predicted positives for precision) are left out of that rate's gap"),
    ("models.<name>", "confidence_level", "0.95",
     "level of each value's confidence interval (`null`: none)"),
    ("models.<name>", "intersection", "true", "also evaluate the intersection of the attributes"),
    ("models.<name>", "seed", "0", "random seed (per window: re-evaluations give the same "
     "numbers)"),
    ("models.<name>", "thresholds", "{}", "per metric: one mapping or a list (below)"),
    ("models.<name>", "reference", "-", "reference data for new model versions (below)"),
    ("models.<name>", "missing", "group",
     "missing sensitive values: `group` (own group \"missing\"), `drop` (counted) or `raise`; "
     "or a mapping {attribute: policy}"),
    ("models.<name>", "rollups", "[]",
     "longer windows merged from the stored window summaries: durations (`[1d, 7d]`) or "
     "`{window, every}` (sliding); multiples of the (tumbling) window"),
    ("models.<name>", "summaries", "{}", "what each stored window summary keeps (below)"),
    ("models.<name>", "alert_windows", "{}",
     "consecutive windows before each alert fires, counted by the monitor (below)"),
    ("models.<name>", "alerting", "{}",
     "paging policy: `{budget: ...}`, the false-page budget of `compare: budget` (below)"),
    ("models.<name>", "task", "binary",
     "`binary` (one positive class) or `multiclass`: every class one-vs-rest, per class and "
     "the worst class (docs/multiclass.md)"),
    ("models.<name>", "classes", "the keys of `scores`",
     "multiclass: the class labels of `prediction` and `label`"),
    ("models.<name>", "scores", "{}",
     "multiclass: `{class: column}`, each class's probability column"),
    ("models.<name>", "team", "-", "routing label on every alert of the model"),
    ("models.<name>", "owner", "-", "routing label on every alert of the model"),
    ("models.<name>.source", "kind", "required", "`sql`, `files` or `spark`"),
    ("models.<name>.source", "url", "-", "SQLAlchemy URL (kind sql)"),
    ("models.<name>.source", "table", "predictions",
     "table name (kind sql; kind spark: a Hive, Unity Catalog or Delta table)"),
    ("models.<name>.source", "path", "-",
     "directory of Parquet/CSV files (kind files); Parquet path or URL (kind spark)"),
    ("models.<name>.source", "master", "-",
     "kind spark: master of the session to start (`local[2]`, `yarn`); default: the session "
     "spark-submit set up"),
    ("models.<name>.source", "remote", "-", "kind spark: Spark Connect URL (`sc://host:15002`)"),
    ("models.<name>.source", "date_column", "-",
     "kind spark: date partition column (`DATE` or `YYYY-MM-DD`, e.g. `dt`) of each row's "
     "date; the windows' dates (a day of slack either side) prune the partitions read"),
    ("models.<name>.source", "pattern", "**/*.parquet", "glob of the files (kind files)"),
    ("models.<name>.source", "timestamp_column", "timestamp", "UTC time of each prediction"),
    ("models.<name>.source", "model_column", "model", "model name column (`null`: one model)"),
    ("models.<name>.source", "version_column", "version", "model version column"),
    ("models.<name>.source", "features_column", "features", "JSON column of model inputs"),
    ("models.<name>.source", "timeout", "5m", "most time one window's fetch may take"),
    ("models.<name>.summaries", "max_raw", "8192",
     "groups up to this many rows keep raw sorted scores, larger ones a fixed count+sum "
     "histogram (exact parity and MADD, ABCC within a certified 1e-6)"),
    ("models.<name>.summaries", "sample_size", "256",
     "rows kept per group for HFM and CFair on rollups (estimates); 0: none"),
    ("models.<name>.alert_windows", "warning", "3",
     "breaching windows in a row before the warning `FairnessThresholdBreached`"),
    ("models.<name>.alert_windows", "critical", "2",
     "breaching windows in a row before the critical `FairnessThresholdBreached`"),
    ("models.<name>.alert_windows", "undefined", "2",
     "undefined windows in a row before `FairnessMetricUndefined`, empty windows before "
     "`FairmonitorNoTraffic`"),
    ("models.<name>.thresholds.<metric>", "warning", "-", "warning level"),
    ("models.<name>.thresholds.<metric>", "critical", "-", "critical level"),
    ("models.<name>.thresholds.<metric>", "bound", "the metric's", "`upper` or `lower`"),
    ("models.<name>.thresholds.<metric>", "attribute", "all", "only this sensitive attribute"),
    ("models.<name>.thresholds.<metric>", "against_direction", "false",
     "allow a bound on the fair side of the metric (e.g. `upper` on a ratio)"),
    ("models.<name>.thresholds.<metric>", "compare", "value",
     "`value`; `bound`: the confidence bound on the unfair side (one window's evidence); "
     "`budget`: sequential evidence within the model's false-page budget (recommended, "
     "docs/alert-modes.md); one-window reports compare its bound"),
    ("models.<name>.alerting.budget", "false_pages", "1",
     "expected false pages of the whole model per `per` (over all its budget series)"),
    ("models.<name>.alerting.budget", "per", "90d", "the budget's period"),
    ("models.<name>.alerting.budget", "null_fraction", "0.5",
     "gap (fraction of the threshold; of `1 - level` for a ratio) counted as fair"),
    ("models.<name>.alerting.budget", "alternative_fraction", "1.5",
     "gap (fraction of the threshold) that must page within a few windows"),
    ("models.<name>.alerting.budget", "calibration", "overshoot",
     "`overshoot`: page level corrected for the statistic's overshoot (budget met, not "
     "undershot); `ville`: Ville's bound alone (docs/alert-modes.md)"),
    ("models.<name>.reference", "path", "required", "Parquet or CSV file"),
    ("models.<name>.reference", "metrics", "all that apply", "metrics on the reference data"),
    ("models.<name>.reference", "label", "-", "label column"),
    ("models.<name>.reference", "score", "-",
     "score column (default: the model's own; none with task: regression)"),
    ("models.<name>.reference", "prediction", "-", "prediction column (default: the model's)"),
    ("models.<name>.reference", "features", "-", "feature columns"),
)


def markdown() -> str:
    """Return the reference as one Markdown table (the README's copy is checked against it)."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for section, key, default, meaning in ENTRIES:
        path = f"{section}.{key}" if section else key
        rows.append(f"| `{path}` | `{default}` | {meaning} |")
    return "\n".join(rows) + "\n"
