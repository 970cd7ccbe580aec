"""PNG plots of a fairness report.

The score CDFs, MADD histograms and robustness curves return a
:class:`matplotlib.figure.Figure` (the object API: no pyplot, no global backend); the
figures every run draws, each value's interval and a regressor's prediction CDFs and
residuals, return a :class:`.raster.Raster` (drawn with Pillow in a few milliseconds).
:func:`save_png` writes either. Figures are built from the window's data and the report's
values and details; nothing here computes a metric.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fairmonitor.metrics import encode_groups

__all__ = ["madd_histograms", "metric_intervals", "regression_panels", "regression_series",
           "robustness_curve", "save_png", "score_cdfs"]

# a plot with more lines than this is unreadable; the largest groups are shown
_MAX_GROUPS = 10
_GRID = np.linspace(0.0, 1.0, 1001)


def _figure(width: float = 7.0, height: float = 4.2) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def save_png(fig: Any, path: str) -> Any:
    """Write ``fig`` as a PNG at the fast zlib level; return the image of a ``Raster``.

    A matplotlib figure goes through the Agg renderer at its dpi; level 1 instead of PIL's 6:
    a plot's flat colours compress about as well, and encoding was a tenth of each figure's
    time. A :class:`.raster.Raster` writes itself and returns its ``PIL.Image`` (None for a
    matplotlib figure).
    """
    if hasattr(fig, "save"):
        return fig.save(path)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).print_png(path, pil_kwargs={"compress_level": 1})
    return None


def _label(label: Any) -> str:
    return ":".join(map(str, label)) if isinstance(label, tuple) else str(label)


def _groups(columns: Mapping[str, NDArray[Any]], values: NDArray[Any], min_group_size: int
            ) -> list[tuple[str, NDArray[Any]]]:
    """``[(label, values of the group)]`` of the kept groups, largest first, at most 10."""
    with warnings.catch_warnings():  # exclusions are already reported by the report layer
        warnings.simplefilter("ignore")
        groups = encode_groups(dict(columns), n_samples=len(values),
                               min_group_size=min_group_size)
    parts = list(zip(map(_label, groups.labels), groups.split(np.asarray(values)), strict=True))
    parts.sort(key=lambda p: -len(p[1]))
    return parts[:_MAX_GROUPS]


def _ecdf(values: NDArray[np.float64]) -> NDArray[np.float64]:
    ordered = np.sort(values)
    return np.searchsorted(ordered, _GRID, side="right") / max(len(ordered), 1)


def score_cdfs(attribute: str, columns: Mapping[str, NDArray[Any]], y_score: NDArray[Any], *,
               min_group_size: int = 1, value: float | None = None,
               pair: Sequence[Any] | None = None) -> Any:
    """Per-group empirical CDFs of the scores, with the area between them shaded.

    The shaded area is the ABCC: between ``pair`` (the worst pair, when known) or, otherwise,
    between the lowest and highest group CDF at each score (exactly the ABCC for two groups).
    """
    fig = _figure()
    ax = fig.add_subplot()
    parts = _groups(columns, np.asarray(y_score, dtype=float), min_group_size)
    curves = {label: _ecdf(v) for label, v in parts}
    for label, v in parts:
        ax.step(_GRID, curves[label], where="post", lw=1.6, label=f"{label} (n={len(v)})")
    pair_labels = [_label(p) for p in pair] if pair is not None else []
    if len(pair_labels) == 2 and all(p in curves for p in pair_labels):
        lo, hi = curves[pair_labels[0]], curves[pair_labels[1]]
        what = f"area between {pair_labels[0]} and {pair_labels[1]}"
    elif len(curves) >= 2:
        stacked = np.vstack(list(curves.values()))
        lo, hi = stacked.min(axis=0), stacked.max(axis=0)
        what = "area between the group CDFs"
    else:
        lo = hi = None
    if lo is not None:
        ax.fill_between(_GRID, lo, hi, step="post", alpha=0.25, color="tab:red",
                        label=what + (f" (ABCC = {value:.4f})" if _finite(value) else ""))
    ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="score",
           ylabel="share of the group with score <= x", title=f"Score CDFs by {attribute}")
    ax.grid(alpha=0.3)
    _legend(ax)
    return fig


def madd_histograms(attribute: str, columns: Mapping[str, NDArray[Any]], y_score: NDArray[Any],
                    *, min_group_size: int = 1, n_bins: int = 50,
                    value: float | None = None) -> Any:
    """Per-group score histograms as proportions per bin: the densities MADD compares."""
    fig = _figure()
    ax = fig.add_subplot()
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    for label, v in _groups(columns, np.asarray(y_score, dtype=float), min_group_size):
        counts, _ = np.histogram(v, bins=edges)
        ax.stairs(counts / max(len(v), 1), edges, lw=1.6, label=f"{label} (n={len(v)})")
    title = f"Score histograms by {attribute} ({n_bins} bins)"
    if _finite(value):
        title += f": MADD = {value:.4f}"
    ax.set(xlim=(0, 1), xlabel="score", ylabel="share of the group in the bin", title=title)
    ax.grid(alpha=0.3)
    _legend(ax)
    return fig


def _finite(value: float | None) -> bool:
    return value is not None and bool(np.isfinite(value))


def _legend(ax: Any) -> None:
    # matplotlib warns about an empty legend; a plot without series simply has none
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def robustness_curve(attribute: str, detail: Any) -> Any:
    """Fairness gap and robustness ratio against the noise level, with 95% error bands."""
    fig = _figure(10.0, 4.2)
    ax_gap, ax_ratio = fig.subplots(1, 2)
    levels = np.asarray(detail.levels, dtype=float)
    gaps = getattr(detail, "gaps", None) or {}
    ses = getattr(detail, "gap_se", None) or {}
    for metric, ratio in (getattr(detail, "ratios", None) or {}).items():
        ratio = np.asarray(ratio, dtype=float)[: len(levels)]
        line = ax_ratio.plot(levels, ratio, marker="o", label=metric)[0]
        if metric in gaps:
            gap = np.asarray(gaps[metric], dtype=float)[: len(levels)]
            ax_gap.plot(levels, gap, marker="o", color=line.get_color(), label=metric)
            if metric in ses:
                se = np.asarray(ses[metric], dtype=float)[: len(levels)]
                ax_gap.fill_between(levels, gap - 1.96 * se, gap + 1.96 * se, alpha=0.2,
                                    color=line.get_color())
                with np.errstate(divide="ignore", invalid="ignore"):
                    # delta method with a deterministic clean gap: SE(R) = R * SE / gap;
                    # an infinite ratio (clean gap ~0) has no band
                    finite = np.isfinite(ratio) & (gap > 0)
                    half = np.where(finite, 1.96 * np.abs(ratio) * se / gap, np.nan)
                    lo, hi = np.where(finite, ratio - half, np.nan), np.where(
                        finite, ratio + half, np.nan)
                ax_ratio.fill_between(levels, lo, hi, alpha=0.2, color=line.get_color())
    ax_ratio.axhline(1.0, color="grey", lw=1, ls="--")
    for ax, ylabel in ((ax_gap, "fairness gap under noise (mean, 95% band)"),
                       (ax_ratio, "robustness ratio R (gap / clean gap)")):
        finite = [line for line in ax.get_lines()
                  if np.isfinite(np.asarray(line.get_ydata(), dtype=float)).any()]
        if not finite:
            # every ratio +inf (clean gap below the sampling floor, a fair model) or NaN: an
            # empty log axis cannot place ticks (matplotlib raises while saving), so say why
            ax.text(0.5, 0.5, "no finite value:\nclean gap ~0 or undefined", ha="center",
                    va="center", transform=ax.transAxes, color="grey")
        if levels.size and (levels > 0).all() and np.isfinite(levels).all():
            ax.set_xscale("log")
            # explicit limits: the data limits of an axis without finite points are (0, 1),
            # which a log axis rejects
            lo, hi = float(levels.min()), float(levels.max())
            ax.set_xlim(lo / 1.5, hi * 1.5)
        ax.set(xlabel="noise level k", ylabel=ylabel)
        ax.grid(alpha=0.3)
        _legend(ax)
    fig.suptitle(f"Fairness under input noise, by {attribute}")
    return fig


def _interval_rows(report: Any) -> list[tuple[str, float, float, float, float]]:
    """``(label, value, lower, upper, chance)`` of each finite value, NaN where unknown."""
    rows = []
    for (metric, attr), v in report.values.items():
        if _finite(v):
            iv = report.intervals.get((metric, attr))
            lo, hi, chance = ((float(iv.lower), float(iv.upper), float(iv.chance))
                              if iv is not None else (np.nan, np.nan, np.nan))
            rows.append((f"{metric} · {attr}", float(v), lo, hi, chance))
    return rows


def metric_intervals(report: Any) -> Any:
    """Every value with its confidence interval (error bars) and chance level (a red tick).

    One row per (metric, attribute), grouped by metric. A value without an interval is a
    grey dot; the chance level is what a fair model reads at these group sizes, so a value
    near it is noise whatever its size. Drawn with :mod:`.raster` (a few ms, not ~0.1 s).
    """
    from .raster import TAB10, Raster

    rows = _interval_rows(report)
    width, height = 760, max(180, 26 * len(rows) + 84)
    fig = Raster(width, height)
    if not rows:
        fig.text((width / 2, height / 2), "no defined value", size=10, anchor="mm")
        return fig
    left = min(0.6 * width, max(fig.text_width(r[0], 8) for r in rows) + 14)
    data = np.array([r[1:] for r in rows], dtype=float)
    finite = data[np.isfinite(data)]
    lo, hi = float(finite.min()), float(finite.max())
    pad = 0.05 * (hi - lo) if hi > lo else max(abs(hi), 1.0) * 0.05
    y = np.arange(len(rows))[::-1].astype(float)
    ax = fig.axes((left, 12, width - 18, height - 52), (lo - pad, hi + pad),
                  (-0.7, len(rows) - 0.3))
    ax.decorate(xlabel="value (bars: 95% interval; red tick: chance level of a fair model)",
                yticks=False)
    value, lower, upper, chance = data.T
    for k, row in enumerate(rows):
        fig.text((left - 6, float(ax._px([0.0], [y[k]])[0, 1]) / 2), row[0], size=8,
                 anchor="rm")
        # an interval that does not hold its value (rounding, or a method that misses it)
        # is drawn to its bounds all the same
        if np.isfinite(lower[k]) and np.isfinite(upper[k]):
            ax.line([lower[k], upper[k]], [y[k], y[k]], TAB10[0], 1.2)
            for end in (lower[k], upper[k]):
                ax.line([end, end], [y[k] - 0.15, y[k] + 0.15], TAB10[0], 1.2)
            ax.dots([value[k]], [y[k]], TAB10[0])
        else:
            ax.dots([value[k]], [y[k]], TAB10[7])
        if np.isfinite(chance[k]):
            ax.line([chance[k], chance[k]], [y[k] - 0.3, y[k] + 0.3], TAB10[3], 1.6)
    return fig


def _cdf_points(values: NDArray[np.float64], points: int = 256
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return a group's empirical CDF in at most ``points`` steps (quantiles): same picture."""
    x = np.sort(values)
    if x.size > points:
        keep = np.unique(np.linspace(0, x.size - 1, points).round().astype(int))
        return x[keep], (keep + 1) / x.size
    return x, np.arange(1, x.size + 1) / max(x.size, 1)


