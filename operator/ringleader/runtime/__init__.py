"""What runs inside a rank (pod or local process): models, data, the training loop, synchronizers, timing, records.

Importing the package imports no torch, so `contract` stays usable by the operator; the modules
that train import torch themselves. Entry point: `python -m ringleader.runtime` (see `main.py`).
"""
