"""The names of what ranks record and trials summarise: MLflow metric keys, read by runtime, tracking and the models
alike."""

from __future__ import annotations

# The fields every record of iterations.jsonl carries besides its metrics (contract/records.py): the runtime writes
# all four on each one.
STEP = "step"  # the iteration, from 0
ROLE = "role"  # api/constants.py ROLE_WORKER or ROLE_PS
WARMUP = "warmup"  # true: left out of the summary timings (warm-up, or profiled)
TIMESTAMP = "timestamp"  # seconds since the epoch, when the iteration ended

# Per worker, per iteration (seconds, bytes, iterations).
TIME_DATA = "time/data"
TIME_FORWARD = "time/forward"
TIME_BACKWARD = "time/backward"
TIME_COMM = "time/comm"
TIME_WAIT = "time/wait"
TIME_UPDATE = "time/update"
TIME_EVAL = "time/eval"  # the held-out evaluation (the evaluating worker; zero on the others)
TIME_OTHER = "time/other"  # the loop's own work between iterations: recording, progress lines, link counters
TIME_CODEC = "time/codec"  # encoding and decoding what spec.compression compresses (runtime/compression.py)
TIME_ITERATION = "time/iteration"
BYTES_SENT = "bytes/sent"
BYTES_RECEIVED = "bytes/received"
BYTES_UNCOMPRESSED = "bytes/uncompressed"  # what bytes/sent would have been without spec.compression
# bytes/sent by where they went (contract/levels.py), as the architecture's algorithm sends them: to ranks of its own
# pod, to other pods of its node, to other nodes. They add up to bytes/sent.
BYTES_INSIDE_POD = "bytes/inside_pod"
BYTES_INSIDE_NODE = "bytes/inside_node"
BYTES_ACROSS_NODES = "bytes/across_nodes"
# A two-level architecture's time/comm, split: the part its steps inside the pod took, and the part across pods
# (the emulated card's pacing included). They add up to time/comm.
TIME_COMM_INTRA = "time/comm_intra"
TIME_COMM_INTER = "time/comm_inter"
# Measured on the rank's network interface (runtime/netcounters.py), after warm-up, when it can be read:
LINK_TX = "link/tx_bytes_per_second"  # bytes/s the interface sent over the iteration (lo: every local rank's)
LINK_RX = "link/rx_bytes_per_second"  # bytes/s it received
LINK_UTILIZATION = "link/utilization"  # LINK_TX in bits/s over the link rate, when one is known (a fraction)
# What a byte cost the host (runtime/usage.py), read from the kernel's counters once per iteration:
CPU_COMM = "cpu/comm"  # CPU seconds of the process, every thread (gloo's too), inside the synchronizer
# (comm, wait, update)
CPU_THROTTLED = "cpu/throttled"  # seconds the rank's cgroup was throttled by its CPU quota over the iteration
# (cpu.stat); absent where the cgroup's cpu.stat cannot be read
STALENESS = "staleness"  # iterations between the weights a gradient was computed on and the servers' (smallest) clock
LOSS = "loss"
# Per evaluation, in the evaluating worker's record of the iteration it followed (spec.model.evaluation).
EVAL_LOSS = "eval/loss"  # mean cross entropy over the held-out samples
EVAL_ACCURACY = "eval/accuracy"  # fraction of held-out samples (tokens) classified right
EVAL_SECONDS = "eval/seconds"  # how long the evaluation took (inside the iteration's time/eval)
# Per server, per aggregation.
SERVER_AGGREGATION = "server/aggregation"
SERVER_QUEUE_DEPTH = "server/queue_depth"
SERVER_THRESHOLD = "server/threshold"  # DSSP: the staleness threshold granted (s_L + r)

COMPUTE_PHASES = (TIME_DATA, TIME_FORWARD, TIME_BACKWARD, TIME_UPDATE)
TIME_COMPUTE = "time/compute"  # a trial series' sum of COMPUTE_PHASES (models.summary.trial_series)