def _split_groups(columns: Mapping[str, NDArray[Any]], arrays: Sequence[NDArray[Any]],
                  min_group_size: int) -> list[list[tuple[str, NDArray[Any]]]]:
    """:func:`_groups` of several arrays of the same rows, encoding the groups once."""
    with warnings.catch_warnings():  # exclusions are already reported by the report layer
        warnings.simplefilter("ignore")
        groups = encode_groups(dict(columns), n_samples=len(arrays[0]),
                               min_group_size=min_group_size)
    labels = list(map(_label, groups.labels))
    splits = [groups.split(np.asarray(a)) for a in arrays]
    order = sorted(range(len(labels)), key=lambda i: -len(splits[0][i]))[:_MAX_GROUPS]
    return [[(labels[i], split[i]) for i in order] for split in splits]


def regression_series(columns: Mapping[str, NDArray[Any]], y_pred: NDArray[Any],
                      residual: NDArray[Any] | None, *, min_group_size: int = 1,
                      bins: int = 40) -> dict[str, Any]:
    """Return what :func:`regression_panels` draws, as numbers (largest groups first).

    At most 10 groups. ``cdf``: ``{group: (x, share <= x)}`` in at most 256 steps,
    ``"pooled"`` included; ``counts``: ``{group: rows}``; with residuals, ``edges`` (shared
    bins), ``density`` ``{group: per-bin density}`` and ``mean_residual`` ``{group: mean}``.

    >>> s = regression_series({"g": np.array(list("aab"))}, np.array([1.0, 2.0, 3.0]),
    ...                       np.array([0.5, -0.5, 1.0]))
    >>> s["counts"], s["mean_residual"]
    ({'a': 2, 'b': 1}, {'a': 0.0, 'b': 1.0})
    """
    pred = np.asarray(y_pred, dtype=float)
    arrays = [pred] if residual is None else [pred, np.asarray(residual, dtype=float)]
    parts = _split_groups(columns, arrays, min_group_size)
    out: dict[str, Any] = {
        "cdf": {"pooled": _cdf_points(pred), **{g: _cdf_points(v) for g, v in parts[0]}},
        "counts": {g: int(v.size) for g, v in parts[0]}}
    if residual is not None:
        edges = np.histogram_bin_edges(arrays[1], bins=bins)
        widths = np.diff(edges)
        out["edges"] = edges
        out["density"] = {g: np.histogram(v, bins=edges)[0] / (max(v.size, 1) * widths)
                          for g, v in parts[1]}
        out["mean_residual"] = {g: float(v.mean()) if v.size else float("nan")
                                for g, v in parts[1]}
    return out


