"""The group minimums the MLflow evaluator and the monitor share.

One default, so that the same rows give the same numbers offline and online.

- :data:`MIN_GROUP_SIZE`, 30 rows: the score metrics (ABCC, MADD, ABPC) compare each group's
  score distribution, and a selection rate of fewer rows has a standard error above 0.09, so a
  gap between such groups is mostly noise.
- :data:`MIN_CONDITION_SIZE`, 10 rows of what a rate conditions on (actual positives for a
  TPR, actual negatives for an FPR, predicted positives for precision): a group of 30 rows can
  hold 5 positives, whose TPR moves in steps of 0.2 and whose 95% Wilson interval is at least
  0.43 wide; with 10 it is at most 0.53 wide and a gap to a large group can be told from 0
  from a difference of ~0.3. Fewer conditioning rows than that would make the largest gap the
  noisiest group's, which is what the issue's EOpp of 0.714 from 5/7 vs 0/5 positives was.

The library functions (:func:`~fairmonitor.report.evaluate_window` and the metric functions)
keep 1 (leave nothing out unless asked), as fairlearn does.
"""

from __future__ import annotations

__all__ = ["MIN_CONDITION_SIZE", "MIN_GROUP_SIZE"]

#: Rows per group below which a group is left out of every metric (evaluator and monitor).
MIN_GROUP_SIZE = 30
#: Rows a rate conditions on below which a group is left out of that rate's gap.
MIN_CONDITION_SIZE = 10
