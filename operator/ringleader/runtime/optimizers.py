"""The optimizer of the spec, as a factory over parameters: synchronizers build it where the update runs."""

from __future__ import annotations

from typing import Callable, Iterable

import torch

from ringleader.api import spec

OptimizerFactory = Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]


def factory(optimizer: spec.Optimizer) -> OptimizerFactory:
    """`factory(spec.model.optimizer)(parameters)` -> a torch optimizer with the spec's hyperparameters."""

    def build(parameters: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        if optimizer.name == spec.OptimizerName.ADAM:
            return torch.optim.Adam(parameters, lr=optimizer.learning_rate, weight_decay=optimizer.weight_decay)
        return torch.optim.SGD(parameters, lr=optimizer.learning_rate, momentum=optimizer.momentum,
                               weight_decay=optimizer.weight_decay)

    return build
