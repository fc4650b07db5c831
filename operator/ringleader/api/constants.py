"""Names of the API: group, version, kind, and the label and annotation keys every part uses."""

from typing import Final

GROUP = "ringleader.dev"
VERSION = "v1alpha1"
# Final: the literal types of the models' apiVersion and kind fields.
API_VERSION: Final = "ringleader.dev/v1alpha1"  # GROUP/VERSION
KIND: Final = "DistributedTrainingExperiment"
PLURAL = "distributedtrainingexperiments"
SINGULAR = "distributedtrainingexperiment"
SHORT_NAMES = ("dte", "dtes")
CATEGORIES = ("ringleader",)

# Labels tie every rendered object to its experiment, trial and role; selectors use them.
LABEL_EXPERIMENT = f"{GROUP}/experiment"
LABEL_TRIAL = f"{GROUP}/trial"
LABEL_TRIAL_INDEX = f"{GROUP}/trial-index"
LABEL_ROLE = f"{GROUP}/role"
LABEL_RANK = f"{GROUP}/rank"  # a pod's first rank
LABEL_LOCAL_WORLD_SIZE = f"{GROUP}/local-world-size"  # the ranks a pod runs (LOCAL_WORLD_SIZE): LABEL_RANK and after
LABEL_WORKER_GROUP = f"{GROUP}/worker-group"  # only on workers of a `workers.groups` entry
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "ringleader"

# Annotations carry what labels cannot (free text, run ids).
ANNOTATION_MLFLOW_RUN_ID = f"{GROUP}/mlflow-run-id"
ANNOTATION_TRIAL_PARAMETERS = f"{GROUP}/trial-parameters"

# Bandwidth caps a CNI chaining the bandwidth plugin applies to a pod (through containerd or CRI-O), in bits
# per second as a quantity: what the pod receives (ingress) and what it sends (egress).
ANNOTATION_INGRESS_BANDWIDTH = "kubernetes.io/ingress-bandwidth"
ANNOTATION_EGRESS_BANDWIDTH = "kubernetes.io/egress-bandwidth"

# Kubernetes limits names of most objects (and label values) to 63 characters.
MAX_NAME_LENGTH = 63

ROLE_PS = "ps"
ROLE_WORKER = "worker"
