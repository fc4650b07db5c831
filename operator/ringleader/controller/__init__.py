"""The Kubernetes operator: kopf handlers that run DistributedTrainingExperiments and keep their status.

Layers, bottom up: settings (flags, once); pods, trials, conditions, plan, refusals, events, due (pure
decisions from observed state); kube, recording, rendering (the API server, MLflow, the topology);
observation, actions, experiment_runs (what a pass reads, creates and records); reconciler and workqueue
(one serialized, level-based pass per experiment); handlers and cli (kopf).
"""
