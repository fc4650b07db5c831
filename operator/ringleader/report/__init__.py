"""A sweep's report from the models' results: findings, comparison tables, figures (matplotlib) and its HTML page.

Its face is `build` (report/assembly.py): a SweepResult in, the report's files and findings out, with the `Report`
it returns. They are loaded when first named, since they import matplotlib (seconds): the launcher imports
`report.tables` without it, and tracking imports the report inside the functions that write one."""

from typing import Any

__all__ = ["Report", "build"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ringleader.report import assembly

        return getattr(assembly, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
