"""A sweep's report from the models' results: findings, comparison tables, figures (matplotlib) and its HTML page."""
