"""How a rank ends: its one-line reason on stderr and as the pod's termination message, its records published
first; and what a SIGTERM publishes. Called by runtime/main.py."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import torch.distributed as dist

from ringleader.contract import failures, unpublished
from ringleader.contract import environment as contract
from ringleader.runtime import heartbeat, termination, termination_message


def stop_publisher(publisher) -> None:
    """Publish what is left and end the rank's MLflow run FAILED."""
    if publisher is not None:
        publisher.stop(status="FAILED")


def finish_publishing(env: contract.PodEnvironment, publisher, wait_seconds: float) -> None:
    """A rank that trained: every record into MLflow, waiting up to `wait_seconds` (tracking.recordsWaitSeconds) for
    a server that is away, its pod kept meanwhile. Past that it prints its records into its log (the pod's disk
    goes with the pod), then fails saying how much was published: no trial with missing records is a success."""
    if publisher is None or publisher.finish("FINISHED", wait_seconds):
        return
    from ringleader.tracking import handover  # imports MLflow, as the publisher did already

    published, recorded = publisher.published()
    reason = unpublished.incomplete_reason(env.rank, published, recorded, publisher.shown_uri, wait_seconds)
    try:
        text, left_out = handover.block_of(publisher)
    except (OSError, unpublished.BlockError) as error:
        reason += f"; but they could not be written to it ({error}): they are lost with the pod"
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
        if left_out:
            reason += f" (less {', '.join(left_out)}, too large for a log)"
    fail(env, reason, permanent=True)


def publish_on_termination(recorder, publisher) -> None:
    """A pod stopped by SIGTERM: this rank's records so far into MLflow, its rank run ended KILLED."""
    if recorder is not None:
        recorder.drain(timeout_seconds=1.0)
    if publisher is not None:
        publisher.stop(status="KILLED", timeout_seconds=termination.PUBLISH_SECONDS)


def fail(env: contract.PodEnvironment | None, reason: str, *, permanent: bool = False) -> NoReturn:
    """Report the one-line reason on stderr (and as the pod's termination message), then exit at once;
    `permanent`: no restart can fix it (PERMANENT_ERRORS, a rank started wrongly).

    os._exit: a process group with a dead peer can block in its destructor; nothing is left to flush."""
    line = failures.failure_line(env.rank if env else None, env.role if env else "", reason, permanent=permanent)
    print(line, file=sys.stderr, flush=True)
    sys.stdout.flush()
    termination_message.write(failures.shorten_middle(line, termination_message.CHARACTERS))
    os._exit(1)


def fail_publishing(env: contract.PodEnvironment, recorder, publisher, reason: str, *,
                    permanent: bool = False) -> NoReturn:
    """`fail`, after this rank's records so far are written and published and its rank run ended FAILED."""
    if termination.requested():  # peers stopped with this pod: the SIGTERM thread publishes and exits
        termination.wait_for_exit()
    try:
        if recorder is not None:
            recorder.drain(timeout_seconds=1.0)
        stop_publisher(publisher)
    finally:
        fail(env, reason, permanent=permanent)


def lost_contact(error: BaseException) -> bool:
    first = (str(error).strip().splitlines() or [""])[0]
    return isinstance(error, dist.DistError) or any(word in first for word in ("Connection", "Timed out", "timeout"))


def describe(error: BaseException, beats: heartbeat.Heartbeat | None = None) -> str:
    """The one-line reason: the error's first line; for a lost peer, which rank stopped beating, if one did."""
    if isinstance(error, SystemExit):
        return f"user code called sys.exit({error.code!r}) before the rank finished"
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if lost_contact(error):
        return failures.lost_contact(heartbeat.lost_peer(beats), first)
    return f"{type(error).__name__}: {first}"


def stall_reason(env: contract.PodEnvironment, culprit: int | None, reason: str) -> str:
    """The heartbeat's stall verdict as this rank's failure reason: an echo when another rank stopped the trial."""
    return failures.lost_contact(culprit, reason) if culprit is not None and culprit != env.rank else reason
