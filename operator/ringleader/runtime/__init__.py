"""What runs inside a rank (pod or local process): models, data, the training loop, synchronizers, timing.

Entry point: `python -m ringleader.runtime` (main.py). The interfaces it shares with the launcher
and the operator (environment, records, failure and progress lines) live in ringleader.contract.
"""