def _prediction_panel(ax: Any, series: dict[str, Any], colors: dict[str, str]) -> None:
    for group in series["counts"]:
        ax.step(*series["cdf"][group], color=colors[group])
    ax.step(*series["cdf"]["pooled"], color="#000000", width=1.0)  # last: on top, thin


def _residual_panel(ax: Any, series: dict[str, Any], colors: dict[str, str]) -> None:
    for group, density in series["density"].items():
        ax.stairs(density, series["edges"], color=colors[group])
    for group, mean in series["mean_residual"].items():
        if np.isfinite(mean):
            ax.vline(mean, colors[group], dash=True)
    ax.vline(0.0, "#000000", width=0.8)


def _limits(lo: float, hi: float, margin: float = 0.03) -> tuple[float, float]:
    pad = (hi - lo) * margin if hi > lo else max(abs(hi), 1.0) * 0.05
    return lo - pad, hi + pad


def regression_panels(attribute: str, columns: Mapping[str, NDArray[Any]],
                      y_pred: NDArray[Any], residual: NDArray[Any] | None, *,
                      min_group_size: int = 1, ks: float | None = None,
                      residual_gap: float | None = None) -> Any:
    """One figure per attribute: prediction CDFs, and residual distributions beside them.

    The numbers are :func:`regression_series`'s; drawn with :mod:`.raster` (a few ms: with
    matplotlib this figure was a third of the evaluator's time on a regressor), one legend
    for both panels on the right.
    """
    from .raster import TAB10, Raster, legend

    series = regression_series(columns, y_pred, residual, min_group_size=min_group_size)
    colors = {g: TAB10[k % 10] for k, g in enumerate(series["counts"])}
    panel = 350
    width = 60 + panel + (80 + panel if residual is not None else 0) + 230
    fig = Raster(width, 340)
    x, _ = series["cdf"]["pooled"]
    title = f"Prediction CDFs by {attribute}"
    if _finite(ks):
        title += f"\n(KS to pooled = {ks:.4f})"
    ax = fig.axes((60, 46, 60 + panel, 290), _limits(float(x[0]), float(x[-1])), (0.0, 1.02))
    ax.decorate("prediction", "share with prediction <= x", title)
    _prediction_panel(ax, series, colors)
    entries = [("#000000", f"pooled (n={np.size(y_pred)})")]
    entries += [(colors[g], f"{g} (n={n})") for g, n in series["counts"].items()]
    if residual is not None:
        edges = series["edges"]
        top = max((float(d.max()) for d in series["density"].values() if d.size), default=1.0)
        left = 60 + panel + 80
        title = f"Residuals by {attribute}"
        if _finite(residual_gap):
            title += f"\n(mean residual gap = {residual_gap:.4g})"
        ax = fig.axes((left, 46, left + panel, 290), (float(edges[0]), float(edges[-1])),
                      (0.0, top * 1.08 or 1.0))
        ax.decorate("prediction - target (> 0: over-predicted)", "density", title)
        _residual_panel(ax, series, colors)
        means = series["mean_residual"]
        entries = entries[:1] + [(c, f"{label}, mean residual {means[g]:+.3g}")
                                 for (c, label), g in zip(entries[1:], series["counts"],
                                                          strict=True)]
    legend(fig, (width - 220, 50), entries)
    return fig
