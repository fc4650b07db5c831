"""The models of recorded timings, pure and torch-free: trial summaries, cost models, the DAG replay, predictions,
what-if studies, statistics; run inside ranks and by every command alike."""
