"""The former home of group encoding, now :mod:`fairmonitor.utils.groups`.

Kept so code written against the old path keeps importing; new code imports
:mod:`fairmonitor.utils.groups`.
"""

from __future__ import annotations

from ..utils.groups import *  # noqa: F403
from ..utils.groups import (  # noqa: F401
    INTERSECTION_SEPARATOR,
    MISSING_POLICIES,
    apply_missing_policy,
    column_values,
    contiguous_groups,
    encode_attributes,
    exclude_small,
    factorize,
    missing_mask,
    plain,
)
from ..utils.groups import exclude_small as _exclude_small  # noqa: F401
from ..utils.groups import plain as _plain  # noqa: F401
