"""Torch-free interfaces between ringleader's processes, the one place each is defined.

    environment   the variables a rank is started with (pods and the local launcher alike)
    keys          metric and summary names: what ranks record, MLflow shows and reports read
    records       a rank's files: the one writer (RankRecorder), the one reader, restore after a crash
    journal       the memory-mapped record file that makes each record durable as it is appended
    failures      the failure line a rank prints, and blame(): which rank caused a failure
    progress      the progress line a worker prints and the operator reads back
    redaction     credentials inside URIs, found and masked wherever a URI is shown or stored
    exits         the exit statuses of every `ringleader` command: 0 ok, 1 invalid or failed, 2 usage
    provenance    where numbers were taken (a machine's, or a cluster's for the operator), in tags and in words

Every other package may import this one; it imports nothing of theirs but `api`, nor torch, kopf or
mlflow (tests/unit/test_import_directions.py).
"""
