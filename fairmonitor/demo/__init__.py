"""``fairmonitor demo``: the whole loop on bundled data, local, in a few minutes.

1. train a scikit-learn model on UCI Adult (``sex`` and ``race`` are not inputs), log and
   register it in a local sqlite MLflow store under the demo directory (alias ``champion``);
2. evaluate it with ``mlflow.models.evaluate(..., evaluators=["fairness"])`` and print the
   fairness and robustness table with threshold verdicts;
3. replay a simulated day of production predictions into a SQLite prediction log
   (:class:`~fairmonitor.monitor.sources.logger.PredictionLogger`), with the scores of women
   halved from mid-day on;
4. run the real monitor service over it at one simulated hour per tick, scraping its own
   ``/metrics`` after each tick: the alert state goes from ok to critical at the biased window;
5. say where to look: MLflow UI, ``/metrics``, generated rules and dashboard, docker stack.

The steps are functions (:mod:`._model`, :mod:`._stream`, :mod:`._replay`), tied together by
:func:`~fairmonitor.demo.scenario.run_demo`. Nothing here is imported by ``import fairmonitor``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DemoOptions", "DemoResult", "run_demo"]


def __getattr__(name: str) -> Any:  # keep `import fairmonitor.demo` cheap
    if name in __all__:
        from . import scenario

        return getattr(scenario, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
