"""The pod environment contract: what every rank is told, by the operator's pods and the local launcher alike.

Defined once here; `topology/` renders it into pod specs, `launch/` into local process
environments, and `runtime/` reads it back with `PodEnvironment.from_environ`. No torch import,
so the operator can use it.

Besides ringleader's own variables every rank gets torchrun's: RANK, WORLD_SIZE, LOCAL_RANK (its place in its
pod, and its GPU there: `cuda:LOCAL_RANK`), LOCAL_WORLD_SIZE (the ranks of its pod), GROUP_RANK and NODE_RANK
(its pod's index among the trial's pods, servers' first). Unset, they default to one rank per pod: LOCAL_RANK 0,
LOCAL_WORLD_SIZE 1, GROUP_RANK = RANK.

A pod of k > 1 ranks (`workers.ranksPerPod`) is started by one container command, like any pod: its environment
holds the pod's first RANK and LOCAL_WORLD_SIZE=k but no LOCAL_RANK, which makes `python -m ringleader.runtime`
the pod's agent (runtime/agent.py) rather than a rank. The agent starts the k ranks, each with this environment
plus RANK=first+i, LOCAL_RANK=i and a TERMINATION_FILE of its own; a rank that dies ends the others, and the
agent leaves the pod's termination message and exit status (the first failure, naming its rank; or on success
the first rank's message: the trial summary in the first worker's pod). Locally `ringleader run` starts every
rank itself, each with its full environment, LOCAL_RANK included: no agent.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
from typing import Mapping

ROLE = "RINGLEADER_ROLE"
RANK = "RANK"
WORLD_SIZE = "WORLD_SIZE"
MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"
TRIAL_FILE = "RINGLEADER_TRIAL_FILE"
OUTPUT_DIR = "RINGLEADER_OUTPUT_DIR"
RUN_ID = "RINGLEADER_MLFLOW_RUN_ID"
# Set instead of RUN_ID on pods that start before their trial run exists (MLflow was away): the ranks find
# the run by its token in this MLflow experiment once the operator has created it, and publish then.
RUN_TOKEN = "RINGLEADER_MLFLOW_RUN_TOKEN"
MLFLOW_EXPERIMENT = "RINGLEADER_MLFLOW_EXPERIMENT"
_TOKEN = re.compile(r"[A-Za-z0-9._-]{1,200}")  # a uid and a trial name: safe inside an MLflow search filter
TRACKING_URI = "MLFLOW_TRACKING_URI"
# Where a relative spec.data.path is read from: the data volume's mount in a pod, `--data-dir` locally.
DATA_DIR = "RINGLEADER_DATA_DIR"
# Set by the local launcher, and by a pod's agent for its ranks: the rank exits when this process is no longer its
# parent (runtime/parent.py).
LAUNCHER_PID = "RINGLEADER_LAUNCHER_PID"
# The node the rank runs on, which it records (summary, MLflow tag): in a pod the downward API's NODE_NAME_FIELD,
# locally the machine's host name (local_node_name), the one node every rank shares.
NODE_NAME = "RINGLEADER_NODE_NAME"
NODE_NAME_FIELD = "spec.nodeName"
# Which attempt of its trial the rank belongs to: 1, then 2 after the operator's first restart of the trial, ...
# Its rank runs are tagged and named by it, so a restarted trial's runs of each rank are told apart.
ATTEMPT = "RINGLEADER_ATTEMPT"
# torchrun's names for where a rank sits among its pod's ranks and the trial's pods (see the module docstring).
LOCAL_RANK = "LOCAL_RANK"
LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE"
GROUP_RANK = "GROUP_RANK"
NODE_RANK = "NODE_RANK"  # torchrun's other name of GROUP_RANK: rendered alike, GROUP_RANK is the one read
# Where the process leaves its termination message: the pod's /dev/termination-log unless its pod's agent gives
# each rank a file of its own (ranks of one pod must not overwrite each other's), from which it composes the pod's.
TERMINATION_FILE = "RINGLEADER_TERMINATION_FILE"
NAMES = (ROLE, RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TRIAL_FILE, OUTPUT_DIR, RUN_ID, RUN_TOKEN, MLFLOW_EXPERIMENT,
         TRACKING_URI, DATA_DIR, LAUNCHER_PID, NODE_NAME, ATTEMPT, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK,
         TERMINATION_FILE)
# A rank's tuning knobs (runtime/settings.py): optional, with defaults; the local launcher passes them on.
TIMEOUT_SECONDS = "RINGLEADER_TIMEOUT_SECONDS"
BUCKET_BYTES = "RINGLEADER_BUCKET_BYTES"
TRACE_ITERATIONS = "RINGLEADER_TRACE_ITERATIONS"
FINISH_TIMEOUT_SECONDS = "RINGLEADER_FINISH_TIMEOUT_SECONDS"
STALL_TIMEOUT_SECONDS = "RINGLEADER_STALL_TIMEOUT_SECONDS"
KNOBS = (TIMEOUT_SECONDS, BUCKET_BYTES, TRACE_ITERATIONS, FINISH_TIMEOUT_SECONDS, STALL_TIMEOUT_SECONDS)
DEFAULT_STALL_TIMEOUT_SECONDS = 60.0
# The ring's buckets (runtime/ring.py), which the analyses model (models/overlap.py): DDP's defaults. Large
# buckets trade overlap for fewer messages; a small first bucket (the last layers) starts communicating early.
DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024
FIRST_BUCKET_BYTES = 1024 * 1024

DEFAULT_MASTER_PORT = 29500
# In a pod the ConfigMap holding the trial is mounted here.
TRIAL_MOUNT_DIR = "/etc/ringleader"
TRIAL_FILE_NAME = "trial.json"
POD_OUTPUT_DIR = "/tmp/ringleader"
# In a pod the claim of spec.data.volume is mounted here, read-only.
POD_DATA_DIR = "/data"


def local_node_name() -> str:
    """The node of a local run's ranks: this machine, by its host name."""
    return socket.gethostname()


