"""MLflow tracking: runs per experiment, trial and rank, metrics from the records on disk, replay after outages.

The schema (tag keys, run names, params, metrics) is in schema.py; the operator uses runs.py,
the launcher publisher.py, ranks in pods live.py, `ringleader publish` replay.py. Import those modules:
this package imports none of them, so that reading its settings or schema does not import MLflow (seconds).
"""

import os

# MLflow 3 sends usage telemetry from a thread it starts at `import mlflow`, unless told not to before
# that import. ringleader talks to the tracking store and nothing else (pods often have no egress at
# all); users who want MLflow's telemetry set MLFLOW_DISABLE_TELEMETRY=false themselves. Every module
# of this package that imports mlflow is imported after this line.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
