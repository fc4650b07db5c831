"""The shard exchange that parameter-server and peer-to-peer training share: workers push gradient shards to
their owners and pull weights back, and the owner of shard 0 holds the paradigm's gate.

    wire      the message format (a fixed header and one flat tensor payload)
    shards    which rank owns which parameters
    link      point-to-point messages over a gloo process group, with shaping and timeouts
    server    an owner's side: apply pushes, answer pulls as the gate allows
    client    a worker's side: push, wait, pull, inside the training loop
"""

from ringleader.runtime.exchange import wire, shards, link, server, client  # noqa: F401 - in dependency order