class ContractError(ValueError):
    """The environment does not follow the contract; the message names the variable and the fix."""


@dataclasses.dataclass(frozen=True)
class PodEnvironment:
    role: str
    rank: int
    world_size: int
    master_addr: str
    master_port: int
    trial_file: str
    output_dir: str
    run_id: str | None = None
    tracking_uri: str | None = None
    data_dir: str | None = None
    run_token: str | None = None
    mlflow_experiment: str | None = None
    node_name: str | None = None
    """node_name the rank runs on; a pod's comes from the downward API, so the operator renders none here."""
    attempt: int = 1
    """attempt of the trial this rank belongs to: 1 + the trial's restarts when its pods were made."""
    local_rank: int | None = 0
    """local_rank is the rank's place in its pod; None in the environment of a pod of many ranks, whose process is
    then their agent (`is_agent`)."""
    local_world_size: int = 1
    """local_world_size is how many ranks the pod runs."""
    group_rank: int | None = None
    """group_rank is the pod's index among the trial's pods; None (made `rank`): one rank per pod."""
    termination_file: str | None = None
    """termination_file is where this rank leaves its termination message; None: the pod's own."""

    def __post_init__(self) -> None:
        if self.group_rank is None:  # so that an environment read back equals the one it was written from
            object.__setattr__(self, "group_rank", self.rank)

    @property
    def is_agent(self) -> bool:
        """Whether this process starts its pod's ranks (runtime/agent.py) rather than being one."""
        return self.local_rank is None and self.local_world_size > 1

    @property
    def pod_index(self) -> int:
        """The pod's index among the trial's pods (GROUP_RANK)."""
        return self.rank if self.group_rank is None else self.group_rank

    def of_local_rank(self, local_rank: int, termination_file: str) -> PodEnvironment:
        """The environment of this pod's rank `local_rank`, as the pod's agent starts it."""
        return dataclasses.replace(self, rank=self.rank + local_rank, local_rank=local_rank,
                                   group_rank=self.pod_index, termination_file=termination_file)

    @property
    def publishes(self) -> bool:
        """Whether this rank publishes its records live: it has a tracking server and its run's id, or the
        token and MLflow experiment to find that run by once it exists."""
        return bool(self.tracking_uri and (self.run_id or (self.run_token and self.mlflow_experiment)))

    def to_environ(self) -> dict[str, str]:
        env = {
            ROLE: self.role,
            RANK: str(self.rank),
            WORLD_SIZE: str(self.world_size),
            MASTER_ADDR: self.master_addr,
            MASTER_PORT: str(self.master_port),
            TRIAL_FILE: self.trial_file,
            OUTPUT_DIR: self.output_dir,
        }
        if self.run_id:
            env[RUN_ID] = self.run_id
        if self.run_token:
            env[RUN_TOKEN] = self.run_token
        if self.mlflow_experiment:
            env[MLFLOW_EXPERIMENT] = self.mlflow_experiment
        if self.tracking_uri:
            env[TRACKING_URI] = self.tracking_uri
        if self.data_dir:
            env[DATA_DIR] = self.data_dir
        if self.node_name:
            env[NODE_NAME] = self.node_name
        if self.attempt != 1:
            env[ATTEMPT] = str(self.attempt)
        if self.local_rank is not None:
            env[LOCAL_RANK] = str(self.local_rank)
        env[LOCAL_WORLD_SIZE] = str(self.local_world_size)
        env[GROUP_RANK] = env[NODE_RANK] = str(self.pod_index)
        if self.termination_file:
            env[TERMINATION_FILE] = self.termination_file
        return env

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> PodEnvironment:
        def required(name: str) -> str:
            value = environ.get(name)
            if not value:
                raise ContractError(f"environment variable {name} is not set: ringleader pods and "
                                    f"`ringleader run` set it; set it when starting a rank by hand")
            return value

        def integer(name: str) -> int:
            text = required(name)
            try:
                return int(text)
            except ValueError:
                raise ContractError(f"environment variable {name}={text!r} must be an integer") from None

        local_world_size = integer(LOCAL_WORLD_SIZE) if environ.get(LOCAL_WORLD_SIZE) else 1
        # No LOCAL_RANK in a pod of many ranks: the process is their agent; in a pod of one, the rank itself.
        local_rank = integer(LOCAL_RANK) if environ.get(LOCAL_RANK) else (None if local_world_size > 1 else 0)
        env = cls(
            role=required(ROLE),
            rank=integer(RANK),
            world_size=integer(WORLD_SIZE),
            master_addr=required(MASTER_ADDR),
            master_port=integer(MASTER_PORT),
            trial_file=required(TRIAL_FILE),
            output_dir=environ.get(OUTPUT_DIR) or POD_OUTPUT_DIR,
            run_id=environ.get(RUN_ID) or None,
            tracking_uri=environ.get(TRACKING_URI) or None,
            data_dir=environ.get(DATA_DIR) or None,
            run_token=environ.get(RUN_TOKEN) or None,
            mlflow_experiment=environ.get(MLFLOW_EXPERIMENT) or None,
            node_name=environ.get(NODE_NAME) or None,
            attempt=integer(ATTEMPT) if environ.get(ATTEMPT) else 1,
            local_rank=local_rank,
            local_world_size=local_world_size,
            group_rank=integer(GROUP_RANK) if environ.get(GROUP_RANK) else None,
            termination_file=environ.get(TERMINATION_FILE) or None,
        )
        if not 0 <= env.rank < env.world_size:
            raise ContractError(f"{RANK}={env.rank} must be in [0, {WORLD_SIZE}={env.world_size})")
        if env.local_world_size < 1:
            raise ContractError(f"{LOCAL_WORLD_SIZE}={env.local_world_size} must be 1 or more (the pod's ranks)")
        if env.local_rank is not None and not 0 <= env.local_rank < env.local_world_size:
            raise ContractError(f"{LOCAL_RANK}={env.local_rank} must be in [0, "
                                f"{LOCAL_WORLD_SIZE}={env.local_world_size})")
        if env.is_agent and env.rank + env.local_world_size > env.world_size:
            raise ContractError(f"{RANK}={env.rank} + {LOCAL_WORLD_SIZE}={env.local_world_size} ranks of the pod "
                                f"exceed {WORLD_SIZE}={env.world_size}")
        if env.attempt < 1:
            raise ContractError(f"{ATTEMPT}={env.attempt} must be 1 or more (1 + the trial's restarts)")
        if env.run_token and not _TOKEN.fullmatch(env.run_token):
            # It goes into an MLflow search filter: letters, digits, '.', '-' and '_' only (a uid and a trial name).
            raise ContractError(f"{RUN_TOKEN}={env.run_token!r} may hold only letters, digits, '.', '-' and '_'")
        return env
