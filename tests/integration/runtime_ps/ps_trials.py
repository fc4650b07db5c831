"""The trials of the parameter-server and peer-to-peer runtime tests: two workers, one of them a straggler."""

from __future__ import annotations

SSP_STALENESS = 2
DSSP_BOUNDS = (2, 6)
ITERATIONS = 16
TRIAL_TIMEOUT_SECONDS = 120.0


def sync_spec(paradigm: str) -> dict:
    if paradigm == "SSP":
        return {"paradigm": "SSP", "staleness": SSP_STALENESS}
    if paradigm == "DSSP":
        return {"paradigm": "DSSP", "staleness": DSSP_BOUNDS[0], "maxStaleness": DSSP_BOUNDS[1]}
    return {"paradigm": paradigm}


def straggler_spec(architecture: str, paradigm: str, servers: int = 1) -> dict:
    """Two workers of an mlp on 8x8 images: `fast`, and `slow` whose compute takes ten times as long.

    Batches of 512 make compute (not the exchange of ~0.5 MB) most of an iteration, so the straggler is one:
    about 7 ms of compute for the fast worker, 70 ms for the slow one. The stretch is a sleep, so a machine busy
    with other tests (the exchange and the servers slowed, not the sleep) still leaves it far behind."""
    return {
        "architecture": architecture,
        "parameterServers": {"replicas": servers},
        "workers": {"replicas": 2, "groups": [{"name": "fast", "replicas": 1},
                                              {"name": "slow", "replicas": 1, "slowdownPercent": 1000}]},
        "sync": sync_spec(paradigm),
        "model": {"name": "mlp", "batchSize": 512, "iterations": ITERATIONS, "warmupIterations": 2,
                  "optimizer": {"learningRate": 0.05}},
    }
