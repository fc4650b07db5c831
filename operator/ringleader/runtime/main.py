"""Entry point of every rank, in a pod or started by `ringleader run`: read the contract, train or serve, summarize.

Runbook (what `ringleader run` and the operator's pods do for you; from the repository root):

    # 1. a trial file: the RingAllReduce trial of the quickstart sweep, resolved
    PYTHONPATH=operator python -c 'import sys; from ringleader.api import experiment, trial; \
        trials = trial.expand(experiment.load(sys.argv[1])).trials; \
        print(next(t for t in trials if t.spec.architecture.value == "RingAllReduce").model_dump_json())' \
        examples/quickstart.yaml > /tmp/trial.json

    # 2. one process per rank: here 2 workers, ranks 0 and 1 (a ParameterServer trial puts its
    #    servers first: RINGLEADER_ROLE=ps for ranks 0..k-1, then the workers)
    for rank in 0 1; do
      RINGLEADER_ROLE=worker RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
      RINGLEADER_TRIAL_FILE=/tmp/trial.json RINGLEADER_OUTPUT_DIR=/tmp/ringleader \
      PYTHONPATH=operator python -m ringleader.runtime &
    done; wait

    # 3. the records (format: contract/records.py)
    cat /tmp/ringleader/quickstart-2/summary.json; wc -l /tmp/ringleader/quickstart-2/rank-*/iterations.jsonl

Optional knobs (runtime/settings.py): RINGLEADER_TIMEOUT_SECONDS (300), RINGLEADER_STALL_TIMEOUT_SECONDS
(60), RINGLEADER_BUCKET_BYTES (25 MiB), RINGLEADER_TRACE_ITERATIONS (20), RINGLEADER_FINISH_TIMEOUT_SECONDS (6 h);
how long a pod's rank waits for MLflow to take its last records is the trial's tracking.recordsWaitSeconds. Exit status
0 on success; otherwise 1 and one line on stderr saying which rank failed and why (also the pod's
termination message), "failed (permanent):" when no restart can fix it (PERMANENT_ERRORS).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import sys
import time
import traceback
from typing import Any, Callable

import torch
import torch.distributed as dist

from ringleader.models import prediction, summary
from ringleader.api import constants, variants
from ringleader.api.variants import Architecture
from ringleader.api.trial import Slot, Trial
from ringleader.contract import environment as contract
from ringleader.contract import failures, keys, records
from ringleader.contract import levels as levels_
from ringleader.runtime import (
    datafiles,
    ending,
    heartbeat,
    hierarchical_ring,
    interfaces,
    linkprobe,
    models,
    netcounters,
    parameter_server,
    parent,
    peer_to_peer,
    pod_aggregation,
    ring,
    settings,
    termination,
    termination_message,
    usage,
    worker,
)

LOOPBACK = ("127.0.0.1", "localhost", "::1")
PERMANENT_ERRORS = (models.ModelError, datafiles.DataError)
"""Errors a restart of the trial cannot fix: the model cannot be imported or built, its factory raises, the
dataset is invalid. Reported as permanent (contract/failures.py), so the operator fails the trial at once."""


class RankError(RuntimeError):
    """This rank cannot go on; the message is the one-line reason reported to the operator."""


def load_trial(path: str) -> Trial:
    try:
        with open(path, encoding="utf-8") as file:
            return Trial.model_validate_json(file.read())
    except FileNotFoundError:
        raise RankError(f"trial file {path} not found ({contract.TRIAL_FILE})") from None
    except ValueError as error:
        raise RankError(f"trial file {path} is not a valid trial: {str(error).splitlines()[0]}") from None


def pick_device(slot: Slot) -> torch.device:
    """CUDA when the slot asked for GPUs and one is visible, `cuda:LOCAL_RANK`: the pod's ranks see its GPUs, one
    each (modulo the visible ones, where a local run shares fewer round robin); otherwise the CPU, with a warning if
    GPUs were asked for."""
    if slot.resources.gpu > 0:
        if torch.cuda.is_available():
            index = slot.local_rank % torch.cuda.device_count()
            torch.cuda.set_device(index)
            return torch.device("cuda", index)
        print(f"warning: {slot.hostname} asked for {slot.resources.gpu} GPU(s) but CUDA is not available; "
              "running on the CPU", file=sys.stderr, flush=True)
    return torch.device("cpu")


def cpu_threads(slot: Slot) -> int:
    """Intra-op threads: the rank's share of its pod's whole CPUs, at least one ("500m" -> 1, "2" -> 2; "4" split by
    2 ranks -> 2 each), so that the pod's ranks together do not oversubscribe its CPU quota."""
    quantity = slot.resources.cpu
    cores = float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    return max(1, math.floor(cores / slot.local_world_size))