# The trial summary values shown in the experiment status and the comparison table.
THROUGHPUT = "throughput"  # samples per second, all workers together
P50 = "iterationTimeP50Seconds"
P95 = "iterationTimeP95Seconds"
COMPUTE_FRACTION = "computeFraction"
COMM_FRACTION = "commFraction"
WAIT_FRACTION = "waitFraction"
STRAGGLER_RANK = "stragglerRank"
# Time to target (spec.model.target): seconds from the trial's first iteration to the end of the iteration
# whose parameters first reached it (evaluations before it included), and iterations of the evaluating worker.
TARGET_SECONDS = "targetSeconds"
TARGET_ITERATIONS = "targetIterations"
# Where the ranks ran (models/cross_node.py), from the node each recorded: how many nodes, and the share of the
# architecture's exchanged bytes whose two ranks were on different nodes (None: no rank exchanged any).
NODE_COUNT = "nodeCount"
CROSS_NODE_BYTE_SHARE = "crossNodeByteShare"
STATUS_KEYS = (THROUGHPUT, P50, P95, COMPUTE_FRACTION, COMM_FRACTION, WAIT_FRACTION, STRAGGLER_RANK,
               TARGET_SECONDS, TARGET_ITERATIONS, NODE_COUNT, CROSS_NODE_BYTE_SHARE)
