"""Fixtures of the launcher's integration tests (defined in launching.py)."""

from launching import migrated_db, tracking_server, workdir  # noqa: F401 - pytest finds fixtures by name here
