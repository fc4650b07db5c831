"""What `ringleader run` says of `spec.scheduling.placement`: it does not apply on one machine; called by cli.py."""

from __future__ import annotations

from typing import Sequence

from ringleader.api.trial import Trial


def note(trials: Sequence[Trial]) -> str | None:
    """One line saying that the trials' placement does not apply locally; None when none asks for one."""
    placed = sorted({t.spec.scheduling.placement.label() for t in trials if not t.spec.scheduling.placement.is_any()})
    if not placed:
        return None
    return (f"note: `scheduling.placement` ({', '.join(placed)}) does not apply to `ringleader run`: every rank runs "
            "on this machine, so every exchange crosses its loopback, not a network; apply the experiment to a "
            "cluster to place ranks on nodes")
