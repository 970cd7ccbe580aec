"""Bundled benchmark datasets (compressed, CC BY 4.0; see ``data/ATTRIBUTION.md``).

The loaders return a :class:`pandas.DataFrame` with readable sensitive columns added, so the
demo and the examples need no network.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

__all__ = ["load_adult", "load_german"]

# German credit codebook (german.txt, attribute 9): sex and marital status in one code.
_GERMAN_SEX = {"A91": "male", "A92": "female", "A93": "male", "A94": "male", "A95": "female"}


def _read(name: str) -> Any:
    import pandas as pd

    with files("fairmonitor.data").joinpath(name).open("rb") as fh:
        return pd.read_csv(fh, compression="gzip", skipinitialspace=True)


def load_german() -> Any:
    """Statlog German credit, 1,000 rows.

    Adds ``sex`` (from ``personal_status``), ``age_group`` (``"<25"`` / ``">=25"``, the usual
    split for this dataset) and ``good_credit`` (1 good, 0 bad; the raw ``credit`` is 1/2).

    Examples
    --------
    >>> df = load_german()
    >>> df.shape, sorted(df["sex"].unique()), int(df["good_credit"].sum())
    ((1000, 24), ['female', 'male'], 700)
    """
    df = _read("german.csv.gz")
    df["sex"] = df["personal_status"].map(_GERMAN_SEX)
    df["age_group"] = (df["age"] >= 25).map({True: ">=25", False: "<25"})
    df["good_credit"] = (df["credit"] == 1).astype(int)
    return df


def load_adult() -> Any:
    """UCI Adult (census income, training part), 32,561 rows.

    Adds ``income`` (1 for ``>50K``); missing values (``?``) are kept as the string ``"?"``
    so no row is silently dropped.

    Examples
    --------
    >>> df = load_adult()
    >>> df.shape, int(df["income"].sum())
    ((32561, 16), 7841)
    """
    df = _read("adult.csv.gz")
    df["income"] = (df["income-per-year"].str.strip() == ">50K").astype(int)
    return df
