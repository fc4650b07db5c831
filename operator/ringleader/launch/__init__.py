"""The embedded default: an experiment's trials as local processes with the pod contract (`ringleader run`).

cli.py parses and reports, preflight.py refuses what cannot run (commands/profile.py's refusals too), sweep.py
schedules trials, trials.py runs one, processes.py starts and stops ranks, display.py draws progress,
tracker.py publishes to MLflow as the one writer.
"""
