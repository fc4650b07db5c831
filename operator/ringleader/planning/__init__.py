"""Planning a cluster ringleader has not run on: a model's profile from one machine, a network as its own benchmarks
measured it, and every architecture predicted at scale from the two (`ringleader profile`, `ringleader predict
--profile P --network N`; docs/plan.md).

Pure readers and models over models/ (whose cost models and DAG replay it prices with); no torch, no MLflow.
"""
