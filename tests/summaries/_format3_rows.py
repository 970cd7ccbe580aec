"""The rows of ``tests/data/summary_format3.bin``: a summary written by format 3 (before the
intersection's groups were stored once), kept to check that older stored summaries still load.

The fixture was written by fairmonitor at commit bcb88cb (format 3) with
``summarize(sf, y_score=score, y_true=label, X=X, spec=SummarySpec(max_raw=300,
sample_size=8))`` of :func:`rows`: groups of both kinds (raw scores and cells).
"""

import numpy as np


def rows():
    """Two attributes (3 and 2 groups), scores, labels and one feature; seed 30."""
    rng = np.random.default_rng(30)
    n = 2000
    sf = {"race": rng.choice(np.array(["a", "b", "c"]), n, p=[0.6, 0.3, 0.1]),
          "sex": rng.choice(np.array(["F", "M"]), n)}
    score = np.round(rng.beta(2, 3, n), 3)  # ties: cells holding several scores
    label = (rng.random(n) < score).astype(np.int64)
    X = rng.normal(size=(n, 1))
    return sf, score, label, X
