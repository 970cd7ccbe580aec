"""PredictionLogger: what a serving app calls to feed the monitor.

The app appends one row per prediction to a SQL table (created on first use) and, when ground
truth arrives, attaches it by id. The monitor's :class:`~fairmonitor.monitor.sources.SQLSource`
reads the same table. Columns::

    id          VARCHAR(64) PRIMARY KEY   (a uuid4 hex unless the app gives one)
    timestamp   DATETIME, UTC             (indexed with model)
    model       VARCHAR(200)
    version     VARCHAR(200)
    score       FLOAT                     (probability of the positive class)
    prediction  INTEGER                   (0/1)
    label       INTEGER, NULL until attach_labels
    labeled_at  DATETIME, UTC
    features    TEXT                      (JSON object of model inputs, optional)
    <one VARCHAR(200) column per sensitive feature>
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ...exceptions import InvalidInputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PredictionLogger", "prediction_table"]

_BASE_COLUMNS = ("id", "timestamp", "model", "version", "score", "prediction", "label",
                 "labeled_at", "features")


def prediction_table(metadata: Any, name: str, sensitive_features: Sequence[str]) -> Any:
    """Return the SQLAlchemy ``Table`` of logged predictions."""
    import sqlalchemy as sa

    clash = sorted(set(sensitive_features) & set(_BASE_COLUMNS))
    if clash:
        raise InvalidInputError(
            f"sensitive_features {clash} clash with the table's own columns "
            f"{list(_BASE_COLUMNS)}; rename them.")
    return sa.Table(
        name, metadata,
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("timestamp", sa.DateTime(), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("version", sa.String(200)),
        sa.Column("score", sa.Float),
        sa.Column("prediction", sa.Integer),
        sa.Column("label", sa.Integer),
        sa.Column("labeled_at", sa.DateTime()),
        sa.Column("features", sa.Text),
        *(sa.Column(c, sa.String(200)) for c in sensitive_features),
        sa.Index(f"ix_{name}_model_timestamp", "model", "timestamp"),
    )


def _naive_utc(t: datetime | None) -> datetime:
    if t is None:
        return datetime.now(UTC).replace(tzinfo=None)
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


def _binary(value: Any, name: str) -> int | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if value in (0, 1):  # True/False, 0/1, 0.0/1.0
        return int(value)
    raise InvalidInputError(f"{name} must be 0 or 1; got {value!r}.")


def _frame_column(frame: pd.DataFrame, name: str) -> pd.Series:
    """Return column ``name`` of ``frame``, or a column of None without it."""
    import pandas as pd

    return frame[name] if name in frame.columns else pd.Series([None] * len(frame),
                                                                 index=frame.index)


def _plain(series: pd.Series) -> list[Any]:
    """Return ``series`` as Python values, None where missing."""
    return series.astype(object).where(series.notna(), None).tolist()


def _frame_scores(frame: pd.DataFrame) -> pd.Series:
    """Return the ``score`` column as numbers, checked in [0, 1] (missing allowed)."""
    import pandas as pd

    score = pd.to_numeric(_frame_column(frame, "score"))
    bad = score.notna() & ~score.between(0.0, 1.0)
    if bad.any():
        raise InvalidInputError(f"score must be in [0, 1]; got {score[bad].tolist()[0]!r}.")
    return score


def _frame_binary(frame: pd.DataFrame, name: str) -> list[int | None]:
    """Return a 0/1 column (``prediction``, ``label``) as ints, None where missing."""
    import pandas as pd

    v = pd.to_numeric(_frame_column(frame, name))
    bad = v.notna() & ~v.isin((0, 1))
    if bad.any():
        raise InvalidInputError(f"{name} must be 0 or 1; got {v[bad].tolist()[0]!r}.")
    return [None if x is None else int(x) for x in _plain(v)]


def _frame_stamps(frame: pd.DataFrame, now: datetime, *, sqlite: bool) -> list[Any]:
    """Return the rows' UTC times (``now`` without a ``timestamp`` column), as stored."""
    from .base import to_utc

    if "timestamp" not in frame.columns:
        return [now] * len(frame)
    ts = to_utc(frame["timestamp"]).dt.tz_localize(None).dt.floor("us")
    if sqlite:  # SQLAlchemy's storage format
        return ts.dt.strftime("%Y-%m-%d %H:%M:%S.%f").tolist()
    return list(ts.dt.to_pydatetime())


