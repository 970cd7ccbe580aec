"""The parts of the metric computations that other packages run on data they hold themselves.

The metric functions take rows. :mod:`fairmonitor.summaries` evaluates the same metrics from a
summary (per-group counts, sorted scores, cells), :mod:`fairmonitor.spark` runs HFM's distance
scan per partition, and :mod:`fairmonitor.report` computes parity from counts: they call the
pieces below, which the metric functions call too, so a value is the same whichever path
computed it. This module is that interface (named, not private); the modules behind it stay
private to ``metrics/`` and may be rearranged without touching the callers.

ABCC/ABPC: :data:`kde` (the KDE module), :func:`abcc_abpc_pairs` (a metric over every kept
pair of groups), :func:`w1_sorted` (W1 of two sorted groups). Calibration:
:func:`calibration_from_sums`. MADD: :func:`madd_plan`, :func:`madd_grid`,
:class:`MADDPrepared`, :func:`madd_fixed_pair`, :func:`madd_auto_pair`,
:func:`madd_shares_below`, :class:`MADDResult`, :func:`madd_chance_pairs` (the pairs MADD's
chance level reads), :func:`madd_worst_fixed`, :func:`madd_worst_auto` (the worst pair without
scoring every pair) and their group counts below which every pair is scored,
:data:`WORST_PAIR_SMALL` and :data:`MADD_AUTO_SMALL`. Parity: :class:`GroupRates`, :func:`rate`,
:func:`parity_from_rates`. Pairs: :data:`AGGREGATIONS`, :class:`PairwiseMatrix`. HFM:
:class:`FeatureSpace`, :func:`scale_columns`, :func:`nearest_sqdist`,
:func:`average_of_distances`, :class:`HFMResult`, :func:`sampled_result`. Intervals:
:class:`Interval`, :class:`ScoreBootstrap`, :func:`score_gap_interval`,
:func:`mean_gap_interval`, :func:`wald_interval`, :func:`rate_gap_interval`,
:func:`fine_histogram_sorted`, :func:`cell_histogram`, :data:`RESOLUTION`. Regression (a
window summary's sums and cells): :func:`regression_error_values`,
:func:`regression_group_moments`, :func:`regression_errors_from_sums`,
:func:`regression_distribution_from_cells`.
"""

from __future__ import annotations

from typing import Any

from ._abpc_abcc import kde
from ._abpc_abcc.areas import _pairs as abcc_abpc_pairs
from ._abpc_abcc.areas import _w1_sorted as w1_sorted
from ._calibration import calibration_from_sums
from ._hfm.exact import FeatureSpace, scale_columns
from ._hfm.hfm import HFMResult, sampled_result
from ._hfm.sampled import average_of_distances, nearest_sqdist
from ._intervals import Interval, _kernels, mean_gap_interval, wald_interval
from ._madd.bandwidth import _shares_below as madd_shares_below
from ._madd.madd import MADDResult
from ._madd.madd import _auto_pair as madd_auto_pair
from ._madd.madd import _fixed_pair as madd_fixed_pair
from ._madd.madd import _grid as madd_grid
from ._madd.madd import _plan as madd_plan
from ._madd.madd import _Prepared as MADDPrepared
from ._madd.pairs import AUTO_SMALL as MADD_AUTO_SMALL
from ._madd.pairs import chance_pairs as madd_chance_pairs
from ._madd.pairs import worst_auto as madd_worst_auto
from ._madd.pairs import worst_fixed as madd_worst_fixed
from ._pairwise import AGGREGATIONS, PairwiseMatrix
from ._parity import GroupRates, parity_from_rates
from ._parity import _rate as rate
from ._rate_intervals import rate_gap_interval
from ._regression._resample import group_moments as regression_group_moments
from ._regression.distribution import (
    distribution_from_cells as regression_distribution_from_cells,
)
from ._regression.errors import error_values as regression_error_values
from ._regression.errors import errors_from_sums as regression_errors_from_sums
from ._score_intervals import RESOLUTION, ScoreBootstrap, fine_histogram_sorted, score_gap_interval
from ._worst_pair import SMALL as WORST_PAIR_SMALL


def cell_histogram(*args: Any, **kwargs: Any) -> Any:
    """Return a group's fine score histogram from its cells (a compiled kernel).

    See :func:`fairmonitor._kernels.intervals.cell_histogram`; imported when first called.
    """
    return _kernels().cell_histogram(*args, **kwargs)

__all__ = [
    "RESOLUTION", "Interval", "ScoreBootstrap", "cell_histogram", "fine_histogram_sorted",
    "mean_gap_interval", "rate_gap_interval", "score_gap_interval", "wald_interval",
    "AGGREGATIONS", "FeatureSpace", "GroupRates", "HFMResult", "MADDPrepared", "MADDResult",
    "PairwiseMatrix", "abcc_abpc_pairs", "average_of_distances", "calibration_from_sums", "kde",
    "madd_auto_pair", "madd_chance_pairs", "madd_fixed_pair", "madd_grid", "madd_plan",
    "madd_shares_below", "MADD_AUTO_SMALL", "WORST_PAIR_SMALL", "madd_worst_auto",
    "madd_worst_fixed",
    "nearest_sqdist", "parity_from_rates", "rate", "sampled_result", "scale_columns",
    "w1_sorted", "regression_distribution_from_cells", "regression_error_values",
    "regression_errors_from_sums", "regression_group_moments",
]
