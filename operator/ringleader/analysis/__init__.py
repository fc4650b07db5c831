"""Analysis of recorded timings: trial summaries, performance models, what-if studies, comparison tables and sweep reports."""
