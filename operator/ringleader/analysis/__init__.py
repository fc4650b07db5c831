"""Analysis of recorded timings: trial summaries, performance models, what-if studies and comparison reports."""
