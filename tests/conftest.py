"""Settings for every test tier, applied before any test module imports MLflow."""

import os

# MLflow 3 sends telemetry from `import mlflow` unless disabled: tests talk only to loopback.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["DO_NOT_TRACK"] = "true"
