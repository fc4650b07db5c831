"""ringleader: distributed-training experiments (PS, P2P, ring allreduce; BSP/ASP/SSP/DSSP) on Kubernetes or locally."""

__version__ = "0.1.0"
