"""The cyclic collector's work inside the operator, for bench_operator.py, which puts this directory first on the
operator's PYTHONPATH (Python imports `sitecustomize` at start-up).

Each collection's generation and seconds are summed (`gc.callbacks`) and written, once a second by a daemon
thread, as JSON to $RINGLEADER_BENCH_GC_FILE; the benchmark reads the file before and after what it measures.
$RINGLEADER_BENCH_GC_THRESHOLDS ("700,10,10") sets the collector's thresholds at start-up, for comparing values
on an operator that sets none of its own (one that does, as ringleader's does with `handlers.GC_THRESHOLDS`,
overrides them when it starts).
"""

import gc
import json
import os
import threading
import time

_FILE = os.environ.get("RINGLEADER_BENCH_GC_FILE")
_totals = {generation: {"collections": 0, "seconds": 0.0} for generation in range(3)}
_started = [0.0]


def _time_collection(phase: str, info: dict) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
    else:
        total = _totals[info["generation"]]
        total["collections"] += 1
        total["seconds"] += time.perf_counter() - _started[0]


def _write_every_second() -> None:
    while True:
        time.sleep(1.0)
        temporary = f"{_FILE}.tmp"
        with open(temporary, "w") as out:
            json.dump({"thresholds": gc.get_threshold(), "generations": _totals}, out)
        os.replace(temporary, _FILE)


if os.environ.get("RINGLEADER_BENCH_GC_THRESHOLDS"):
    gc.set_threshold(*(int(v) for v in os.environ["RINGLEADER_BENCH_GC_THRESHOLDS"].split(",")))
if _FILE:
    gc.callbacks.append(_time_collection)
    threading.Thread(target=_write_every_second, name="gc-probe", daemon=True).start()
