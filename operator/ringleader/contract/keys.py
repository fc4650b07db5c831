"""The names of what ranks record and trials summarise: MLflow metric keys, read by runtime, tracking and analysis alike."""

from __future__ import annotations

# Per worker, per iteration (seconds, bytes, iterations).
TIME_DATA = "time/data"
TIME_FORWARD = "time/forward"
TIME_BACKWARD = "time/backward"
TIME_COMM = "time/comm"
TIME_WAIT = "time/wait"
TIME_UPDATE = "time/update"
TIME_ITERATION = "time/iteration"
BYTES_SENT = "bytes/sent"
BYTES_RECEIVED = "bytes/received"
STALENESS = "staleness"  # iterations between the weights a gradient was computed on and the server's clock
LOSS = "loss"
# Per server, per aggregation.
SERVER_AGGREGATION = "server/aggregation"
SERVER_QUEUE_DEPTH = "server/queue_depth"
SERVER_THRESHOLD = "server/threshold"  # DSSP: the staleness threshold granted (s_L + r)

COMPUTE_PHASES = (TIME_DATA, TIME_FORWARD, TIME_BACKWARD, TIME_UPDATE)

# The trial summary values shown in the experiment status and the comparison table.
THROUGHPUT = "throughput"  # samples per second, all workers together
P50 = "iterationTimeP50Seconds"
P95 = "iterationTimeP95Seconds"
COMPUTE_FRACTION = "computeFraction"
COMM_FRACTION = "commFraction"
WAIT_FRACTION = "waitFraction"
STRAGGLER_RANK = "stragglerRank"
STATUS_KEYS = (THROUGHPUT, P50, P95, COMPUTE_FRACTION, COMM_FRACTION, WAIT_FRACTION, STRAGGLER_RANK)
# Summary extras read by reports (analysis/summary.py writes them): means per worker iteration, and the loss.
COMPUTE_SECONDS = "computeSeconds"
COMM_SECONDS = "commSeconds"
WAIT_SECONDS = "waitSeconds"
BYTES_PER_ITERATION = "bytesPerIteration"
LOSS_LAST = "lossLast"
