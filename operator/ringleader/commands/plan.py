"""`ringleader predict --profile P --network N`: every architecture at worker counts not run, planned from two files.

    ringleader predict --profile profile.json --network network.yaml --workers 8 16 32 --ranks-per-node 4

Prints the plan (what it came from, the fastest at each worker count, a table per architecture) and writes it into
--save (plan.json, plan.txt, plan.png). planning/at_scale.py holds the models; docs/plan.md says what is priced how.
Exit status: 0 planned, 1 a file could not be read, 2 for wrong options.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import TextIO

import pydantic

from ringleader.api import spec, variants
from ringleader.contract import exits
from ringleader.planning import at_scale, network, profiles

DEFAULT_SAVE = "ringleader-plan"
PLANNING_ONLY = ("trial", "rank")
"""PLANNING_ONLY: predict's options that name a trial's records, which a plan has none of."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("planning a cluster not run on (docs/plan.md): instead of SOURCE")
    group.add_argument("--profile", metavar="FILE",
                       help="the model's profile: a file of `ringleader profile`, a trial directory, a torch.profiler "
                            "trace or a CSV of layers")
    group.add_argument("--network", metavar="FILE",
                       help="the network: a description (YAML) naming nccl-tests or OSU outputs per level, one such "
                            "output, or a trial's link probe")
    group.add_argument("--workers", type=int, nargs="+", metavar="N",
                       help="worker counts to plan (default: 1, 2, 4 and 8 nodes' worth)")
    group.add_argument("--ranks-per-node", type=int, default=1, metavar="K",
                       help="ranks (accelerators) to a node, talking over the network file's inside level "
                            "(default %(default)s)")
    group.add_argument("--servers", type=int, nargs="+", default=list(at_scale.DEFAULT_SERVERS), metavar="S",
                       help="parameter-server counts to compare (default: 1 and 4)")
    group.add_argument("--compressions", nargs="+", default=[], metavar="METHOD",
                       help="compressions to plan besides none, each where the architecture takes it: FP16, BF16, "
                            "PowerSGD[:RANK] (default rank 2), TopK[:RATIO] (default 0.01); their codecs' time is "
                            "not priced")
    group.add_argument("--save", metavar="DIR", default=DEFAULT_SAVE,
                       help="where plan.json, plan.txt and plan.png are written (default %(default)s/)")


def asked(args: argparse.Namespace) -> bool:
    """Whether predict was asked to plan rather than to predict a trial."""
    return args.profile is not None or args.network is not None


def run(args: argparse.Namespace, bucket_bytes: float, out: TextIO, err: TextIO) -> int:
    usage = _usage(args)
    if usage:
        print(f"ringleader predict: {usage}", file=err)
        return exits.USAGE
    k = args.ranks_per_node
    try:
        cluster = at_scale.Cluster(tuple(args.workers or (k, 2 * k, 4 * k, 8 * k)), k, tuple(args.servers),
                                   bucket_bytes, tuple(map(compression, args.compressions)))
    except ValueError as error:
        print(f"ringleader predict: {error}", file=err)
        return exits.USAGE
    try:
        model = profiles.read(args.profile)
        measured = network.read(args.network)
    except (profiles.ProfileError, network.NetworkError) as error:
        print(f"ringleader predict: {error}", file=err)
        return exits.FAILED
    plans = at_scale.plan(model, measured, cluster)
    said = _said(plans, model, measured, cluster)
    document = at_scale.document(plans, model, measured, cluster)
    if args.output == "json":
        print(json.dumps(document, indent=2), file=out)
    else:
        print(said, file=out)
    try:
        saved = _save(pathlib.Path(args.save), said, document, plans, k)
    except OSError as error:
        print(f"ringleader predict: cannot write the plan into {args.save}: {error.strerror or error}", file=err)
        return exits.FAILED
    print(f"ringleader predict: the plan is in {saved}/ (plan.txt, plan.json, plan.png)", file=err)
    return exits.OK


def compression(said: str) -> spec.Compression:
    """A --compressions entry: METHOD, PowerSGD:RANK or TopK:RATIO. ValueError naming the methods otherwise."""
    name, _, value = said.partition(":")
    methods = {m.value.lower(): m for m in variants.CompressionMethod if m != variants.CompressionMethod.NONE}
    method = methods.get(name.lower())
    if method is None:
        raise ValueError(f"--compressions {said}: not a method; give {', '.join(m.value for m in methods.values())} "
                         "(PowerSGD:RANK, TopK:RATIO)")
    field = {variants.CompressionMethod.POWER_SGD: "rank", variants.CompressionMethod.TOP_K: "ratio"}.get(method)
    if value and field is None:
        raise ValueError(f"--compressions {said}: {method.value} takes no value")
    number: int | float | str = value
    try:
        number = (int if field == "rank" else float)(value)
    except ValueError:
        pass  # refused below, in the schema's words
    try:
        return spec.Compression.model_validate({"method": method.value, **({field: number} if value else {})})
    except pydantic.ValidationError as error:
        raise ValueError(f"--compressions {said}: {field} {error.errors()[0]['msg'].lower()}") from None


def _usage(args: argparse.Namespace) -> str | None:
    if args.profile is None or args.network is None:
        return "planning needs both --profile FILE and --network FILE"
    if args.source is not None:
        return f"give SOURCE ({args.source}) or --profile and --network, not both: a plan has no trial's records"
    given = [f"--{name}" for name in PLANNING_ONLY if getattr(args, name) is not None]
    if given:
        return f"{' and '.join(given)} name a trial's records: leave them out when planning from --profile"
    return None


def _said(plans: list[at_scale.Planned], model: profiles.ModelProfile, measured: network.MeasuredNetwork,
          cluster: at_scale.Cluster) -> str:
    size = model.profile.total_bytes
    lines = [f"profile: {model.source}",
             f"  model {size / 1e6:.3f} MB in {len(model.profile.gradients)} gradients; one worker's iteration "
             f"{1000 * model.iteration_seconds:.3f} ms (forward {1000 * model.forward_seconds:.3f}, backward "
             f"{1000 * model.profile.backward_seconds:.3f}, update {1000 * model.update_seconds:.3f}) on "
             f"{model.device}",
             f"network: {measured.said()}",
             f"cluster: {cluster.ranks_per_node} rank{'s' * (cluster.ranks_per_node != 1)} to a node, BSP, "
             f"parameter servers on nodes of their own",
             "",
             "The answer:",
             *(f"  {line}" for line in at_scale.answer(plans).splitlines()),
             "",
             at_scale.table(plans),
             *([f"  {at_scale.NO_CODEC}"] if cluster.compressions else []),
             f"  {at_scale.band_note()}"]
    return "\n".join(lines)


def _save(directory: pathlib.Path, said: str, document: dict, plans: list[at_scale.Planned], k: int) -> pathlib.Path:
    from ringleader.report import plan_figure  # matplotlib: only once a plan is written

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "plan.txt").write_text(said + "\n")
    (directory / "plan.json").write_text(json.dumps(document, indent=2) + "\n")
    plan_figure.plot(plans, directory,
                     f"Planned: each architecture at {', '.join(map(str, sorted({p.workers for p in plans})))} "
                     f"workers, {k} to a node (BSP)")
    return directory
