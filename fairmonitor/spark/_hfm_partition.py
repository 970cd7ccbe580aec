"""What runs on the executors for HFM's sampled average: pick query rows, scan them exactly.

No pyspark import here. Both functions are given to ``DataFrame.mapInPandas`` with an
:class:`HFMPlan` (what the driver learned in its aggregate pass) bound in the closure:

* :func:`query_candidates` hashes every row (:func:`fairmonitor.utils.rowkeys.row_keys`, a
  process-independent hash of the row's values) with a salt per attribute and keeps, per window
  and attribute, the ``q`` kept rows with the smallest keys; the driver keeps the ``q``
  smallest of all partitions': a uniform sample without replacement that does not depend on
  the partitioning.
* :func:`scan_partition` measures every query row against this partition's rows with
  :func:`fairmonitor.metrics._hfm.sampled.nearest_sqdist`, the function the single-process
  estimator calls, on features scaled with the minima and spans of all rows
  (:func:`~fairmonitor.metrics._hfm.exact.scale_columns`): each partition's minimum squared
  distance is the single-process one restricted to these rows, bit for bit, and the minimum
  over partitions is the single-process distance.

Columns arrive under the internal names of :class:`HFMPlan` (``SENS``, ``LABEL``, ...).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..metrics.shared import FeatureSpace, nearest_sqdist, scale_columns
from ..utils.groups import factorize
from ..utils.rowkeys import row_keys as _row_keys
from ..utils.rowkeys import splitmix as _splitmix
from ._partition import KEY

__all__ = ["LABEL", "PRED", "HFMPlan", "WindowPlan", "attribute_salt", "query_candidates",
           "scan_partition"]

#: Internal column names: the i-th sensitive column, feature and hash-only column.
LABEL, PRED = "__fm_y__", "__fm_p__"
ATTR, HASH, QUERY, TRUE, MODEL = "__fm_attr__", "__fm_hash__", "__fm_query__", "__fm_t__", \
    "__fm_m__"


def sens(i: int) -> str:
    """Return the internal name of the i-th sensitive column."""
    return f"__fm_s{i}__"


def feat(i: int) -> str:
    """Return the internal name of the i-th feature column."""
    return f"__fm_f{i}__"


def extra(i: int) -> str:
    """Return the internal name of the i-th column that only makes rows' hashes distinct."""
    return f"__fm_h{i}__"


@dataclass(frozen=True)
class WindowPlan:
    """What the driver knows of one window after its aggregate pass."""

    #: minimum and ``max - min`` of every numeric feature over the window's rows
    lo: NDArray[np.float64]
    span: NDArray[np.float64]
    #: the classes of the labels and predictions together, sorted (their codes 0..K-1)
    classes: NDArray[Any]
    #: per attribute: the values of groups left out by ``min_group_size``
    excluded: tuple[tuple[Any, ...], ...]
    #: per attribute: query rows to draw (0: the attribute is not measured)
    n_queries: tuple[int, ...]
    #: per attribute: the query rows (internal column name -> values), for the scan
    queries: tuple[Mapping[str, NDArray[Any]] | None, ...] = ()


@dataclass(frozen=True)
class HFMPlan:
    """Everything an executor needs (pickled once per task)."""

    n_sensitive: int
    #: per feature: numeric (True) or categorical (False)
    numeric: tuple[bool, ...]
    n_extra: int
    #: per attribute: the salt of its row hashes (independent samples per attribute)
    salts: tuple[int, ...]
    windows: Mapping[Any, WindowPlan] = field(default_factory=dict)


def attribute_salt(seed: int, name: str) -> int:
    """Return the 64-bit salt of attribute ``name``'s row hashes under ``seed``."""
    mixed = np.array([(int(seed) & (2**64 - 1)) ^ zlib.crc32(name.encode())], dtype=np.uint64)
    return int(_splitmix(mixed)[0])


def _frame(batches: Iterator[Any]) -> Any:
    import pandas as pd

    frames = [b for b in batches if len(b)]
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _text_as_objects(frame: Any) -> Any:
    """Text columns as Python objects.

    Arrow-backed strings (pandas 3) come out of a concat or a take chunked, which pyspark's
    conversion back to Arrow does not accept.
    """
    import pandas as pd

    return frame.astype({c: object for c in frame.columns
                         if pd.api.types.is_string_dtype(frame[c].dtype)})


def _hashed_columns(plan: HFMPlan) -> list[str]:
    return ([sens(i) for i in range(plan.n_sensitive)] + [LABEL, PRED]
            + [feat(i) for i in range(len(plan.numeric))]
            + [extra(i) for i in range(plan.n_extra)])


_TOP_BIT = np.uint64(1 << 63)


def _kept(values: NDArray[Any], excluded: tuple[Any, ...]) -> NDArray[np.bool_]:
    if not excluded:
        return np.ones(len(values), dtype=bool)
    import pandas as pd

    return ~pd.Series(values).isin(list(excluded)).to_numpy()