def backend_for(trial: Trial, device: torch.device) -> str:
    return variants.ARCHITECTURES[trial.spec.architecture].backend(device.type)


SYNCHRONIZERS: dict[Architecture, Callable[[Trial, contract.PodEnvironment, torch.device, settings.RankSettings,
                                            levels_.Levels], interfaces.Synchronizer]] = {
    Architecture.PARAMETER_SERVER: parameter_server.WorkerSynchronizer,
    Architecture.PEER_TO_PEER: peer_to_peer.PeerSynchronizer,
    Architecture.RING_ALL_REDUCE: ring.RingSynchronizer,
    Architecture.HIERARCHICAL_RING_ALL_REDUCE: hierarchical_ring.synchronizer,
    Architecture.PARAMETER_SERVER_POD_AGGREGATION: pod_aggregation.PodSynchronizer,
}
"""SYNCHRONIZERS: per architecture, the synchronizer of its worker ranks, built as (trial, env, device, knobs,
levels)."""


def start_publisher(env: contract.PodEnvironment, trial: Trial, rank_dir):
    """The LivePublisher of this rank's records when there is a run to publish to, now or once the operator has
    created it (pods); None in local runs, whose launcher publishes after each trial."""
    if not env.publishes:
        return None
    from ringleader.tracking import live  # imports MLflow: only ranks that publish pay for it

    publisher = live.LivePublisher(env, trial, rank_dir)
    publisher.start()
    return publisher


def run_role(trial: Trial, env: contract.PodEnvironment, slot: Slot, recorder: records.RankRecorder,
             device: torch.device, knobs: settings.RankSettings, levels: levels_.Levels) -> None:
    """Serve or train, by role and architecture."""
    if slot.role == constants.ROLE_PS:
        parameter_server.serve(trial, env, recorder, knobs, levels)
        return
    synchronizer = SYNCHRONIZERS[trial.spec.architecture](trial, env, device, knobs, levels)
    # Local ranks all go through the loopback; a pod has its own eth0, which its ranks share.
    local = env.master_addr in LOOPBACK
    worker.train(trial, env, synchronizer, recorder, device, trace_iterations=knobs.trace_iterations,
                 interface=netcounters.LOOPBACK if local else netcounters.pod_interface(),
                 ranks_sharing_interface=env.world_size if local else env.local_world_size)


def gather_records(recorder: records.RankRecorder, used: dict, destination: int,
                   group) -> tuple[dict[int, list[dict]], dict[int, dict]] | None:
    """Every rank's iteration records and what its process used (usage.Meter.measure), by rank, on `destination` only
    (None elsewhere)."""
    everything: list[Any] | None = [None] * dist.get_world_size() if dist.get_rank() == destination else None
    dist.gather_object((recorder.rank, recorder.iterations, used), everything, dst=destination, group=group)
    if everything is None:
        return None
    return {rank: iterations for rank, iterations, _ in everything}, {rank: spent for rank, _, spent in everything}


def gather_levels(trial: Trial, env: contract.PodEnvironment, group) -> levels_.Levels:
    """Every rank's node (and this start's id, rank 0's clock), gathered once at the start: where each of its bytes
    goes (contract/levels.py)."""
    everything: list[Any] = [None] * env.world_size
    dist.all_gather_object(everything, (env.node_name or "", time.time_ns()), group=group)
    return levels_.Levels.of(trial, {rank: node for rank, (node, _) in enumerate(everything)}, str(everything[0][1]))


