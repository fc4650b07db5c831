"""The shard exchange that parameter-server and peer-to-peer training share: workers push gradient shards to
their owners, and each owner answers with its shard of the new weights when its own gate of the paradigm allows.

    wire      the message format (one frame: a fixed header, then the payload)
    shards    which rank owns which parameters (equal bytes)
    schedule  the order of a rank's sends to many ranks (rotated, so that senders do not collide)
    link      point-to-point messages over a gloo process group, paced by the emulated card (nic.py), with timeouts
    server    an owner's side: apply pushes, answer as its gate allows
    client    a worker's side: push, wait for every owner, inside the training loop
    endpoint  this rank's link built from the trial: its process group and emulated card
"""

from ringleader.runtime.exchange import wire, shards, schedule, link, server, client, endpoint  # noqa: F401 - in dependency order
