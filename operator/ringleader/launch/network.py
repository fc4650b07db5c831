"""What `ringleader run` refuses of `spec.network`: caps only a cluster's network can enforce; called by cli.py.

Local ranks talk over the loopback, which no CNI shapes. Emulating instead would measure something
else (the runtime sleeps; the kernel's token bucket queues, bursts and paces TCP), so a trial that asks
for the network's cap is refused rather than quietly run another way.
"""

from __future__ import annotations

from typing import Sequence

from ringleader.api.spec import BandwidthEnforcement
from ringleader.api.trial import Trial


def refusal(source: str, trials: Sequence[Trial]) -> str | None:
    """The message refusing the run when a trial's cap is to be enforced by the network; None when none is."""
    enforced = [t for t in trials if t.spec.network.enforcement == BandwidthEnforcement.NETWORK]
    if not enforced:
        return None
    return (f"{source}: `spec.network.enforcement` is Network (trial {enforced[0].name}), which `ringleader run` "
            "cannot apply: its ranks are local processes on the loopback, which no network plugin shapes. Set "
            "`network.enforcement: Emulated` (or leave it out) to have the runtime emulate the cap locally, or apply "
            "the experiment to a cluster whose CNI chains the bandwidth plugin (docs/operator.md)")