def write_trial_summary(trial: Trial, env: contract.PodEnvironment, document: dict) -> None:
    records.write_json(records.trial_dir(env.output_dir, trial.name) / records.SUMMARY_FILE, document)
    # In a pod, the operator reads the summary from the termination message (at most 4 KiB).
    termination_message.write(json.dumps(summary.compact(document)))


def probe_link(trial: Trial, env: contract.PodEnvironment, knobs: settings.RankSettings) -> dict | None:
    """The link the ranks see, measured by every rank together before training (linkprobe.py); the document on
    the first worker rank. The workers' group is created by every rank, in the same order everywhere."""
    workers = [slot.rank for slot in trial.worker_slots()]
    group = dist.new_group(ranks=workers, backend="gloo", timeout=datetime.timedelta(seconds=knobs.timeout_seconds)) \
        if len(workers) > 1 else None
    # A ring's bucket is the largest message a trial sends (a model's exchange larger than it is probed at the bound).
    return linkprobe.measure(trial, env.rank, group, shared_host=env.master_addr in LOOPBACK,
                             largest_bytes=knobs.bucket_bytes)


def predict(trial: Trial, gathered: dict[int, list[dict]], recorder: records.RankRecorder,
            knobs: settings.RankSettings, probed: dict | None, used: dict | None = None) -> dict:
    """The trial summary's prediction (models/prediction.py), calibrated on the link probed at the start, this
    rank's layers.json, every worker's records and how crowded the ranks' CPUs were (`used`, the summary's usage);
    when they cannot calibrate the models (e.g. one ring worker), the reason, in the log and the summary."""
    try:
        layers = json.loads((recorder.directory / records.LAYERS_FILE).read_text())
        predicted = prediction.predict_trial(trial, gathered, layers, recorder.rank, probed, knobs.bucket_bytes, used)
    except FileNotFoundError:
        reason = "no layers.json: no iteration was traced (RINGLEADER_TRACE_ITERATIONS, warmupIterations)"
    except ValueError as error:
        reason = str(error)
    else:
        print(f"prediction: {prediction.headline(predicted)}", flush=True)
        return predicted.to_document()
    print(f"prediction: none: {reason}", flush=True)
    return {keys.PREDICTION_UNAVAILABLE: reason}


def finish_timeout(trial: Trial, knobs: settings.RankSettings) -> datetime.timedelta:
    """How long a finished rank waits for the others at the end: the trial's deadline if it has one."""
    seconds = trial.spec.run_policy.active_deadline_seconds or knobs.finish_timeout_seconds
    return datetime.timedelta(seconds=max(seconds, knobs.timeout_seconds))


def log_configuration(trial: Trial, env: contract.PodEnvironment, device: torch.device, backend: str,
                      knobs: settings.RankSettings) -> None:
    spec = trial.spec
    first = trial.worker_slots()[0]
    config = {
        "trial": trial.name,
        "architecture": spec.architecture.value,
        "paradigm": spec.sync.paradigm.value,
        "ranks": env.world_size,
        "workers": len(trial.worker_slots()),
        "model": spec.model.name,
        "data": spec.data.format.value + (f" {spec.data.path}" if spec.data.path else ""),
        "evaluateEvery": spec.model.evaluation.every_iterations if spec.model.evaluation else None,
        "batchSize": spec.model.batch_size,
        "iterations": spec.model.iterations,
        "warmupIterations": spec.model.warmup_iterations,
        "optimizer": f"{spec.model.optimizer.name.value} lr={spec.model.optimizer.learning_rate}",
        "bandwidth": spec.network.bandwidth or "unshaped",
        "bandwidthEnforcement": spec.network.enforced_by(),
        "compression": spec.compression.method.value,
        "device": str(device),
        "backend": backend,
        "ranksPerPod": first.local_world_size,
        "threadsPerRank": torch.get_num_threads(),  # the pod's whole CPUs split among its ranks (cpu_threads)
        "timeoutSeconds": knobs.timeout_seconds,
        "bucketBytes": knobs.bucket_bytes,
        "outputDir": str(records.trial_dir(env.output_dir, trial.name)),
    }
    print("config: " + json.dumps(config), flush=True)