def _frame_ids(frame: pd.DataFrame) -> list[str]:
    """Return the rows' ids: the ``id`` column, else a fresh UUID with the row number."""
    if "id" in frame.columns:
        return [str(v) for v in frame["id"]]
    base = uuid.uuid4().hex
    return [f"{base}-{i}" for i in range(len(frame))]


class PredictionLogger:
    """Append predictions to a SQL table and attach labels later.

    Parameters
    ----------
    url : str, default='sqlite:///predictions.db'
        SQLAlchemy URL of the database.
    model : str
        The model's monitor name (the config's ``models.<name>``).
    version : str, default=''
        The model version serving these predictions.
    sensitive_features : sequence of str
        Columns created for the sensitive attributes.
    table : str, default='predictions'

    Examples
    --------
    >>> log = PredictionLogger("sqlite://", model="credit", version="3",
    ...                        sensitive_features=["sex"])
    >>> pid = log.log({"sex": "F"}, score=0.8, prediction=1, id="req-1")
    >>> log.attach_labels(["req-1"], [0])
    1
    >>> log.close()
    """

    def __init__(self, url: str = "sqlite:///predictions.db", *, model: str,
                 version: str = "", sensitive_features: Sequence[str],
                 table: str = "predictions") -> None:
        import sqlalchemy as sa

        if isinstance(sensitive_features, str):
            sensitive_features = [sensitive_features]
        self.model = model
        self.version = str(version)
        self.sensitive_features = tuple(sensitive_features)
        self.engine = sa.create_engine(url, pool_pre_ping=True)
        metadata = sa.MetaData()
        self.table = prediction_table(metadata, table, self.sensitive_features)
        metadata.create_all(self.engine)  # no-op when the table exists
        existing = {c["name"] for c in sa.inspect(self.engine).get_columns(table)}
        missing = [c.name for c in self.table.c if c.name not in existing]
        if missing:
            raise InvalidInputError(
                f"table {table!r} exists without column(s) {missing}; use another table name "
                "or add the columns.")

    def _row(self, sensitive: Mapping[str, Any], *, score: Any, prediction: Any,
             features: Mapping[str, Any] | None, id: str | None, timestamp: datetime | None,
             version: str | None, label: Any) -> dict[str, Any]:
        missing = [c for c in self.sensitive_features if c not in sensitive]
        if missing:
            raise InvalidInputError(f"sensitive values for {missing} are missing; got "
                                    f"{sorted(sensitive)}.")
        if score is None and prediction is None:
            raise InvalidInputError("give a score, a prediction or both.")
        if score is not None:
            score = float(score)
            if not 0.0 <= score <= 1.0:
                raise InvalidInputError(f"score must be in [0, 1]; got {score!r}.")
        return {
            "id": str(id) if id is not None else uuid.uuid4().hex,
            "timestamp": _naive_utc(timestamp), "model": self.model,
            "version": self.version if version is None else str(version),
            "score": score, "prediction": _binary(prediction, "prediction"),
            "label": _binary(label, "label"), "labeled_at": None if label is None else
            _naive_utc(None),
            "features": None if features is None else json.dumps(dict(features), default=str),
            **{c: str(sensitive[c]) for c in self.sensitive_features},
        }

    def log(self, sensitive: Mapping[str, Any], *, score: float | None = None,
            prediction: int | None = None, features: Mapping[str, Any] | None = None,
            id: str | None = None, timestamp: datetime | None = None,
            version: str | None = None, label: int | None = None) -> str:
        """Append one prediction; return its id (for :meth:`attach_labels`).

        ``timestamp`` defaults to now; naive times are taken as UTC.
        """
        import sqlalchemy as sa

        row = self._row(sensitive, score=score, prediction=prediction, features=features, id=id,
                        timestamp=timestamp, version=version, label=label)
        with self.engine.begin() as conn:
            conn.execute(sa.insert(self.table), [row])
        return str(row["id"])

    def log_frame(self, frame: pd.DataFrame, *, chunk_size: int = 50_000) -> int:
        """Append many predictions from a DataFrame; return the row count.

        Columns: the sensitive features, ``score`` and/or ``prediction``, and optionally
        ``timestamp`` (default now; naive = UTC), ``id`` (default generated), ``version``,
        ``label`` and ``features`` (dicts). Checked and converted column-wise, so a million
        rows take seconds, not minutes.
        """
        import sqlalchemy as sa

        columns = self._frame_columns(frame)
        n = len(frame)
        names = list(columns)
        with self.engine.begin() as conn:
            if self.engine.dialect.name == "sqlite":
                # DB-API executemany on plain tuples: SQLAlchemy's per-row parameter handling
                # costs more than SQLite's own insert
                compiled = sa.insert(self.table).compile(dialect=self.engine.dialect,
                                                         column_keys=names)
                order = compiled.positiontup or names
                cursor = conn.connection.cursor()
                rows = list(zip(*(columns[c] for c in order), strict=True))
                for a in range(0, n, chunk_size):
                    cursor.executemany(str(compiled), rows[a:a + chunk_size])
                cursor.close()
            else:  # SQLAlchemy batches these into multi-row INSERTs ("insertmanyvalues")
                for a in range(0, n, chunk_size):
                    conn.execute(sa.insert(self.table), [
                        dict(zip(names, r, strict=True))
                        for r in zip(*(columns[c][a:a + chunk_size] for c in names), strict=True)])
        return n

    def _frame_columns(self, frame: pd.DataFrame) -> dict[str, list[Any]]:
        """Return the table's columns for ``frame``'s rows, validated, as Python value lists."""
        n = len(frame)
        missing = [c for c in self.sensitive_features if c not in frame.columns]
        if missing:
            raise InvalidInputError(f"sensitive values for {missing} are missing; got columns "
                                    f"{[str(c) for c in frame.columns]}.")
        if "score" not in frame.columns and "prediction" not in frame.columns:
            raise InvalidInputError("give a score column, a prediction column or both.")
        score = _frame_scores(frame)
        binary = {name: _frame_binary(frame, name) for name in ("prediction", "label")}
        for c in self.sensitive_features:
            if frame[c].isna().any():
                raise InvalidInputError(f"sensitive feature {c!r} has missing values; fill them "
                                        "with an explicit category such as 'unknown'.")
        sqlite = self.engine.dialect.name == "sqlite"
        now = _naive_utc(None)
        features = [None if not isinstance(v, dict) else json.dumps(v, default=str)
                    for v in _frame_column(frame, "features")]
        labeled = binary["label"]
        # SQLAlchemy's storage format on SQLite
        labeled_at: Any = now.strftime("%Y-%m-%d %H:%M:%S.%f") if sqlite else now
        return {
            "id": _frame_ids(frame), "timestamp": _frame_stamps(frame, now, sqlite=sqlite),
            "model": [self.model] * n,
            "version": ([str(v) for v in frame["version"]] if "version" in frame.columns
                        else [self.version] * n),
            "score": _plain(score), "prediction": binary["prediction"], "label": labeled,
            "labeled_at": [None if v is None else labeled_at for v in labeled],
            "features": features,
            **{c: frame[c].astype(str).tolist() for c in self.sensitive_features},
        }

    def attach_labels(self, ids: Sequence[str], labels: Sequence[int], *,
                      labeled_at: datetime | None = None) -> int:
        """Set the label of the rows with these ids; return how many rows were updated."""
        import sqlalchemy as sa

        ids, labels = list(ids), list(labels)
        if len(ids) != len(labels):
            raise InvalidInputError(f"ids has {len(ids)} items but labels has {len(labels)}; "
                                    "pass one label per id.")
        if not ids:
            return 0
        at = _naive_utc(labeled_at)
        params = [{"b_id": str(i), "b_label": _binary(v, "label"), "b_at": at}
                  for i, v in zip(ids, labels, strict=True)]
        stmt = (sa.update(self.table).where(self.table.c.id == sa.bindparam("b_id"))
                .values(label=sa.bindparam("b_label"), labeled_at=sa.bindparam("b_at")))
        with self.engine.begin() as conn:
            result = conn.execute(stmt, params)
        return int(result.rowcount)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def __enter__(self) -> PredictionLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
