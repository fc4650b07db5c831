"""Renders one trial into its Kubernetes objects through the architecture's Jinja2 template; the operator and CLI call
it.

Python works out the values (names, labels, the pod environment contract, the PodGroup);
the templates in `ringleader/templates/` own every object's shape. Every value reaches the
YAML through the `tojson` filter, and JSON is YAML: a value from the CR stays one scalar (or
one flow mapping) whatever characters it holds, so it can never add keys or objects.
"""

from __future__ import annotations

import functools
import json
import pathlib
import re
from typing import Any

import jinja2
import yaml

from ringleader.api import constants, variants
from ringleader.api.trial import Trial
from ringleader.api.spec import BandwidthEnforcement, Network
from ringleader.api.variants import Architecture
from ringleader.contract import environment as contract
from ringleader.topology import gang, names, placement
from ringleader.topology.settings import RenderSettings

TEMPLATES = {
    Architecture.PARAMETER_SERVER: "parameter_server.yaml.j2",
    Architecture.PEER_TO_PEER: "peer_to_peer.yaml.j2",
    Architecture.RING_ALL_REDUCE: "ring_allreduce.yaml.j2",
    Architecture.HIERARCHICAL_RING_ALL_REDUCE: "ring_allreduce.yaml.j2",  # the same pods: the levels are the runtime's
    Architecture.PARAMETER_SERVER_POD_AGGREGATION: "parameter_server.yaml.j2",
}
PACKAGED_TEMPLATES = pathlib.Path(__file__).resolve().parent.parent / "templates"
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