# The trial summary's other values (models/summary.py; seconds, bytes, fractions, counts).
WORKERS = "workers"
MEASURED_ITERATIONS = "measuredIterations"
BATCH_SIZE = "batchSize"
COMPUTE_SECONDS = "computeSeconds"
COMM_SECONDS = "commSeconds"
WAIT_SECONDS = "waitSeconds"
OTHER_SECONDS = "otherSeconds"  # time/eval + time/other: evaluation and the loop's own work
CODEC_SECONDS = "codecSeconds"  # time/codec: its own share, neither compute nor communication
CODEC_FRACTION = "codecFraction"
COMPRESSION = "compression"  # spec.compression.method, a label
COMPRESSION_RATIO = "compressionRatio"  # bytes/sent over bytes/uncompressed, all worker iterations together
BYTES_PER_ITERATION = "bytesPerIteration"
# bytesPerIteration by where the bytes went (bytes/inside_pod, bytes/inside_node, bytes/across_nodes): means per
# worker iteration, where the trial's ranks recorded them.
BYTES_INSIDE_POD_PER_ITERATION = "bytesInsidePodPerIteration"
BYTES_INSIDE_NODE_PER_ITERATION = "bytesInsideNodePerIteration"
BYTES_ACROSS_NODES_PER_ITERATION = "bytesAcrossNodesPerIteration"
COMM_INTRA_SECONDS = "commIntraSeconds"  # time/comm_intra and time/comm_inter, means per worker iteration
COMM_INTER_SECONDS = "commInterSeconds"
STALENESS_MEAN = "stalenessMean"
STALENESS_MAX = "stalenessMax"
SERVER_AGGREGATION_SECONDS = "serverAggregationSeconds"
SERVER_QUEUE_DEPTH_MEAN = "serverQueueDepthMean"
SENT_OVER_BANDWIDTH = "sentOverBandwidth"  # bytes/sent per second over spec.network.bandwidth: computed, not measured
BANDWIDTH_ENFORCEMENT = "bandwidthEnforcement"  # what applied spec.network.bandwidth: Emulated, Network or
# None (no cap)
LINK_INTERFACE = "linkInterface"  # the interface the LINK_* values were measured on, and whether it is shared
LINK_BITS_PER_SECOND = "linkBitsPerSecond"  # the link rate LINK_UTILIZATION is measured against
LINK_TX_MEAN = "linkTxBytesPerSecondMean"  # over every worker iteration after warm-up
LINK_TX_P95 = "linkTxBytesPerSecondP95"
LINK_UTILIZATION_MEAN = "linkUtilizationMean"
LINK_UTILIZATION_P95 = "linkUtilizationP95"
COMM_CPU_SECONDS = "commCpuSecondsMedian"  # the median over worker iterations of CPU_COMM
THROTTLED_SECONDS = "throttledSecondsMedian"  # the median over worker iterations of CPU_THROTTLED, where recorded
LOSS_FIRST = "lossFirst"
LOSS_LAST = "lossLast"
EVAL_LOSS_LAST = "evalLossLast"  # the last evaluation's eval/loss
EVAL_ACCURACY_LAST = "evalAccuracyLast"  # the last evaluation's eval/accuracy (a fraction)
EVAL_ACCURACY_BEST = "evalAccuracyBest"  # the highest eval/accuracy of any evaluation
EVALUATIONS = "evaluations"  # evaluations recorded
PER_RANK = "perRank"  # {rank: {ITERATIONS, ITERATION_SECONDS, COMPUTE_SECONDS, COMM_SECONDS, WAIT_SECONDS}}
# A rank's summary.json (models.summary.rank_summary): these, LOSS_FIRST, LOSS_LAST, MEASURED_ITERATIONS,
# and the mean after warm-up of each per-iteration metric above, under its own name.
ITERATIONS = "iterations"
ITERATION_SECONDS = "iterationSeconds"
# What a rank's process used over its iterations after warm-up (runtime/usage.py): in its summary.json, and
# every rank's in the trial summary's USAGE {rank: {...}}.
USAGE = "usage"
HOST = "host"  # the machine's name (a pod's own): ranks of one host share its CPUs
NODE = "node"  # the node the rank ran on (contract.NODE_NAME): ranks of one node share its NIC
POD = "pod"  # the host name of the rank's pod ("worker-1"): ranks of one pod share its CPUs, memory and GPUs
LOCAL_RANK = "localRank"  # the rank's place in its pod (contract.LOCAL_RANK): its GPU there
CPUS = "cpus"  # CPUs the process may run on: its affinity, capped by a cgroup CPU quota (a pod's limit)
MACHINE_CPUS = "machineCpus"  # its affinity alone: the CPUs of the node (machine) its ranks share,
# whatever each pod's quota
THREADS = "threads"  # torch's intra-op threads
CPU_SECONDS = "cpuSeconds"  # user + system CPU time of the process, all its threads
WALL_SECONDS = "wallSeconds"
CPU_UTILIZATION = "cpuUtilization"  # CPU_SECONDS / WALL_SECONDS: 1 = one CPU busy all along (top's 100 %)
PEAK_RSS_BYTES = "peakRssBytes"  # the most resident memory the process held
RINGLEADER = "ringleader"  # the versions the rank ran with: an operator's sweep run names those of its pods
TORCH = "torch"
PYTHON = "python"
# The machine's 1-minute load average over its CPUs when the rank's training ended: every process that wanted a CPU,
# the trial's own and other work's, per CPU (a pod sees its node's).
LOAD_PER_CPU = "loadPerCpu"
# The trial summary's predicted iteration times (models/prediction.py), written by the lowest worker rank:
# PREDICTION: {PREDICTED_ARCHITECTURE, WORKERS, ITERATION_SECONDS, MEASURED_ITERATION_SECONDS, ERROR_FRACTION,
#              COMPUTE_SECONDS, LINK_BITS_PER_SECOND, LATENCY_SECONDS, LINK_KIND, FIT, CANNOT_PREDICT, HOST_NOTE,
#              ARCHITECTURES: {label: {ITERATION_SECONDS, COMM_SECONDS, BAND_FRACTION, BAND_MEDIAN_FRACTION,
#              BAND_NOTE, HOST_SECONDS, WIRE_SECONDS, BOUND, NIC_UTILIZATION}},
#              TIMELINE: {TIMELINE_BACKWARD_SECONDS, TIMELINE_BUCKETS}} (a bucketed architecture's trial only);
#              labels 1ps, 4ps, p2p, ring. When the models could not be calibrated:
#              {PREDICTION_UNAVAILABLE: why}.
PREDICTION = "prediction"
PREDICTED_ARCHITECTURE = "architecture"  # the label of this trial's own architecture
MEASURED_ITERATION_SECONDS = "measuredIterationSeconds"  # median time/iteration over worker iterations (the p50)
ERROR_FRACTION = "errorFraction"  # |predicted - measured| / measured
LATENCY_SECONDS = "latencySeconds"  # the per-message latency a of the link the models use
FIT = "fit"  # how the link was calibrated, in words
LINK_KIND = "linkKind"  # emulated, enforced, loopback or network (models/calibration.py)
ARCHITECTURES = "architectures"
BAND_FRACTION = "errorBandFraction"  # the |error| 9 in 10 held-out predictions of this kind kept within; None: none
BAND_MEDIAN_FRACTION = "errorBandMedianFraction"  # the validated median |error|
BAND_NOTE = "errorBandNote"  # why there is no band, or where it does not quite apply
PREDICTION_UNAVAILABLE = "unavailable"  # why the trial has no prediction
HOST_SECONDS = "hostSeconds"  # the exchange's host term: the busiest rank's CPU for its bytes at its quota
# (resources.py)
WIRE_SECONDS = "wireSeconds"  # its wire term: each node's NIC shared by the flows that cross it, the busiest's
BOUND = "boundBy"  # "host" or "wire": the longer of the two
NIC_UTILIZATION = "nicUtilization"  # the busiest NIC's bits over what it could carry in the predicted iteration
HOST_NOTE = "hostNote"  # why the host term is not priced (records before cpu/comm); None where it is
CANNOT_PREDICT = "cannotPredict"  # why the models' numbers are no prediction on this kind of link; None where they are
# The DAG model's iteration of the trial's own bucketed architecture (the report's overlap figure draws it): backward's
# time and each bucket's [start, end] in launch order, in seconds from backward's start.
TIMELINE = "timeline"
TIMELINE_BACKWARD_SECONDS = "backwardSeconds"
TIMELINE_BUCKETS = "buckets"
# The link measured at the trial's start (runtime/linkprobe.py), written by the first worker rank:
# LINK_PROBE: {PROBE_SHARED_HOST, PROBE_POINT_TO_POINT: {PROBE_RANKS, PROBE_SAMPLES, PROBE_SUSTAINED_SECONDS},
#              PROBE_COLLECTIVE: {WORKERS, PROBE_SAMPLES, PROBE_SUSTAINED_SECONDS}}; samples are [bytes, seconds] pairs,
#              smallest first: the median per message of trains sent back to back. A series without
#              PROBE_SUSTAINED_SECONDS is an older probe's: the fastest of single messages.
LINK_PROBE = "linkProbe"
PROBE_SHARED_HOST = "sharedHost"  # every rank on one machine (a local run): the link is its loopback and CPU
PROBE_POINT_TO_POINT = "pointToPoint"  # one way: half a ping-pong's round trip
PROBE_COLLECTIVE = "collective"  # one allreduce of every worker
PROBE_RANKS = "ranks"
PROBE_SAMPLES = "samples"
PROBE_SUSTAINED_SECONDS = "sustainedSeconds"  # how long the largest size was sent, all its timed trains together
# The trial summary's PLACEMENT (models/cross_node.py): {PLACEMENT_REQUESTED: spec.scheduling.placement's label,
#   PLACEMENT_NODES: {rank: node}, PLACEMENT_RANKS_PER_NODE: {node: ranks}, PLACEMENT_CROSS_NODE_PAIRS: [[rank, rank]]}
PLACEMENT = "placement"
PLACEMENT_REQUESTED = "requested"
PLACEMENT_NODES = "nodes"
PLACEMENT_RANKS_PER_NODE = "ranksPerNode"
PLACEMENT_CROSS_NODE_PAIRS = "crossNodePairs"
