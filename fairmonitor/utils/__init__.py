"""Internals several packages share (as scikit-learn's ``utils/``), below ``metrics/``.

- :mod:`.groups`: sensitive features to group codes (encoding, intersections, the missing-value
  policy, small-group exclusion), read by the metrics, summaries, the report, robustness,
  mitigation, the monitor and the Spark adapter;
- :mod:`.rowkeys`: a stable 64-bit key per row (the same in every process), which the
  summaries' row sample and Spark's HFM query rows select by.

A module outside a package imports that package's public modules and names only
(``tests/test_layout.py`` checks it); what several packages need lives here or in
:mod:`fairmonitor.metrics.shared`.
"""
