"""Exceptions and warnings raised by fairmonitor.

The hierarchy::

    Exception
    └── FairmonitorError
        ├── InvalidInputError (also a ValueError)   bad arrays, options or sensitive features
        ├── ConfigError (also a ValueError)         a monitor or evaluator configuration is invalid
        ├── NotFittedError (ValueError, AttributeError)  transform() before fit()
        └── WindowUnavailableError                  a window source could not deliver rows

    UserWarning
    ├── UndefinedMetricWarning     a metric is undefined on these inputs; the value is NaN
    └── GroupExclusionWarning      some groups were left out (too small, or undefined rates)

Every error subclasses a builtin users already catch (``ValueError``), as scikit-learn's
``InvalidParameterError`` does, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "FairmonitorError",
    "GroupExclusionWarning",
    "InvalidInputError",
    "MissingColumnError",
    "NotFittedError",
    "UndefinedMetricWarning",
    "WindowUnavailableError",
]


class FairmonitorError(Exception):
    """Base class of every error fairmonitor raises on purpose."""


class InvalidInputError(FairmonitorError, ValueError):
    """An argument is invalid; the message names it, the rule, what was received and the fix."""


class ConfigError(FairmonitorError, ValueError):
    """A configuration is invalid; the message names the dotted key path and the allowed values."""


class NotFittedError(FairmonitorError, ValueError, AttributeError):
    """An estimator was used before ``fit`` (like scikit-learn's ``NotFittedError``)."""


class WindowUnavailableError(FairmonitorError):
    """A window source could not deliver the rows of a window (source down, table missing...)."""


class MissingColumnError(WindowUnavailableError):
    """A source lacks a configured column: a data error of the config, not an outage.

    The monitor holds the window (its watermark stays) and alerts on it as a data error;
    ``key`` is the config key naming the column (``source.timestamp_column``).
    """

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


class UndefinedMetricWarning(UserWarning):
    """A metric is undefined on the given inputs; it was set to NaN. The message says why."""


class GroupExclusionWarning(UserWarning):
    """Some groups were left out of a metric; the message names them and the reason."""
