"""This rank's end of the shard exchange, built from the trial in one place: its process group, its emulated card
(nic.py) and its link.

Used by parameter_server.py (a server's and a worker's) and peer_to_peer.py (a peer's). Every rank of
the trial calls `open_link` at the same point of its start-up: the process group is created collectively.
"""

from __future__ import annotations

import datetime

import torch.distributed as dist

from ringleader.api import trial as trial_
from ringleader.contract import levels as levels_
from ringleader.runtime import nic
from ringleader.runtime.exchange import link as links


def open_link(trial: trial_.Trial, rank: int, timeout_seconds: float, *, requests_from: list[int],
              replies_from: list[int], levels: levels_.Levels | None = None) -> links.Link:
    """This rank's link to the ranks whose workers ask its server (`requests_from`) and whose servers answer its
    worker (`replies_from`), on a gloo process group of its own, through its pod's card at spec.network.bandwidth
    (`levels`: where the ranks are; None: every rank on one node). Its receivers start with Link.start, once the
    shards' sizes are known.

    The group's timeout outlasts the application's own (`timeout_seconds`, RINGLEADER_TIMEOUT_SECONDS), so a
    silent peer is reported by the server's or worker's clear message first, not by a gloo receive timing out."""
    group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=2 * timeout_seconds + 30))
    levels = levels or levels_.Levels.of(trial)
    return links.Link(group, rank, requests_from=requests_from, replies_from=replies_from,
                      nic=nic.pod_card(trial, rank, levels), levels=levels)