@dataclasses.dataclass
class Rank:
    """This rank's contract and what it started so far: what a failure or a SIGTERM publishes and stops."""

    env: contract.PodEnvironment
    knobs: settings.RankSettings
    trial: Trial
    slot: Slot
    recorder: records.RankRecorder | None = None
    publisher: Any = None  # a tracking.live.LivePublisher, imported by the ranks that publish only
    beats: heartbeat.Heartbeat | None = None
    levels: levels_.Levels | None = None  # every rank's pod and node, once they are gathered (join)

    @property
    def first_worker(self) -> int:
        """The lowest worker rank: it logs the configuration and writes the trial's summary."""
        return self.trial.worker_slots()[0].rank


def main(environ=os.environ) -> int:
    rank = read_contract(environ)
    if rank.env.publishes:  # a pod's rank: SIGTERM publishes first (termination.py)
        termination.on_termination(lambda: ending.publish_on_termination(rank.recorder, rank.publisher))
    torch.set_num_threads(cpu_threads(rank.slot))
    device = pick_device(rank.slot)
    try:
        models.check_importable(rank.trial.spec.model)
        control, probed = join(rank, device)
        recorder = start_recording(rank)
        used = train_or_serve(rank, recorder, device)
        found = gather_records(recorder, used, rank.first_worker, control)
        if found is not None:
            summarize_trial(rank, recorder, *found, probed)
        else:
            termination_message.write(failures.ended_by_runtime(len(recorder.iterations)))
    except (Exception, SystemExit) as error:  # noqa: BLE001 - any failure ends this rank, a sys.exit in user code too
        traceback.print_exc(file=sys.stdout)
        if rank.recorder is not None:
            rank.recorder.close()
        ending.fail_publishing(rank.env, rank.recorder, rank.publisher, ending.describe(error, rank.beats),
                               permanent=isinstance(error, PERMANENT_ERRORS))
    recorder.close()
    ending.finish_publishing(rank.env, rank.publisher, rank.trial.spec.tracking.records_wait_seconds)
    dist.destroy_process_group()
    return 0


def read_contract(environ) -> Rank:
    """The pod's contract and this rank's slot of the trial; a fault in them fails the rank permanently, since
    it would be the same again after a restart."""
    env = None
    try:
        env = contract.PodEnvironment.from_environ(environ)
        termination_message.leave_in(env.termination_file)  # a pod of several ranks: the file its agent gave it
        knobs = settings.RankSettings.from_environ(environ)
        if environ.get(contract.LAUNCHER_PID):  # a local run or a pod's agent: leave with it, on any OS
            parent.watch(int(environ[contract.LAUNCHER_PID]))
        trial = load_trial(env.trial_file)
        slots = trial.slots()
        if env.world_size != len(slots):
            raise RankError(f"WORLD_SIZE={env.world_size} but trial {trial.name} has {len(slots)} ranks")
        slot = slots[env.rank]
        if slot.role != env.role:
            raise RankError(f"{contract.ROLE}={env.role} but rank {env.rank} of trial {trial.name} is a {slot.role}")
        if (env.local_rank, env.local_world_size, env.group_rank) != (slot.local_rank, slot.local_world_size,
                                                                   slot.group_rank):
            raise RankError(f"{contract.LOCAL_RANK}={env.local_rank}, "
                            f"{contract.LOCAL_WORLD_SIZE}={env.local_world_size}"
                            f" and {contract.GROUP_RANK}={env.group_rank} but rank {env.rank} of trial {trial.name} "
                            f"is local rank {slot.local_rank} of {slot.local_world_size} in pod {slot.group_rank}")
    except (contract.ContractError, RankError, ValueError) as error:
        ending.fail(env, str(error), permanent=True)
    return Rank(env, knobs, trial, slot)


