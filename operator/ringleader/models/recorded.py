"""Reading what ranks recorded: which records count, which values are numbers, which node each rank ran on.

The helpers every model reads records with (models/summary.py, profile.py, whatif.py, curves.py, resources.py,
planning/): kept apart from the summary so that the models below it need not import it.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence, TypeGuard, TypeVar

from ringleader.api import constants
from ringleader.contract import keys


R = TypeVar("R", bound=Mapping[str, Any])  # a record: measured() keeps the caller's own type


def measured(records: Sequence[R], role: str | None = None) -> list[R]:
    """The records that count: of `role` (any when None), after warm-up, or all of them if none is."""
    of_role = [r for r in records if role is None or r.get(keys.ROLE, constants.ROLE_WORKER) == role]
    after_warmup = [r for r in of_role if not r.get(keys.WARMUP, False)]
    return after_warmup or of_role


def is_number(value: Any) -> TypeGuard[float]:
    """A finite int or float, not a bool: a value a record or summary can chart."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def nodes_of(usage_by_rank: Mapping[Any, Mapping[str, Any]] | None) -> dict[int, str]:
    """{rank: node} from what each rank recorded of itself (its usage, keys.NODE)."""
    return {int(rank): used[keys.NODE] for rank, used in (usage_by_rank or {}).items()
            if isinstance(used, Mapping) and isinstance(used.get(keys.NODE), str)}
