"""Names and label values of a trial's objects, each a valid Kubernetes name of at most 63 characters."""

from __future__ import annotations

from ringleader.api import constants
from ringleader.api.trial import Slot, Trial, bounded_name

# A trial's name is a DNS-1035 label of at most trial.MAX_TRIAL_NAME (51) characters, so every suffix
# below keeps names within 63: "-worker-1023" is the longest.
CONFIG_MAP_SUFFIX = "-trial"


def service(trial: Trial) -> str:
    """The headless Service, and the DNS subdomain of every pod: `<hostname>.<service>` resolves a rank."""
    return trial.name


def config_map(trial: Trial) -> str:
    return f"{trial.name}{CONFIG_MAP_SUFFIX}"


def pod_group(trial: Trial) -> str:
    return trial.name


def workload(trial: Trial) -> str:
    """The Kueue Workload that admits the trial (`scheduling.queueName`)."""
    return trial.name


def pod(trial: Trial, slot: Slot) -> str:
    return f"{trial.name}-{slot.hostname}"


def label_value(text: str) -> str:
    """`text` as a label value: at most 63 characters, a hash keeping long values distinct."""
    return bounded_name(text, constants.MAX_NAME_LENGTH)
