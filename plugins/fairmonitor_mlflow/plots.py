"""PNG plots of a fairness report (matplotlib's object API: no pyplot, no global backend).

Each function returns a :class:`matplotlib.figure.Figure`; :func:`save_png` writes it with the
Agg renderer. Figures are built from the window's data and the report's values and details;
nothing here computes a metric.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fairmonitor.metrics import encode_groups

__all__ = ["madd_histograms", "metric_intervals", "regression_panels", "robustness_curve",
           "save_png", "score_cdfs"]

# a plot with more lines than this is unreadable; the largest groups are shown
_MAX_GROUPS = 10
_GRID = np.linspace(0.0, 1.0, 1001)


def _figure(width: float = 7.0, height: float = 4.2) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def save_png(fig: Any, path: str) -> None:
    """Write ``fig`` as a PNG (Agg renderer, the figure's dpi, fast zlib level).

    Level 1 instead of PIL's 6: a plot's flat colours compress about as well, and encoding
    was a tenth of each figure's time.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).print_png(path, pil_kwargs={"compress_level": 1})


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


def metric_intervals(report: Any) -> Any:
    """Every value with its confidence interval (error bars) and chance level (a tick).

    One row per (metric, attribute), grouped by metric. A value without an interval is a
    plain dot; the chance level is what a fair model reads at these group sizes, so a value
    near it is noise whatever its size.
    """
    from matplotlib.figure import Figure

    rows = [(metric, attr, float(v), report.intervals.get((metric, attr)))
            for (metric, attr), v in report.values.items() if _finite(v)]
    height = max(2.0, 0.32 * len(rows) + 1.2)
    fig = Figure(figsize=(7.0, height))
    # fixed margins sized to the longest label instead of the constrained layout (which
    # draws the figure once more to measure it): ~0.05 in a character at 7 pt
    longest = max((len(f"{m} · {a}") for m, a, _, _ in rows), default=0)
    fig.subplots_adjust(left=min(0.6, (0.05 * longest + 0.2) / 7.0), right=0.97,
                        bottom=0.75 / height, top=1 - 0.2 / height)
    ax = fig.add_subplot()
    if not rows:
        ax.text(0.5, 0.5, "no defined value", ha="center", va="center")
        ax.set_axis_off()
        return fig
    y = np.arange(len(rows))[::-1].astype(float)
    value = np.array([r[2] for r in rows])
    lower, upper, chance = (np.array([getattr(r[3], k, np.nan) if r[3] is not None else np.nan
                                      for r in rows], dtype=float)
                            for k in ("lower", "upper", "chance"))
    # one artist per kind, not one per row: drawing cost grows with artists, not points
    bars = np.isfinite(lower) & np.isfinite(upper)
    if bars.any():
        # error bars are distances from the value, so never negative: an interval that does
        # not hold its value (rounding, or a method that misses it) is drawn to its bounds
        # from wherever the value is, not refused by matplotlib
        xerr = np.vstack([np.maximum(value - lower, 0.0), np.maximum(upper - value, 0.0)])
        ax.errorbar(value[bars], y[bars], xerr=xerr[:, bars], fmt="o", color="tab:blue",
                    ecolor="tab:blue", capsize=3, markersize=4)
        outside = bars & ~((lower <= value) & (value <= upper))
        if outside.any():
            ax.hlines(y[outside], lower[outside], upper[outside], color="tab:blue",
                      linewidth=1)
    if (~bars).any():
        ax.plot(value[~bars], y[~bars], "o", color="tab:gray", markersize=4)
    has_chance = np.isfinite(chance)
    if has_chance.any():
        ax.plot(chance[has_chance], y[has_chance], "|", color="tab:red", markersize=10,
                linestyle="none")
    ax.set_yticks(y, [f"{metric} · {attr}" for metric, attr, _, _ in rows], fontsize=7)
    ax.set_xlabel("value (bars: 95% interval; red tick: chance level of a fair model)",
                  fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return fig


def _cdf_points(values: NDArray[np.float64], points: int = 256
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return a group's empirical CDF in at most ``points`` steps (quantiles): same picture."""
    x = np.sort(values)
    if x.size > points:
        keep = np.unique(np.linspace(0, x.size - 1, points).round().astype(int))
        return x[keep], (keep + 1) / x.size
    return x, np.arange(1, x.size + 1) / max(x.size, 1)


def _prediction_panel(ax: Any, attribute: str, parts: list[tuple[str, NDArray[np.float64]]],
                      pred: NDArray[np.float64], value: float | None) -> None:
    ax.step(*_cdf_points(pred), where="post", lw=1.0, color="black", ls="--",
            label=f"pooled (n={pred.size})")
    for label, v in parts:
        ax.step(*_cdf_points(v), where="post", lw=1.6, label=f"{label} (n={v.size})")
    title = f"Prediction CDFs by {attribute}"
    if _finite(value):
        title += f"\n(KS to pooled = {value:.4f})"
    ax.set(ylim=(0, 1.02), xlabel="prediction", ylabel="share with prediction <= x",
           title=title)


def _residual_panel(ax: Any, attribute: str, parts: list[tuple[str, NDArray[np.float64]]],
                    residual: NDArray[np.float64], value: float | None,
                    bins: int = 40) -> None:
    edges = np.histogram_bin_edges(residual, bins=bins)
    widths = np.diff(edges)
    means = []
    for k, (label, v) in enumerate(parts):
        counts, _ = np.histogram(v, bins=edges)
        # ax.stairs: one path per group (ax.hist builds a patch and updates limits per bin)
        ax.stairs(counts / (max(v.size, 1) * widths), edges, lw=1.6, color=f"C{k % 10}",
                  label=f"{label} (mean {v.mean():+.3g})")
        means.append(float(v.mean()))
    ax.vlines(means, 0, 1, transform=ax.get_xaxis_transform(), lw=1.0, ls=":",
              colors=[f"C{k % 10}" for k in range(len(means))])
    ax.axvline(0.0, color="black", lw=0.8)
    title = f"Residuals by {attribute}"
    if _finite(value):
        title += f"\n(mean residual gap = {value:.4g})"
    ax.set(xlabel="prediction - target (> 0: over-predicted)", ylabel="density", title=title)


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


def regression_panels(attribute: str, columns: Mapping[str, NDArray[Any]],
                      y_pred: NDArray[Any], residual: NDArray[Any] | None, *,
                      min_group_size: int = 1, ks: float | None = None,
                      residual_gap: float | None = None) -> Any:
    """One figure per attribute: prediction CDFs, and residual distributions beside them.

    One figure, not two, with fixed margins instead of the constrained layout (which draws
    the figure again to place it): rendering dominates the evaluator's time on a regressor.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10.0 if residual is not None else 6.0, 4.0), dpi=90)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.13, top=0.86, wspace=0.25)
    axes = fig.subplots(1, 2 if residual is not None else 1, squeeze=False)[0]
    pred = np.asarray(y_pred, dtype=float)
    arrays = [pred] if residual is None else [pred, np.asarray(residual, dtype=float)]
    parts = _split_groups(columns, arrays, min_group_size)
    _prediction_panel(axes[0], attribute, parts[0], pred, ks)
    if residual is not None:
        _residual_panel(axes[1], attribute, parts[1], arrays[1], residual_gap)
    for ax in axes:
        ax.locator_params(nbins=5)  # fewer ticks: each is a few artists to lay out and draw
        ax.grid(alpha=0.3)
        _legend(ax)
    return fig
