"""The models of recorded timings, pure and torch-free: trial summaries, cost models, the DAG replay, predictions,
what-if studies, statistics; run inside ranks and by every command alike.

Its face: the one typed trial summary (written by the lowest worker rank, read back by every reader), the results a
report is made of, and a trial's prediction. The rest is imported by module (`from ringleader.models import
whatif`)."""

from ringleader.models.prediction import TrialPrediction, predict_trial
from ringleader.models.results import SweepResult, TrialResult
from ringleader.models.summary import TrialSummary, summarize

__all__ = ["SweepResult", "TrialPrediction", "TrialResult", "TrialSummary", "predict_trial", "summarize"]