def join(rank: Rank, device: torch.device) -> tuple[Any, dict | None]:
    """Join the trial's process group, make the control group of the end-of-run gather and measure the link
    together: (control group, the probed link on the first worker rank)."""
    env, trial, knobs = rank.env, rank.trial, rank.knobs
    backend = backend_for(trial, device)
    if env.master_addr in LOOPBACK:
        # Keep gloo's pairs on loopback too: by default it binds to the address the hostname resolves to.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ[contract.MASTER_ADDR], os.environ[contract.MASTER_PORT] = env.master_addr, str(env.master_port)
    dist.init_process_group(backend, init_method="env://", rank=env.rank, world_size=env.world_size,
                            timeout=datetime.timedelta(seconds=knobs.timeout_seconds))
    # The end-of-run gather has its own group: on gloo even when gradients go over NCCL (it moves
    # Python objects), and with a longer timeout, since under ASP the slowest rank may finish far behind.
    control = dist.new_group(backend="gloo", timeout=finish_timeout(trial, knobs))
    rank.levels = gather_levels(trial, env, control)
    probed = probe_link(trial, env, knobs)
    if env.rank == rank.first_worker:
        log_configuration(trial, env, device, backend, knobs)
    print(f"rank {env.rank} ({rank.slot.label}) on {device}, {torch.get_num_threads()} thread(s)", flush=True)
    return control, probed


def start_recording(rank: Rank) -> records.RankRecorder:
    """This rank's recorder, its heartbeat (whose stall verdict fails the rank) and its publisher, kept on
    `rank` as each starts, so that a failure stops what did."""
    env, trial = rank.env, rank.trial
    recorder = rank.recorder = records.RankRecorder(env.output_dir, trial.name, env.rank, rank.slot.role,
                                                    trial.spec.model.warmup_iterations)
    rank.beats = heartbeat.Heartbeat(
        env.master_addr, env.master_port, env.rank, env.world_size, recorder.directory,
        progress=lambda: len(recorder.iterations), names={s.rank: s.label for s in trial.slots()},
        stall_seconds=rank.knobs.stall_timeout_seconds,
        on_stall=lambda culprit, reason: ending.fail_publishing(env, recorder, rank.publisher,
                                                                ending.stall_reason(env, culprit, reason)))
    rank.publisher = start_publisher(env, trial, recorder.directory)
    return recorder


def train_or_serve(rank: Rank, recorder: records.RankRecorder, device: torch.device) -> dict:
    """Run the rank's role, then write its own summary; what its process used (usage.Meter.measure)."""
    meter = usage.Meter()
    recorder.on_first_measured = meter.restart  # CPU use of the iterations, not of starting up
    assert rank.levels is not None, "join() gathered them"
    run_role(rank.trial, rank.env, rank.slot, recorder, device, rank.knobs, rank.levels)
    used = meter.measure(torch.get_num_threads())
    if rank.env.node_name:  # where it ran, beside what it used: the trial summary's placement reads both
        used[keys.NODE] = rank.env.node_name
    used[keys.POD], used[keys.LOCAL_RANK] = rank.slot.hostname, rank.slot.local_rank
    if rank.slot.role == constants.ROLE_WORKER and not recorder.iterations:
        # A worker with nothing to show must not pass for a finished one, with the launcher or the operator.
        raise RankError("training ended without recording a single iteration")
    if rank.beats is not None:
        rank.beats.finished()
    recorder.log_summary({**summary.rank_summary(recorder.iterations), **recorder.summary_extras, **used})
    return used


def summarize_trial(rank: Rank, recorder: records.RankRecorder, gathered: dict[int, list[dict]],
                    used_by_rank: dict[int, dict], probed: dict | None) -> None:
    """The trial's series and summary (on the lowest worker rank), with what only this rank knows: where the link
    rates were measured (this rank's interface, as every worker's), the probed link and the prediction."""
    trial, env = rank.trial, rank.env
    summarized = summary.summarize(gathered, trial, used_by_rank)
    extras = recorder.summary_extras if summarized.traffic.link_tx_mean is not None else {}
    summarized = dataclasses.replace(
        summarized, link_interface=extras.get(keys.LINK_INTERFACE),
        link_bits_per_second=extras.get(keys.LINK_BITS_PER_SECOND), link_probe=probed,
        prediction=predict(trial, gathered, recorder, rank.knobs, probed, summarized.usage))
    # The trial run's charts: before the summary, whose file says the trial's outputs are all there.
    records.write_lines(records.trial_dir(env.output_dir, trial.name) / records.SERIES_FILE,
                        summary.trial_series(gathered, trial))
    document = summarized.to_document()
    write_trial_summary(trial, env, document)
    print("summary: " + json.dumps({key: document.get(key) for key in keys.STATUS_KEYS}), flush=True)
