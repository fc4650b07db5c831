"""The DistributedTrainingExperiment API: spec, status, trials and the rules shared by CRD and CLI."""

from ringleader.api.constants import API_VERSION, GROUP, KIND, PLURAL, VERSION
from ringleader.api.experiment import DistributedTrainingExperiment, SpecError, load, parse
from ringleader.api.loading import LoadError
from ringleader.api.spec import ExperimentSpec
from ringleader.api.status import ExperimentStatus, Phase
from ringleader.api.trial import Expansion, Slot, Trial, expand

__all__ = [
    "API_VERSION", "GROUP", "KIND", "PLURAL", "VERSION",
    "DistributedTrainingExperiment", "SpecError", "LoadError", "load", "parse",
    "ExperimentSpec", "ExperimentStatus", "Phase",
    "Expansion", "Slot", "Trial", "expand",
]
