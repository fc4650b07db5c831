"""Torch-free interfaces between ringleader's processes: what a rank prints when it fails or progresses,
and who is to blame.

Every other package may import this one; it imports nothing of theirs, nor torch, kopf or mlflow.
"""