class TemplateError(ValueError):
    """A template (usually an override in `templates_dir`) produced something that is not a list of objects."""


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _yaml_escape(character: re.Match) -> str:
    code = ord(character.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _to_json(value: Any) -> str:
    """JSON in ASCII, which is YAML: no character of a value can act as a YAML line break or indicator.
    Not json's own ensure_ascii, which writes a character above U+FFFF as a surrogate pair that YAML
    refuses; YAML's 8-digit escape instead (an emoji in an experiment's name renders)."""
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises here, naming the variable
    return _NON_ASCII.sub(_yaml_escape, json.dumps(value, ensure_ascii=False))


@functools.lru_cache(maxsize=8)
def _environment(directory: pathlib.Path) -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        undefined=jinja2.StrictUndefined,  # a misspelt variable fails the render instead of vanishing
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters["tojson"] = _to_json
    return environment


def _load_all(text: str) -> list[Any]:
    """What `yaml.load_all` with the safe loader gives, in a quarter less time (2.85 -> 2.1 ms for an 8-worker
    trial): strings, lists and string-keyed mappings (nearly all of a rendered trial) are built straight from the
    parser's nodes, anything else (numbers, booleans, merge keys, other tags) by PyYAML's safe constructor.
    Rendering is the largest part of creating a trial."""
    loader = _YAML_LOADER(text)
    built: dict[int, Any] = {}  # a document's collections by node: an alias gets its anchor's object, as from PyYAML

    def build(node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return node.value if node.tag == _STR else loader.construct_object(node, deep=True)
        if id(node) in built:
            return built[id(node)]
        found: Any
        if node.tag == _SEQ and isinstance(node, yaml.SequenceNode):
            found = built[id(node)] = []
            found.extend(build(item) for item in node.value)
        elif node.tag == _MAP and isinstance(node, yaml.MappingNode) and all(
                key.tag == _STR and isinstance(key, yaml.ScalarNode) for key, _ in node.value):
            found = built[id(node)] = {}
            for key, value in node.value:
                found[key.value] = build(value)
        else:
            found = built[id(node)] = loader.construct_object(node, deep=True)
        return found

    try:
        documents = []
        while loader.check_node():
            root = loader.get_node()
            assert root is not None, "check_node said a document follows"
            documents.append(build(root))
            built.clear()  # anchors never cross documents, and a freed node's id may be reused
        return documents
    finally:
        loader.dispose()


def trial_labels(trial: Trial) -> dict[str, str]:
    return {
        constants.LABEL_EXPERIMENT: names.label_value(trial.experiment),
        constants.LABEL_TRIAL: trial.name,
        constants.LABEL_TRIAL_INDEX: str(trial.index),
        constants.LABEL_MANAGED_BY: constants.MANAGED_BY,
    }


def trial_selector(labels: dict[str, str]) -> dict[str, str]:
    """The labels that select one trial's pods: the Service's selector and every placement term's."""
    return {constants.LABEL_EXPERIMENT: labels[constants.LABEL_EXPERIMENT],
            constants.LABEL_TRIAL: labels[constants.LABEL_TRIAL]}


def _pods(trial: Trial, settings: RenderSettings, run_id: str | None, run_token: str | None,
          labels: dict[str, str], annotations: dict[str, str],
          pod_group: gang.PodGroup | None, attempt: int) -> list[dict[str, Any]]:
    """One pod per pod of the trial (Trial.pods()), not per rank: a pod of k ranks gets its first rank's RANK and
    LOCAL_WORLD_SIZE=k without LOCAL_RANK, so its one command starts as the pod's agent (contract/environment.py)."""
    slots = trial.slots()
    service = names.service(trial)
    selector = trial_selector(labels)
    pods = []
    for ranks in trial.pods():
        slot = ranks[0]
        environment = contract.PodEnvironment(
            role=slot.role,
            rank=slot.rank,
            world_size=len(slots),
            master_addr=f"{slots[0].hostname}.{service}",
            master_port=contract.DEFAULT_MASTER_PORT,
            trial_file=f"{contract.TRIAL_MOUNT_DIR}/{contract.TRIAL_FILE_NAME}",
            output_dir=contract.POD_OUTPUT_DIR,
            run_id=run_id,
            tracking_uri=trial.spec.tracking.uri or settings.default_tracking_uri,
            data_dir=contract.POD_DATA_DIR if trial.spec.data.volume else None,
            run_token=None if run_id else run_token,
            mlflow_experiment=None if run_id or not run_token else trial.mlflow_experiment_name(),
            attempt=attempt,
            local_rank=0 if len(ranks) == 1 else None,
            local_world_size=len(ranks),
            group_rank=slot.group_rank,
        )
        pod_labels = {**labels, constants.LABEL_ROLE: slot.role, constants.LABEL_RANK: str(slot.rank),
                      constants.LABEL_LOCAL_WORLD_SIZE: str(len(ranks))}
        if slot.group:
            pod_labels[constants.LABEL_WORKER_GROUP] = slot.group
        if pod_group:
            pod_labels.update(pod_group.pod_labels)
        pods.append({
            "name": names.pod(trial, slot),
            "hostname": slot.hostname,
            "role": slot.role,
            "labels": pod_labels,
            "annotations": {**annotations, **(pod_group.pod_annotations if pod_group else {}),
                            **bandwidth_annotations(trial.spec.network)},
            "env": environment.to_environ(),
            "resources": slot.resources.wire(),
            "node_selector": slot.node_selector,
            "affinity": placement.affinity(trial.spec.scheduling.placement, selector, slot.role),
            # NCCL's proxy buffers need a memory-backed /dev/shm beyond the container runtime's default 64Mi.
            "shared_memory": slot.resources.gpu > 0 and variants.ARCHITECTURES[trial.spec.architecture].nccl,
        })
    return pods


def bandwidth_annotations(network: Network) -> dict[str, str]:
    """The pod annotations that ask the network to cap the pod both ways, for enforcement Network; else none.
    Plain bits per second ("100000000"): a quantity the kubelet and container runtime parse as is."""
    cap = network.bits_per_second()
    if network.enforcement != BandwidthEnforcement.NETWORK or cap is None:
        return {}
    return {constants.ANNOTATION_INGRESS_BANDWIDTH: str(cap), constants.ANNOTATION_EGRESS_BANDWIDTH: str(cap)}


def context(trial: Trial, settings: RenderSettings, run_id: str | None = None,
            run_token: str | None = None, attempt: int = 1) -> dict[str, Any]:
    """The values a template sees; each is data, never YAML text. Pods get the trial run's id, or when it does
    not exist yet, its token: the ranks find the run by it later (contract.RUN_TOKEN); and the trial's
    `attempt` (1 + its restarts), which names their rank runs."""
    spec = trial.spec
    labels = trial_labels(trial)
    annotations = {constants.ANNOTATION_TRIAL_PARAMETERS: json.dumps(trial.parameters, sort_keys=True)}
    if run_id:
        annotations[constants.ANNOTATION_MLFLOW_RUN_ID] = run_id
    pod_group = gang.pod_group(trial, len(trial.pods()), settings)
    secret = spec.tracking.credentials_secret
    return {
        "namespace": trial.namespace,
        "labels": labels,
        "annotations": annotations,
        "selector": trial_selector(labels),
        "service": {"name": names.service(trial), "port": contract.DEFAULT_MASTER_PORT},
        "config_map": {"name": names.config_map(trial), "key": contract.TRIAL_FILE_NAME,
                       "trial_json": trial.model_dump_json(by_alias=True)},
        "pod_group": None if pod_group is None else {
            "api_version": pod_group.api_version, "name": pod_group.name, "min_member": pod_group.min_member},
        "pods": _pods(trial, settings, run_id, run_token, labels, annotations, pod_group, attempt),
        "image": spec.image or settings.image,
        "image_pull_policy": settings.image_pull_policy,
        "gpu_resource_name": settings.gpu_resource_name,
        "service_account_name": settings.service_account_name,
        "scheduler_name": pod_group.scheduler_name if pod_group else spec.scheduling.scheduler_name,
        "priority_class_name": spec.scheduling.priority_class_name,
        "tolerations": [toleration.wire() for toleration in spec.scheduling.tolerations],
        "gpu_tolerations": list(settings.gpu_tolerations),
        "credentials_secret": secret.name if secret else None,
        "run_as_user": settings.run_as_user,
        "shared_memory_limit": settings.shared_memory_limit,
        "scratch_limit": settings.scratch_limit,
        "command": ["python", "-m", "ringleader.runtime"],
        "trial_mount_dir": contract.TRIAL_MOUNT_DIR,
        "data_volume": None if spec.data.volume is None else {
            "claim_name": spec.data.volume.claim_name, "mount_path": contract.POD_DATA_DIR},
        "output_dir": contract.POD_OUTPUT_DIR,
        "node_name": {"env": contract.NODE_NAME, "field": contract.NODE_NAME_FIELD},
    }


def render(trial: Trial, settings: RenderSettings = RenderSettings(),
           run_id: str | None = None, run_token: str | None = None, attempt: int = 1) -> list[dict[str, Any]]:
    """The trial's objects in creation order: Service, ConfigMap, PodGroup (when gang-scheduled), then its Pods in
    rank order (one per pod of the trial, `workers.ranksPerPod` ranks to a worker pod)."""
    directory = pathlib.Path(settings.templates_dir) if settings.templates_dir else PACKAGED_TEMPLATES
    name = TEMPLATES[trial.spec.architecture]
    try:
        text = _environment(directory.resolve()).get_template(name).render(
            context(trial, settings, run_id, run_token, attempt))
    except jinja2.TemplateNotFound as error:
        raise TemplateError(f"template {error.name} not found in {directory}: copy it from {PACKAGED_TEMPLATES} "
                            "into your templates directory") from None
    try:
        documents = [d for d in _load_all(text) if d is not None]
    except yaml.YAMLError as error:
        raise TemplateError(f"{directory / name} did not render valid YAML ({error}); "
                            "pass every value through `| tojson`") from None
    for document in documents:
        if not (isinstance(document, dict) and "apiVersion" in document and "kind" in document
                and isinstance(document.get("metadata"), dict) and "name" in document["metadata"]):
            raise TemplateError(f"{directory / name} rendered a document that is not a Kubernetes object: "
                                f"{str(document)[:200]}")
    return documents
