"""Turn ``sensitive_features`` into integer group codes.

Every metric calls :func:`encode_groups` once. It accepts what fairlearn accepts (a 1-D
array, list or Series for one attribute; a DataFrame, a dict of columns or a 2-D array for
several) and, with several columns, groups rows by the **intersection** of the attributes.
Pandas objects are handled by duck typing (``.columns``, ``.name``), so this module imports
only numpy.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import check_positive_int, first_rows, format_labels
from ..exceptions import GroupExclusionWarning, InvalidInputError

__all__ = ["MISSING_LABEL", "MISSING_POLICIES", "Groups", "apply_missing_policy",
           "contiguous_groups", "encode_attributes", "encode_groups", "missing_mask",
           "outcome_counts", "sensitive_columns"]

#: Separator between attribute names of an intersection, e.g. ``"sex:race"``. A colon is
#: allowed in MLflow metric keys and Prometheus label values, and rarely in column names.
INTERSECTION_SEPARATOR = ":"


@dataclass(frozen=True, slots=True)
class Groups:
    """Group codes for one (possibly intersectional) sensitive attribute.

    Attributes
    ----------
    codes : ndarray of shape (n_samples,)
        Group index of each row in ``0..n_groups-1``; ``-1`` marks rows of excluded groups.
    labels : tuple
        The label of each kept group (a tuple of values for an intersection), sorted.
    counts : ndarray of shape (n_groups,)
        Rows per kept group.
    name : str
        Attribute name, ``"a:b"`` for an intersection.
    excluded : dict
        Excluded group label -> row count (groups below ``min_group_size``).
    """

    codes: NDArray[np.intp]
    labels: tuple[Any, ...]
    counts: NDArray[np.intp]
    name: str
    excluded: Mapping[Any, int]
    #: True if the rows are ordered by group with no excluded row (codes 0..0, 1..1, ...):
    #: splitting is then slicing. Set by :func:`contiguous_groups`.
    contiguous: bool = False

    @property
    def n_groups(self) -> int:
        """Number of kept groups."""
        return len(self.labels)

    def two_group_reason(self) -> str | None:
        """Why a between-group metric is undefined on these groups, or None if it is not."""
        return require_two_groups(self.name, self.labels, self.excluded)

    def members(self, k: int) -> NDArray[np.intp]:
        """Row indices of group ``k``."""
        return np.flatnonzero(self.codes == k)

    def split(self, values: NDArray[Any]) -> list[NDArray[Any]]:
        """Split ``values`` (aligned with the rows) into one array per kept group.

        The rows of each group in row order, by a counting sort of the codes (O(n), one
        compiled pass), instead of K boolean masks (O(n K)); excluded rows (code -1) are left
        out.
        """
        if self.contiguous:  # rows already ordered by group (a summary's rows): slices
            return np.split(values, np.cumsum(self.counts)[:-1])
        kernels = _kernels()
        order = kernels.group_order(kernels.signed_codes(self.codes), self.counts,
                                    np.empty(int(self.counts.sum()), dtype=np.intp))
        return np.split(values[order], np.cumsum(self.counts)[:-1])


def column_values(col: Any) -> NDArray[Any]:
    """Return a column as a 1-D array; a long DataFrame text column as a few shared objects.

    pandas 3 reads text (Parquet, SQL, CSV) as arrow-backed strings, and ``to_numpy()`` gives
    every row a new ``str`` object. Encoding such a column then compares every row's value
    (:func:`_hash_codes`), ~0.7 s at 10^7 rows; the column's own ``factorize`` (pandas'
    hash table in C) and one object per distinct value cost a third of that and let the
    encoding work by object identity. Duck-typed on ``factorize``: no pandas import here.
    Other inputs (numbers, numpy arrays, lists, short columns) are ``np.asarray(col)``.

    >>> column_values(["a", "b"]).tolist()
    ['a', 'b']
    """
    factorize = getattr(col, "factorize", None)
    if factorize is None or getattr(getattr(col, "dtype", None), "kind", "") != "O":
        return np.asarray(col)
    codes, uniques = factorize(use_na_sentinel=True)
    values = np.asarray(uniques)
    if values.dtype != object or values.ndim != 1:  # a categorical of numbers: numbers
        return np.asarray(col)
    # a missing value (code -1) becomes None: every missing-value policy treats it as NaN/NA
    return np.append(values, None)[np.asarray(codes)]


def sensitive_columns(sensitive_features: Any, *,
                      check_missing: bool = True) -> dict[str, NDArray[Any]]:
    """Normalise ``sensitive_features`` into an ordered ``{name: 1-D array}`` mapping.

    Missing values raise unless ``check_missing=False`` (then
    :func:`apply_missing_policy` decides).

    >>> sensitive_columns(["a", "b"])
    {'sensitive_feature_0': array(['a', 'b'], dtype='<U1')}
    >>> list(sensitive_columns({"sex": [0, 1], "race": [1, 1]}))
    ['sex', 'race']
    """
    if sensitive_features is None:
        raise InvalidInputError("`sensitive_features` is required; got None.")
    if hasattr(sensitive_features, "columns"):  # DataFrame
        columns = {str(c): column_values(sensitive_features[c])
                   for c in sensitive_features.columns}
    elif isinstance(sensitive_features, Mapping):
        columns = {str(k): column_values(v) for k, v in sensitive_features.items()}
    else:
        arr = column_values(sensitive_features)
        name = getattr(sensitive_features, "name", None)
        if arr.ndim == 1:
            columns = {str(name) if name is not None else "sensitive_feature_0": arr}
        elif arr.ndim == 2:
            columns = {f"sensitive_feature_{j}": arr[:, j] for j in range(arr.shape[1])}
        else:
            raise InvalidInputError(
                "`sensitive_features` must be 1-D (one attribute) or 2-D / a DataFrame / "
                f"a dict of columns (several attributes); got shape {arr.shape}."
            )
    if not columns:
        raise InvalidInputError("`sensitive_features` has no columns.")
    for name, col in columns.items():
        if col.ndim != 1:
            raise InvalidInputError(
                f"sensitive feature '{name}' must be 1-D; got shape {col.shape}."
            )
        if check_missing:
            _check_no_missing(col, name)
    lengths = {len(c) for c in columns.values()}
    if len(lengths) > 1:
        sizes = ", ".join(f"'{k}': {len(v)}" for k, v in columns.items())
        raise InvalidInputError(f"sensitive feature columns differ in length ({sizes}).")
    return columns


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and NaT are the values unequal to themselves
    except TypeError:  # pandas.NA: its comparisons return NA, whose truth value raises
        return True


def missing_mask(col: NDArray[Any]) -> NDArray[np.bool_]:
    """Mark where ``col`` holds a missing value: NaN, None, NaT or ``pandas.NA``.

    >>> missing_mask(np.array(["a", None, float("nan")], dtype=object)).tolist()
    [False, True, True]
    """
    if col.dtype.kind in "fc":
        return np.isnan(col)
    if col.dtype.kind in "mM":
        return np.isnat(col)
    if col.dtype.kind == "O":
        # one look at each distinct object instead of two comparisons per row (None: a new
        # object per row, where the comparisons below are the cheaper way)
        found = _kernels().identity_codes(col)
        if found is not None:
            by_object, first = found
            flags = np.fromiter(map(_is_missing, col[first].tolist()), dtype=bool,
                                count=first.size)
            return flags[by_object] if flags.any() else np.zeros(col.size, dtype=bool)
        try:
            # two C loops (x != x marks NaN and NaT, x == None marks None): ~4x faster than a
            # Python call per value on the usual all-string column
            mask = np.not_equal(col, col).astype(bool)
            mask |= np.equal(col, None)
            return mask
        except TypeError:  # pandas.NA: its comparisons return NA, whose truth value raises
            return np.fromiter(map(_is_missing, col.tolist()), dtype=bool, count=len(col))
    return np.zeros(len(col), dtype=bool)


def _check_no_missing(col: NDArray[Any], name: str) -> None:
    if col.dtype.kind not in "fcmMO":  # integers, booleans, strings: nothing can be missing
        return
    missing = missing_mask(col)
    if missing.any():
        raise InvalidInputError(
            f"sensitive feature '{name}' has {int(missing.sum())} missing values (NaN/None) at "
            f"rows {first_rows(missing)}; fill them with an explicit category such as "
            "'unknown', or drop those rows (the MLflow evaluator and the monitor do either with "
            "their `missing` option: 'group' or 'drop')."
        )


def _mixed_key(v: Any) -> tuple[str, str, Any]:
    # numbers before text ("float" < "int" < "str" by name); within a type the natural order
    number = isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
    return ("0" if number else "1" + type(v).__name__, "", float(v) if number else str(v))


#: What to do with missing sensitive values (the evaluator's and the monitor's ``missing``).
MISSING_POLICIES = ("group", "drop", "raise")
#: The group label of missing values under the ``"group"`` policy.
MISSING_LABEL = "missing"


def apply_missing_policy(
    columns: Mapping[str, NDArray[Any]], policy: str | Mapping[str, str] = "raise"
) -> tuple[dict[str, NDArray[Any]], NDArray[np.bool_] | None, dict[str, tuple[str, int]]]:
    """Apply a missing-value policy to each sensitive column.

    Parameters
    ----------
    columns : mapping of str to 1-D array
        The sensitive columns (as from :func:`sensitive_columns` with ``check_missing=False``).
    policy : {'group', 'drop', 'raise'} or mapping of column name to one of them
        ``"group"``: missing values become their own group, labelled ``"missing"`` (the
        column's other values become strings, so they sort with that label); ``"drop"``: rows
        with a missing value are left out (``keep`` is False there); ``"raise"``: an error
        naming the column, the count and the first rows. A mapping sets the policy per
        column; columns it does not name use ``"raise"``.

    Returns
    -------
    columns : dict of str to ndarray
        The columns after ``"group"`` (dropped rows are still present; subset with ``keep``).
    keep : ndarray of bool or None
        Rows to keep, or None when nothing is dropped.
    missing : dict of str to (policy, count)
        The columns that had missing values, with the policy applied and how many.

    Examples
    --------
    >>> cols, keep, missing = apply_missing_policy(
    ...     {"sex": np.array(["F", None, "M"], dtype=object),
    ...      "age": np.array([30.0, 41.0, np.nan])}, {"sex": "group", "age": "drop"})
    >>> cols["sex"].tolist(), keep.tolist(), missing
    (['F', 'missing', 'M'], [True, True, False], {'sex': ('group', 1), 'age': ('drop', 1)})
    """
    out: dict[str, NDArray[Any]] = {}
    keep: NDArray[np.bool_] | None = None
    missing: dict[str, tuple[str, int]] = {}
    for name, col in columns.items():
        how = policy.get(name, "raise") if isinstance(policy, Mapping) else policy
        if how not in MISSING_POLICIES:
            raise InvalidInputError(
                f"missing: the policy for '{name}' must be one of {', '.join(MISSING_POLICIES)}"
                f"; got {how!r}.")
        mask = missing_mask(col)
        n = int(mask.sum())
        if not n:
            out[name] = col
            continue
        if how == "raise":
            _check_no_missing(col, name)
        missing[name] = (how, n)
        if how == "group":
            # strings throughout: a "missing" label cannot be sorted among numbers or booleans
            text = col.astype(str) if col.dtype.kind != "O" else np.array(
                [str(v) for v in col.tolist()], dtype=object)
            text = text.astype(object)
            text[mask] = MISSING_LABEL
            out[name] = text
        else:
            out[name] = col
            keep = ~mask if keep is None else keep & ~mask
    return out, keep, missing


def factorize(col: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.intp]]:
    """Sorted unique values and each row's index into them.

    Faster than ``np.unique(return_inverse=True)``, which argsorts the whole column: small
    non-negative integers are counted (O(n)); Python objects (strings) are hashed, then only
    the K distinct values are sorted (sorting 10^5 strings compares Python objects ~10^6
    times, 5-10x slower): long columns by object identity in one compiled pass
    (:mod:`fairmonitor._kernels.groups`), short ones by value in one dict pass; anything else
    is sorted once and looked up with ``searchsorted`` (O(n log K) for K groups).

    >>> uniques, codes = factorize(np.array(["b", "a", "b"], dtype=object))
    >>> uniques.tolist(), codes.tolist()
    (['a', 'b'], [1, 0, 1])

    Values that do not compare with each other (``1`` and ``"a"``) are ordered by type name,
    then value:

    >>> factorize(np.array([1, "a", 2, "a"], dtype=object))[0].tolist()
    [1, 2, 'a']
    """
    uniques, codes, _ = _factorize_counted(col)
    return uniques, codes.astype(np.intp, copy=False)


def _kernels() -> Any:
    """Return the compiled kernels of group encoding (:mod:`fairmonitor._kernels.groups`).

    Imported on first use (a C extension: ~1 ms), so importing this module loads no
    compiled code; one implementation serves columns of every length.
    """
    from .._kernels import groups

    return groups


def _narrowest(k: int) -> type[np.signedinteger[Any]]:
    """Pick the smallest signed integer type holding codes ``-1..k-1`` (a column is n long)."""
    return np.int8 if k < 2**7 else np.int16 if k < 2**15 else np.int32 if k < 2**31 \
        else np.int64


def _factorize_values(values: list[Any]) -> tuple[NDArray[Any], NDArray[np.intp]]:
    """Sorted distinct values of a list of Python objects, and each one's index into them."""
    distinct = list(dict.fromkeys(values))
    try:
        distinct.sort()
    except TypeError:
        # a mixed column (ints and strings, as databases and CSV readers produce): a
        # deterministic order by type, then value; 1 and "1" stay two distinct groups
        distinct.sort(key=_mixed_key)
    uniques = np.empty(len(distinct), dtype=object)
    uniques[:] = distinct  # element by element: tuples stay objects
    index = {v: i for i, v in enumerate(distinct)}
    return uniques, np.fromiter(map(index.__getitem__, values), dtype=np.intp,
                                count=len(values))


def _hash_codes(col: NDArray[Any]) -> tuple[NDArray[np.int32], NDArray[np.int64]] | None:
    """Rows coded by the hash of their value, checked equal to their code's first row.

    For long object columns whose rows are distinct objects (pandas 3's arrow strings,
    database text), where identity finds nothing to share: one ``hash`` per row (C, ~50 ns)
    and one C comparison per row with its representative, ~4x faster than the dict pass of
    :func:`_factorize_values` (~200 ns a row). None, for that dict pass to decide, when a
    value is unhashable, two unequal values share a hash, a value is unequal to an equal-hash
    one (NaN) or there are too many distinct hashes to gain anything.
    """
    try:
        hashes = np.fromiter(map(hash, col), dtype=np.int64, count=col.size)
    except TypeError:
        return None
    found = _kernels().distinct_codes(hashes.view(np.uint64))  # the same limit as identity
    if found is None:
        return None
    codes, first = found
    try:
        same = np.equal(col, col[first][codes])  # each row against its code's first row
    except Exception:  # noqa: BLE001 - any value whose == raises: let the dict pass decide
        return None
    if same.dtype != bool or not same.all():
        return None
    return codes, first


def _factorize_counted(col: NDArray[Any]
                       ) -> tuple[NDArray[Any], NDArray[np.integer[Any]],
                                  NDArray[np.intp] | None]:
    """:func:`factorize`, plus each unique value's rows when counting found them, else None.

    Small non-negative integers and long object columns are counted while factorizing (the
    latter's codes come in the narrowest integer type); other columns give None.
    """
    if col.dtype.kind in "iub" and col.size:
        lo, hi = int(col.min()), int(col.max())
        if lo >= 0 and hi < 4 * col.size + 1024:
            index = col.astype(np.intp, copy=False)  # no copy for the usual int64 column
            if hi <= 1:  # a 0/1 column (the usual binary attribute): no bincount needed
                ones = int(np.count_nonzero(col))
                counts = np.array([col.size - ones, ones][:hi + 1], dtype=np.intp)
            else:
                counts = np.bincount(index, minlength=hi + 1)
            present = np.flatnonzero(counts)
            if present.size == hi + 1:  # every value 0..hi occurs: the codes are the values
                return present.astype(col.dtype), index, counts
            remap = np.zeros(hi + 1, dtype=np.intp)
            remap[present] = np.arange(present.size)
            return present.astype(col.dtype), remap[index], counts[present]
    if col.dtype.kind == "O":
        kernels = _kernels()
        # rows by object identity, then the distinct objects by value (equal strings held
        # by distinct objects meet there); a new object per row: by value hash instead
        found = kernels.identity_codes(col)
        if found is None:
            found = _hash_codes(col)
            if found is None:  # unhashable, colliding or unequal-to-itself values: by dict
                uniques, codes = _factorize_values(col.tolist())
                return uniques, codes, None
        by_object, first = found
        uniques, object_codes = _factorize_values(col[first].tolist())
        dtype = _narrowest(uniques.size)
        codes = kernels.remap_codes(by_object, object_codes.astype(dtype),
                                    np.empty(col.size, dtype=dtype))
        return uniques, codes, kernels.count_codes(codes, uniques.size)
    uniques = np.unique(col)
    return uniques, np.searchsorted(uniques, col).astype(np.intp), None


def encode_groups(
    sensitive_features: Any, *, n_samples: int | None = None, min_group_size: int = 1
) -> Groups:
    """Encode ``sensitive_features`` as group codes, dropping groups below ``min_group_size``.

    Parameters
    ----------
    sensitive_features : array-like, DataFrame or dict of array-like
        One attribute (1-D) or several (their intersection defines the groups).
    n_samples : int, optional
        Expected number of rows; a mismatch raises an error naming both lengths.
    min_group_size : int, default=1
        Groups with fewer rows are excluded (code ``-1``) with a
        :class:`~fairmonitor.exceptions.GroupExclusionWarning` naming them.

    Returns
    -------
    groups : Groups

    Examples
    --------
    >>> g = encode_groups({"sex": ["F", "M", "F"], "race": ["a", "a", "b"]})
    >>> g.name, g.labels, g.codes.tolist()
    ('sex:race', (('F', 'a'), ('F', 'b'), ('M', 'a')), [0, 2, 1])
    """
    min_group_size = check_positive_int(min_group_size, "min_group_size")
    if isinstance(sensitive_features, Groups):  # encoded once per window, shared by metrics
        return _from_encoded(sensitive_features, n_samples, min_group_size)
    columns = sensitive_columns(sensitive_features)
    n = len(next(iter(columns.values())))
    if n_samples is not None and n != n_samples:
        raise InvalidInputError(
            f"`sensitive_features` has {n} rows but the predictions/scores have {n_samples}; "
            "pass arrays aligned row by row."
        )
    if n == 0:
        raise InvalidInputError("`sensitive_features` is empty; pass at least one row.")
    labels, codes, counts = _cross([_factorize_counted(col) for col in columns.values()], n)
    name = INTERSECTION_SEPARATOR.join(columns)
    return exclude_small(codes, labels, counts, name, min_group_size)


def plain(u: Any) -> Any:
    """Give a numpy scalar as the Python value it holds (a label), anything else as it is."""
    return u.item() if hasattr(u, "item") else u


Factorized = tuple[NDArray[Any], NDArray[np.integer[Any]], NDArray[np.intp] | None]


def _cross(per_column: list[Factorized], n: int
           ) -> tuple[list[Any], NDArray[np.integer[Any]], NDArray[np.intp]]:
    """Labels, codes (narrowest type) and counts of the intersection of factorized columns.

    One column: itself. Several: the mixed-radix code of the per-column codes, compressed to
    the observed cells; the radix is small, so the cells are counted rather than sorted
    (``np.unique``), in one compiled pass for long columns.
    """
    if len(per_column) == 1:
        uniques, codes, counts = per_column[0]
        if counts is None:
            counts = np.bincount(codes, minlength=uniques.size)
        labels = [plain(u) for u in uniques]
        return labels, codes.astype(_narrowest(len(labels)), copy=False), counts
    radix = math.prod(len(u) for u, _, _ in per_column)
    if radix <= 4 * n + 1024:  # few cells: count them (one compiled pass per column)
        (first, combined, _), *rest = per_column
        radix = first.size
        for uniques, codes, _ in rest:
            radix *= uniques.size
            combined, cell_counts = _crossed(combined, codes, uniques.size, radix)
        cells = np.flatnonzero(cell_counts)
        dtype = _narrowest(cells.size)
        remap = np.zeros(radix, dtype=dtype)
        remap[cells] = np.arange(cells.size)
        codes = _kernels().remap_codes(combined, remap, np.empty(n, dtype=dtype))
        counts = cell_counts[cells]
    else:  # more possible cells than rows: sort the (sparse) combined codes
        combined = np.zeros(n, dtype=np.int64)
        for uniques, inv, _ in per_column:
            combined *= len(uniques)
            combined += inv.reshape(-1)
        cells, codes, counts = np.unique(combined, return_inverse=True, return_counts=True)
    labels = []
    for cell in cells:
        parts = []
        for uniques, _, _ in reversed(per_column):
            cell, j = divmod(int(cell), len(uniques))
            parts.append(plain(uniques[j]))
        labels.append(tuple(reversed(parts)))
    codes = codes.reshape(-1)
    return labels, codes.astype(_narrowest(len(labels)), copy=False), counts


def _crossed(left: NDArray[Any], right: NDArray[Any], k_right: int, radix: int
             ) -> tuple[NDArray[np.integer[Any]], NDArray[np.int64]]:
    """One compiled mixed-radix step: codes ``left * k_right + right`` and each cell's count."""
    kernels = _kernels()
    out = np.empty(left.size, dtype=np.int32 if radix < 2**31 else np.int64)
    counts = kernels.cross_codes(kernels.signed_codes(left), kernels.signed_codes(right),
                                 k_right, radix, out)
    return out, counts


def encode_attributes(columns: Any, *, intersection: bool = True, validated: bool = False
                      ) -> dict[str, Groups]:
    """Every attribute's groups and, with several, their intersection, each column factorized once.

    The intersection's codes are derived from the attributes' codes (mixed radix), not by
    factorizing the string columns again: one pass per column per window, shared by every
    metric (pass a :class:`Groups` as ``sensitive_features``). ``validated`` skips the
    missing-value check for columns that already passed :func:`sensitive_columns`. Codes come
    in the narrowest integer type (1 byte a row for < 128 groups, not 8).

    >>> g = encode_attributes({"sex": np.array(["F", "M", "F"]),
    ...                        "race": np.array(["a", "a", "b"])})
    >>> list(g), g["sex:race"].labels, g["sex:race"].codes.tolist()
    (['sex', 'race', 'sex:race'], (('F', 'a'), ('F', 'b'), ('M', 'a')), [0, 2, 1])
    """
    columns = dict(columns) if validated else sensitive_columns(columns)
    n = len(next(iter(columns.values())))
    if n == 0:
        raise InvalidInputError("`sensitive_features` is empty; pass at least one row.")
    per_column = {name: _factorize_counted(col) for name, col in columns.items()}
    out = {}
    for name, fact in per_column.items():
        labels, codes, counts = _cross([fact], n)
        out[name] = Groups(codes, tuple(labels), counts, name, {})
    if intersection and len(columns) > 1:
        name = INTERSECTION_SEPARATOR.join(columns)
        labels, codes, counts = _cross(list(per_column.values()), n)
        out[name] = Groups(codes, tuple(labels), counts, name, {})
    return out


def outcome_counts(codes: NDArray[np.integer[Any]], k: int, pred: NDArray[Any],
                   true: NDArray[Any] | None = None) -> NDArray[np.int64]:
    """Rows per group and outcome: the one place per-group confusion counts are computed.

    Column ``2 * label + prediction``: 0 true negatives, 1 false positives, 2 false
    negatives, 3 true positives (without labels, 0 and 1: predicted 0 and 1). Rows of
    excluded groups (code -1) are left out. One compiled pass (``_kernels.groups``), read by
    the parity metrics and the summaries alike.

    >>> outcome_counts(np.array([0, 0, 1]), 2, np.array([1, 0, 1]), np.array([1, 1, 0])).tolist()
    [[0, 0, 1, 1], [0, 1, 0, 0]]
    """
    kernels = _kernels()
    pred = np.ascontiguousarray(pred, dtype=np.int8)
    true = np.zeros(0, np.int8) if true is None else np.ascontiguousarray(true, dtype=np.int8)
    return kernels.outcome_counts(kernels.signed_codes(codes), k, pred, true)


def contiguous_groups(labels: tuple[Any, ...], counts: NDArray[np.intp], name: str) -> Groups:
    """Build the groups of rows laid out group after group (``counts[0]`` rows of group 0, ...)."""
    counts = np.asarray(counts, dtype=np.intp)
    # the narrowest integer type: these codes are rarely read (splitting is slicing)
    dtype = np.int8 if counts.size < 2**7 else np.int16 if counts.size < 2**15 else np.intp
    codes = np.repeat(np.arange(counts.size, dtype=dtype), counts)
    return Groups(codes, tuple(labels), counts, name, {}, contiguous=True)


def _from_encoded(groups: Groups, n_samples: int | None, min_group_size: int) -> Groups:
    if n_samples is not None and groups.codes.size != n_samples:
        raise InvalidInputError(
            f"`sensitive_features` has {groups.codes.size} rows but the predictions/scores "
            f"have {n_samples}; pass arrays aligned row by row."
        )
    if groups.excluded or min_group_size == 1:
        return groups
    return exclude_small(groups.codes, list(groups.labels), groups.counts, groups.name,
                          min_group_size, contiguous=groups.contiguous)


def exclude_small(codes: NDArray[np.intp], labels: list[Any], counts: NDArray[np.intp],
                   name: str, min_group_size: int, *, contiguous: bool = False) -> Groups:
    """Build :class:`Groups`, groups below ``min_group_size`` coded -1 with a warning."""
    small = counts < min_group_size
    excluded: dict[Any, int] = {}
    if small.any():
        excluded = {labels[k]: int(counts[k]) for k in np.flatnonzero(small)}
        warnings.warn(
            f"sensitive attribute '{name}': left out {len(excluded)} group(s) with fewer than "
            f"min_group_size={min_group_size} rows: "
            + ", ".join(f"{lab!r} ({c} rows)" for lab, c in excluded.items()),
            GroupExclusionWarning,
            stacklevel=4,
        )
        remap = np.full(len(labels), -1, dtype=np.intp)
        keep = np.flatnonzero(~small)
        remap[keep] = np.arange(keep.size)
        codes = remap[codes]
        labels = [labels[k] for k in keep]
        counts = counts[keep]
        contiguous = False  # excluded rows (-1) now sit between the kept ones
    return Groups(codes=codes, labels=tuple(labels), counts=counts, name=name, excluded=excluded,
                  contiguous=contiguous)


def require_two_groups(name: str, labels: tuple[Any, ...],
                       excluded: Mapping[Any, int]) -> str | None:
    """Return why a between-group metric is undefined on these groups, or None if it is not."""
    if len(labels) >= 2:
        return None
    if excluded:
        return (
            f"fewer than two groups of '{name}' remain after min_group_size "
            f"(kept {format_labels(labels) or 'none'})"
        )
    return f"sensitive attribute '{name}' has a single group {format_labels(labels)}"