def _planned_windows(plan: HFMPlan, batches: Iterator[Any]) -> Iterator[tuple[WindowPlan, Any]]:
    """Yield the partition's rows, one frame per window the plan knows (others are skipped)."""
    frame = _frame(batches)
    if frame is None:
        return
    for key, part in frame.groupby(KEY, sort=False):
        w = plan.windows.get(key)
        if w is not None:
            yield w, part


def query_candidates(plan: HFMPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInPandas`` function: this partition's candidate query rows.

    Per window and attribute, the ``q`` rows of smallest salted hash among the attribute's
    kept rows: the columns as given, plus ``ATTR`` and ``HASH`` (the key with its top bit
    flipped, as a signed 64-bit integer: Spark's signed order of it is the keys' unsigned
    order, so the executors can rank the candidates).
    """
    import pandas as pd

    out = []
    for w, part in _planned_windows(plan, batches):
        part = part.reset_index(drop=True)
        base = _row_keys({c: part[c].to_numpy() for c in _hashed_columns(plan)}, len(part))
        for s, q in enumerate(w.n_queries):
            if not q:
                continue
            rows = np.flatnonzero(_kept(part[sens(s)].to_numpy(), w.excluded[s]))
            keys = _splitmix(base[rows] ^ np.uint64(plan.salts[s]))
            if rows.size > q:
                pick = np.argpartition(keys, q - 1)[:q]
                rows, keys = rows[pick], keys[pick]
            chosen = part.iloc[rows].copy()
            chosen[ATTR] = np.int32(s)
            chosen[HASH] = (keys ^ _TOP_BIT).view(np.int64)
            out.append(chosen)
    if out:
        yield _text_as_objects(pd.concat(out, ignore_index=True))


def _codes(values: NDArray[Any], classes: NDArray[Any]) -> NDArray[np.float64]:
    """Class codes 0..K-1 of ``values`` among the sorted ``classes``, as floats."""
    if classes.dtype.kind == "f":
        return np.searchsorted(classes, np.asarray(values, dtype=np.float64)).astype(np.float64)
    return np.searchsorted(classes, np.asarray(values).astype(str)).astype(np.float64)


def _space(plan: HFMPlan, w: WindowPlan, parts: list[Mapping[str, NDArray[Any]]]
           ) -> FeatureSpace:
    """Build the feature space of the rows of ``parts``, one after the other."""
    numeric, codes, levels = [], [], []
    for i, is_num in enumerate(plan.numeric):
        col = np.concatenate([np.asarray(p[feat(i)]) for p in parts])
        if is_num:
            numeric.append(col.astype(np.float64))
        else:
            uniques, inverse = factorize(col.astype(object))
            codes.append(inverse)
            levels.append(uniques.size)
    n = sum(len(p[LABEL]) for p in parts)
    num = np.column_stack(numeric) if numeric else np.empty((n, 0))
    if num.shape[1]:
        num = scale_columns(num, w.lo, w.span)
    cat = np.column_stack(codes).astype(np.intp) if codes else np.empty((n, 0), dtype=np.intp)
    return FeatureSpace.build(num, cat, tuple(levels))


def scan_partition(plan: HFMPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInPandas`` function: each query row's nearest rows of this partition.

    The minimum squared distance to this partition's kept rows of another group, with the
    labels and with the predictions.

    One output row per window, attribute and query row: ``(KEY, ATTR, QUERY, TRUE, MODEL)``
    (``inf`` where this partition holds no row of another group).
    """
    import pandas as pd

    out = []
    for w, part in _planned_windows(plan, batches):
        columns = {c: part[c].to_numpy() for c in part.columns}
        for s, queries in enumerate(w.queries):
            if queries is None or not len(queries[LABEL]):
                continue
            kept = _kept(columns[sens(s)], w.excluded[s])
            rows = {c: v[kept] for c, v in columns.items()}
            q = len(queries[LABEL])
            space = _space(plan, w, [queries, rows])
            both = {c: np.concatenate([np.asarray(queries[c]), rows[c]])
                    for c in (LABEL, PRED, sens(s))}
            group = factorize(both[sens(s)].astype(object))[1]
            d2 = nearest_sqdist(space, _codes(both[LABEL], w.classes),
                                _codes(both[PRED], w.classes), group, np.arange(q),
                                np.arange(q, q + int(kept.sum())))
            out.append(pd.DataFrame({KEY: np.repeat(part[KEY].iloc[0], q),
                                     ATTR: np.full(q, s, dtype=np.int32),
                                     QUERY: np.arange(q, dtype=np.int32),
                                     TRUE: d2[0], MODEL: d2[1]}))
    if out:
        yield _text_as_objects(pd.concat(out, ignore_index=True))
