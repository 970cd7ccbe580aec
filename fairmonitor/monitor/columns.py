"""The columns a model's config names, checked against what its source has.

A typo in a column name (``label: outcomes``) or a column the source dropped used to surface as
a bare ``KeyError: 'outcomes'`` in every window, while ``--check`` said OK. Two checks share
one list of the configured columns (:func:`configured_columns`):

- :func:`frame_problem`, in every window: a configured column missing from the rows (or, for a
  SQL source, from the table) is a data error naming the column, its config key, the
  available columns and the fix; the job keeps the window's watermark so the window is
  evaluated once the config is fixed;
- :func:`source_problems`, for ``fairmonitor monitor --check``: the table or files exist and
  hold every configured column, with a plausible type (:func:`type_problem`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .sources.base import SOURCE_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

    from .config import ModelConfig

__all__ = ["SOURCE_COLUMNS", "configured_columns", "feature_columns", "frame_problem",
           "missing_message", "source_problems", "type_problem"]


def feature_columns(cfg: ModelConfig, columns: Any) -> list[str]:
    """Return the feature columns the model's metrics read among ``columns`` (none: no X).

    The configured ``features``, else every column that is not bookkeeping (timestamp, model,
    version, ids, label, score, prediction, a multiclass model's class scores, sensitive
    features).
    """
    if not cfg.needs_features:
        return []  # X is only materialised for metrics that read it
    if cfg.features:
        return list(cfg.features)
    src = cfg.source
    bookkeeping = {src.timestamp_column, src.model_column, src.version_column,
                   src.features_column, "id", "labeled_at", cfg.label, cfg.score,
                   cfg.prediction, *cfg.sensitive_features, *cfg.class_scores.values()}
    return [c for c in columns if c not in bookkeeping]


def configured_columns(cfg: ModelConfig, *, labels: bool = True, features: bool = True
                       ) -> Iterator[tuple[str, str, str]]:
    """(config key, column, role) of every column the model reads, in config order.

    ``labels=False`` leaves the label out (a phase that does not read it); ``features=False``
    the explicit feature columns (they may come from a JSON column the source expands).

    >>> from fairmonitor.monitor.config import load_config
    >>> cfg = load_config('''
    ... models:
    ...   credit:
    ...     source: {kind: sql, url: "sqlite://"}
    ...     sensitive_features: [sex]
    ...     prediction: prediction
    ...     label: outcomes
    ...     window: 1h
    ...     metrics: [equalized_odds_difference]
    ... ''').models["credit"]
    >>> [key for key, _, _ in configured_columns(cfg)]
    ['source.timestamp_column', 'prediction', 'label', 'sensitive_features[0]']
    """
    yield "source.timestamp_column", cfg.source.timestamp_column, "timestamp"
    for key in ("score", "prediction", "label"):
        column = getattr(cfg, key)
        if column is not None and (labels or key != "label"):
            yield key, column, key
    for label, column in cfg.class_scores.items():  # task: multiclass
        yield f"scores.{label}", column, "score"
    for i, column in enumerate(cfg.sensitive_features):
        yield f"sensitive_features[{i}]", column, "sensitive feature"
    if features and cfg.needs_features:
        for i, column in enumerate(cfg.features or ()):
            yield f"features[{i}]", column, "feature"


def missing_message(cfg: ModelConfig, missing: list[tuple[str, str, str]],
                    available: list[str], where: str = "the source") -> str:
    """One line naming each missing column, its key, the available columns and the fix.

    >>> from types import SimpleNamespace as NS
    >>> missing_message(NS(name="credit"), [("label", "outcomes", "label")],
    ...                 ["timestamp", "sex", "label"])  # doctest: +NORMALIZE_WHITESPACE
    "models.credit.label: label column 'outcomes' is not in the source; available columns:
     ['timestamp', 'sex', 'label']. Fix models.credit.label in the config (or add the column
     to the source); the windows wait for the fix (at most catch_up of them are then
     evaluated)."
    """
    keys = [f"models.{cfg.name}.{key}" for key, _, _ in missing]
    named = "; ".join(f"models.{cfg.name}.{key}: {role} column {column!r} is not in {where}"
                      for key, column, role in missing)
    return (f"{named}; available columns: {list(available)}. Fix {', '.join(keys)} in the "
            "config (or add the column to the source); the windows wait for the fix (at most "
            "catch_up of them are then evaluated).")


def frame_problem(cfg: ModelConfig, frame: pd.DataFrame, *, labels: bool) -> str | None:
    """Return the data error of a window whose rows lack a configured column (None: all there).

    A SQL source reads only the configured columns and lists its table's columns in
    ``frame.attrs[SOURCE_COLUMNS]``; then a missing column is known even without rows. Other
    sources are judged on their rows only (an empty file listing says nothing).
    """
    schema = frame.attrs.get(SOURCE_COLUMNS)
    if schema is None and len(frame) == 0:
        return None
    have = set(frame.columns) | set(schema or ())
    # explicit features may be keys of a JSON column, expanded only when there are rows
    missing = [c for c in configured_columns(cfg, labels=labels, features=len(frame) > 0)
               if c[1] not in have]
    if not missing:
        return None
    available = list(schema) if schema is not None else [str(c) for c in frame.columns]
    return missing_message(cfg, missing, available)


#: what each role accepts, by pandas/numpy dtype kind ("O": text, checked on values at runtime)
_KINDS = {"timestamp": "MOUS", "score": "fiuO", "prediction": "biufO", "label": "biufO"}


def type_problem(role: str, column: str, kind: str) -> str | None:
    """Why a column's type cannot hold its role (None: plausible).

    ``kind`` is a numpy dtype kind: ``b`` bool, ``i``/``u`` integers, ``f`` floats, ``M``
    datetimes, ``O``/``U``/``S`` text or objects (checked value by value when read).

    >>> type_problem("score", "score", "M")
    "score column 'score' holds datetimes; expected numbers in [0, 1]"
    >>> type_problem("label", "label", "i") is None
    True
    """
    accepted = _KINDS.get(role)
    if accepted is None or kind in accepted:
        return None
    names = {"M": "datetimes", "b": "booleans", "i": "integers", "u": "integers",
             "f": "floats", "m": "durations"}
    expected = {"timestamp": "a timestamp (or ISO 8601 text)",
                "score": "numbers in [0, 1]", "prediction": "0/1 or true/false",
                "label": "0/1 or true/false"}[role]
    return f"{role} column {column!r} holds {names.get(kind, kind)}; expected {expected}"


def source_problems(cfg: ModelConfig) -> list[str]:
    """Return what ``--check`` finds wrong between a model's config and its source (empty: OK).

    Connects to the source: a SQL table is reflected (no row is read), a file source's first
    matching file gives the schema (Parquet metadata, or a CSV's first rows). Spark sources are
    not opened (a session is too heavy for a check): their columns are checked on the first
    window.
    """
    at = f"models.{cfg.name}.source"
    try:
        found = _schema(cfg)
    except _Unavailable as exc:
        return [f"{at}: {exc}"]
    if found is None:
        return []
    kinds, where = found
    # the explicit features may be keys of a JSON column: checked on the first window then
    json_features = bool(cfg.source.features_column and cfg.source.features_column in kinds)
    missing = [c for c in configured_columns(cfg, features=not json_features)
               if c[1] not in kinds]
    problems = [missing_message(cfg, missing, list(kinds), where)] if missing else []
    for key, column, role in configured_columns(cfg):
        why = type_problem(role, column, kinds[column]) if column in kinds else None
        if why is not None:
            problems.append(f"models.{cfg.name}.{key}: {why} in {where}")
    return problems


#: seconds ``--check`` waits for a SQL source to answer
CHECK_TIMEOUT = 15.0


class _Unavailable(Exception):
    """The source cannot be opened (a problem of its own for ``--check``)."""


def _schema(cfg: ModelConfig) -> tuple[dict[str, str], str] | None:
    """Return the source's columns with their dtype kinds and where they are (None: unknown)."""
    src = cfg.source
    if src.kind == "sql":
        return _sql_schema(cfg)
    if src.kind == "files":
        return _file_schema(cfg)
    return None


def _sql_schema(cfg: ModelConfig) -> tuple[dict[str, str], str]:
    import sqlalchemy as sa

    from .redact import mask_url
    from .sources import engine_options
    from .sources.deadline import existing_sqlite

    src = cfg.source
    assert src.url is not None
    where = f"table {src.table!r} at {mask_url(src.url)}"
    # a check answers in seconds: an unreachable host is a problem, not a 5-minute wait
    timeout = min(src.timeout.total_seconds(), CHECK_TIMEOUT)
    engine = sa.create_engine(src.url, **engine_options(src.url, timeout),
                              **existing_sqlite(src.url))
    try:
        inspector = sa.inspect(engine)
        if not inspector.has_table(src.table):
            tables = inspector.get_table_names()
            raise _Unavailable(f"{where}: no such table; tables: {tables}")
        columns = inspector.get_columns(src.table)
    except sa.exc.SQLAlchemyError as exc:
        raise _Unavailable(f"cannot connect to {mask_url(src.url)}: {type(exc).__name__}: "
                           f"{str(exc).splitlines()[0]}") from None
    finally:
        engine.dispose()
    return {str(c["name"]): _sql_kind(c["type"]) for c in columns}, where


def _sql_kind(sql_type: Any) -> str:
    """Return a SQL column type as a numpy dtype kind (``O`` when unknown: checked on values)."""
    import sqlalchemy as sa

    for cls, kind in ((sa.Boolean, "b"), (sa.Integer, "i"), (sa.Float, "f"),
                      (sa.Numeric, "f"), (sa.DateTime, "M"), (sa.Date, "M")):
        if isinstance(sql_type, cls):
            return kind
    return "O"


def _file_schema(cfg: ModelConfig) -> tuple[dict[str, str], str]:
    import pandas as pd

    src = cfg.source
    assert src.path is not None
    if not src.path.is_dir():
        raise _Unavailable(f"directory not found: {src.path}")
    first = next((f for f in sorted(src.path.glob(src.pattern)) if f.is_file()), None)
    if first is None:
        raise _Unavailable(f"no file matches {src.pattern!r} under {src.path}")
    try:
        if first.name.endswith((".csv", ".csv.gz")):
            frame = pd.read_csv(first, nrows=100)
        else:
            import pyarrow.parquet as pq

            frame = pq.read_schema(first).empty_table().to_pandas()
    except Exception as exc:  # pyarrow and the csv parser raise many types
        raise _Unavailable(f"cannot read {str(first)!r}: {exc}") from None
    return _frame_kinds(frame), f"{str(first)!r} (the first file of {src.pattern!r})"


def _frame_kinds(frame: pd.DataFrame) -> dict[str, str]:
    import pandas as pd

    out: Mapping[str, Any] = frame.dtypes.to_dict()
    return {str(k): ("M" if isinstance(v, pd.DatetimeTZDtype) else
                     "O" if isinstance(v, pd.StringDtype | pd.CategoricalDtype)
                     else getattr(v, "kind", "O")) for k, v in out.items()}
