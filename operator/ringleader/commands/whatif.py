"""`ringleader whatif SOURCE`: a trial's scaling factor at other worker counts, bandwidths and compressions; cli.py
delegates here.

    ringleader whatif ringleader-runs/                         # the newest run: a ring trial's lowest worker rank
    ringleader whatif ringleader-runs/quickstart-20250101-120000/quickstart-2 --workers 8 16
    ringleader whatif profile.json --bandwidths 10 100 --target-sf 0.9 -o whatif.png
    ringleader whatif 3f2a9c... --calibrate-add add.json       # a sweep or trial run in MLflow; add timed here
    ringleader whatif profile.json --add-table add.json        # the same machine's add times, read back

SOURCE is a profile file (docs/whatif.md), a rank, trial or run directory, or in MLflow a trial run id,
a sweep run id or an experiment (as `ringleader report` finds them). Of a run or sweep, the trial is the one
models/profile.pick takes for a ring (a RingAllReduce trial, the fewest workers), and of a trial its
lowest worker rank with a layers.json, as `ringleader predict` takes it; the first line says which. Exit
status: 0 when the table is printed, 1 when SOURCE names nothing usable or calibration fails, 2 for wrong
options. Importing this module is cheap: MLflow, matplotlib and torch are imported only when needed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import textwrap
from typing import TextIO

from ringleader.models import addcost, collectives, overlap, placement_notes, whatif
from ringleader.models import profile as profile_
from ringleader.api import variants
from ringleader.contract import exits, layout, records
from ringleader.commands import sources

MIB = 1024 * 1024
DEFAULT_WORKERS = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SOURCE",
                        help="a profile file (JSON, docs/whatif.md); a rank, trial or run directory of `ringleader "
                             "run` (a run directory: a RingAllReduce trial if it has one, the fewest workers); or in "
                             "MLflow a trial run id, a sweep run id or an experiment name or id")
    parser.add_argument("--trial", metavar="NAME",
                        help="the trial of a run directory or sweep to take the profile from")
    sources.add_profile_arguments(parser, "predict")
    parser.add_argument("--workers", type=int, nargs="+", metavar="N",
                        help=f"worker counts (default {DEFAULT_WORKERS}, and a trial's own count)")
    parser.add_argument("--bandwidths", type=float, nargs="+", metavar="GBIT",
                        help=f"link rates in Gbit/s (default: {list(whatif.BANDWIDTHS_GBIT)}, and a trial's own cap, "
                             "so that the model can be checked against what the trial measured)")
    parser.add_argument("--compressions", type=float, nargs="+", default=list(whatif.COMPRESSIONS), metavar="C",
                        help="compression ratios, 1 = none (default: %(default)s, and a compressed trial's measured "
                             "ratio)")
    parser.add_argument("--codec-ms", type=float, metavar="MS",
                        help="encoding and decoding per iteration, added to the overhead when compressing (default: "
                             "a compressed trial's measured time/codec, else 0)")
    parser.add_argument("--bucketing", choices=("fusion", "runtime"),
                        help="how gradients are grouped into allreduces: Horovod's tensor fusion (--cycle-time-ms, "
                             "--fusion-threshold-mib; the default for a profile file) or the runtime ring's buckets "
                             "(--bucket-mib; the default for a measured trial or rank: as a ring trial recorded them)")
    parser.add_argument("--cycle-time-ms", type=float, default=1000 * whatif.FUSION.window_seconds, metavar="MS",
                        help="fusion cycle time: gradients ready within it of a bucket's first share the bucket "
                             "(default %(default)g)")
    parser.add_argument("--fusion-threshold-mib", type=float, default=whatif.FUSION.cap_bytes / MIB, metavar="MIB",
                        help="fusion threshold: a bucket never grows past it (default %(default)g)")
    parser.add_argument("--bucket-mib", type=float, default=overlap.RuntimeBuckets().bucket_bytes / MIB,
                        metavar="MIB", help="with --bucketing runtime: the ring's bucket size, RINGLEADER_BUCKET_BYTES "
                                            "(default %(default)g, the runtime's default)")
    parser.add_argument("--add-fixed-us", type=float, default=0.0, metavar="US",
                        help="reduction arithmetic: fixed cost per add call, microseconds (default 0)")
    parser.add_argument("--add-ns-per-byte", type=float, default=0.0, metavar="NS",
                        help="reduction arithmetic: cost per byte added, nanoseconds (default 0; both 0: free)")
    parser.add_argument("--add-table", type=pathlib.Path, metavar="FILE",
                        help="reduction arithmetic from a table that --calibrate-add wrote")
    parser.add_argument("--calibrate-add", type=pathlib.Path, metavar="FILE",
                        help="time torch's add on this machine (about 2 s), write the table to FILE and use it")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="the device --calibrate-add times (default cpu)")
    parser.add_argument("--target-sf", type=float, metavar="SF",
                        help="also print the smallest compression ratio reaching this scaling factor (0 < SF <= 1) "
                             "at each worker count and bandwidth")
    parser.add_argument("-o", "--plot", type=pathlib.Path, metavar="FILE.png",
                        help="write a plot: scaling factor against bandwidth, a line per compression")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    # The streams of the moment of the call, not of the import: a caller may have replaced sys.stdout since.
    out, err = out or sys.stdout, err or sys.stderr
    wrong = _wrong_options(args)
    if wrong:
        print(f"ringleader whatif: {wrong}", file=err)
        return exits.USAGE
    try:
        add, add_said = _add_cost(args, out)
        basis, said = _basis(args, out, err)
    except (ValueError, LookupError, OSError, RuntimeError) as error:
        print(f"ringleader whatif: {error}", file=err)
        return exits.FAILED

    bucketing = _bucketing(args, basis)
    if basis.pods is not None:
        print(f"two levels: {basis.pods.ranks} ranks to a pod, a ring inside each at the probed link, one of pods "
              "across at each bandwidth", file=out)
    print(f"{said}: {len(basis.profile.gradients)} gradients, {basis.profile.total_bytes / 1e6:.3f} MB, backward "
          f"{1000 * basis.profile.backward_seconds:.3f} ms, t_batch {1000 * basis.batch_seconds:.3f} ms", file=out)
    print(f"{bucketing.describe()}; add: {add_said}", file=out)
    _own_point(args, basis, out)
    if basis.pods is not None and any(n % basis.pods.ranks for n in args.workers):
        print(f"ringleader whatif: --workers must be multiples of the trial's {basis.pods.ranks} ranks per pod (a "
              "hierarchical ring's pods are full)", file=err)
        return exits.USAGE
    if basis.floor is not None:
        print(f"a round costs at least the probed allreduce, {1e6 * basis.floor.a_seconds:.1f} us + "
              f"{1e9 * basis.floor.b_seconds_per_byte:.3f} ns/byte", file=out)
    if basis.wait_seconds:
        print(f"wait: {1000 * basis.wait_seconds:.3f} ms per iteration for the slowest worker (BSP), added to the "
              "overhead", file=out)
    codec = (args.codec_ms or 0.0) / 1000
    measured = basis.wire
    if measured is not None:
        print(f"measured compression: {measured.label}, c = {measured.ratio(basis.workers):.4f} (bytes "
              f"uncompressed over sent) in {len(measured.rounds)} round(s), encode and decode "
              f"{1000 * measured.codec_seconds:.3f} ms per iteration", file=out)
        codec = measured.codec_seconds if args.codec_ms is None else codec
        measured = dataclasses.replace(measured, codec_seconds=codec)
    if codec:
        print(f"codec: {1000 * codec:.3f} ms per iteration added to the overhead when c > 1", file=out)
    compressions = [collectives.uniform(c, codec) for c in args.compressions] + ([measured] if measured else [])
    bandwidths = [g * 1e9 for g in args.bandwidths]
    everything = []
    for workers in args.workers:
        results = whatif.sweep(basis.profile, workers, basis.batch_seconds, bandwidths, compressions, add, bucketing,
                               basis.floor, basis.wait_seconds, basis.pods)
        everything.extend(results)
        print(f"\nN = {workers}", file=out)
        print(whatif.table(results), file=out)
        floor = whatif.floor_said(results, basis, add, bucketing)
        if floor:
            print(textwrap.fill(floor, 110), file=out)
    print("\n" + textwrap.fill(whatif.TERMS, 110), file=out)
    if args.target_sf is not None:
        print(f"\ncompression needed for SF >= {args.target_sf:g}:", file=out)
        for workers in args.workers:
            for bandwidth in bandwidths:
                needed = whatif.compression_needed(basis.profile, workers, bandwidth, args.target_sf,
                                                   basis.batch_seconds, add, bucketing, floor=basis.floor,
                                                   wait_seconds=basis.wait_seconds, pods=basis.pods)
                print(f"  N={workers} {bandwidth / 1e9:g} Gbit/s: {_needed(needed)}", file=out)
    if args.plot:
        from ringleader.report import whatif_figure  # matplotlib takes a second: only when a plot is asked for

        whatif_figure.plot(everything, args.plot, title=said)
        print(f"\nPlot: {args.plot}", file=out)
    return exits.OK


def _own_point(args: argparse.Namespace, basis: whatif.Basis, out: TextIO) -> None:
    """Where --workers and --bandwidths are not given, the defaults and the trial's own worker count and cap: the
    one point whose scaling factor the trial measured. Said when added."""
    own_workers = basis.workers if basis.workers > 1 else None
    if args.workers is None:
        args.workers = sorted({DEFAULT_WORKERS, *([own_workers] if own_workers else [])})
    if args.bandwidths is None:
        args.bandwidths = sorted({*whatif.BANDWIDTHS_GBIT, *([basis.cap_gbit] if basis.cap_gbit else [])})
        if own_workers and basis.cap_gbit:
            print(f"with the trial's own point, N = {own_workers} at {basis.cap_gbit:g} Gbit/s (its cap): the model "
                  "there can be checked against what the trial measured", file=out)


def _wrong_options(args: argparse.Namespace) -> str | None:
    if args.workers is not None and any(n < 1 for n in args.workers):
        return "--workers must be greater than or equal to 1"
    if args.bandwidths is not None and any(not b > 0 for b in args.bandwidths):
        return "--bandwidths must be greater than 0 (Gbit/s)"
    if any(not c >= 1 for c in args.compressions):
        return "--compressions must be greater than or equal to 1 (1: no compression)"
    if args.codec_ms is not None and args.codec_ms < 0:
        return "--codec-ms must be greater than or equal to 0"
    if not args.cycle_time_ms > 0 or not args.fusion_threshold_mib > 0 or not args.bucket_mib > 0:
        return "--cycle-time-ms, --fusion-threshold-mib and --bucket-mib must be greater than 0"
    if args.add_fixed_us < 0 or args.add_ns_per_byte < 0:
        return "--add-fixed-us and --add-ns-per-byte must be greater than or equal to 0"
    chosen = [name for name, given in (("--add-fixed-us/--add-ns-per-byte", args.add_fixed_us or args.add_ns_per_byte),
                                       ("--add-table", args.add_table), ("--calibrate-add", args.calibrate_add))
              if given]
    if len(chosen) > 1:
        return f"{' and '.join(chosen)} each set the add cost: give one of them"
    if args.target_sf is not None and not 0 < args.target_sf <= 1:
        return "--target-sf must be greater than 0 and at most 1"
    if args.rank is not None and args.rank < 0:
        return "--rank must be greater than or equal to 0"
    return None


def _bucketing(args: argparse.Namespace, basis: whatif.Basis) -> overlap.Bucketing:
    """--bucketing, else the source's: a measured trial's runtime buckets, a profile file's fusion window."""
    if args.bucketing is None:
        return basis.bucketing
    if args.bucketing == "runtime":
        return overlap.RuntimeBuckets(args.bucket_mib * MIB)
    return _fusion(args)


def _add_cost(args: argparse.Namespace, out: TextIO) -> tuple[addcost.AddCost, str]:
    """The add cost the options ask for, and how to say it."""
    if args.calibrate_add:
        from ringleader.commands import addcalibration  # imports torch

        table = addcalibration.calibrate(args.device)
        args.calibrate_add.parent.mkdir(parents=True, exist_ok=True)
        args.calibrate_add.write_text(json.dumps(table.to_document(), indent=2) + "\n")
        print(f"add cost calibrated on {args.device}, written to {args.calibrate_add}", file=out)
        return table, _table_said(table, str(args.calibrate_add))
    if args.add_table:
        try:
            document = json.loads(args.add_table.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"--add-table {args.add_table}: not JSON ({error})") from None
        try:
            table = addcost.AddTable.from_document(document)
        except ValueError as error:
            raise ValueError(f"--add-table {args.add_table}: {error}") from None
        return table, _table_said(table, str(args.add_table))
    if args.add_fixed_us or args.add_ns_per_byte:
        return (addcost.fixed_plus_per_byte(args.add_fixed_us * 1e-6, args.add_ns_per_byte * 1e-9),
                f"{args.add_fixed_us:g} us + {args.add_ns_per_byte:g} ns/byte per call")
    return addcost.no_add, ("not modelled (the cost of adding received gradients into one's own; "
                            "--add-fixed-us, --add-table or --calibrate-add model it)")


def _table_said(table: addcost.AddTable, where: str) -> str:
    ends = [(size, seconds) for size, seconds in zip(table.sizes_bytes, table.seconds)][::len(table.seconds) - 1 or 1]
    return (f"table {where} ({table.device}: " + " to ".join(f"{1e6 * s:.2f} us at {b / 1024:g} KiB" for b, s in ends)
            + ", interpolated)")


def _needed(needed: whatif.Needed) -> str:
    if needed.compression is None:
        return f"unreachable (even infinite compression gives SF {needed.limit:.4f})"
    if needed.compression == 1.0:
        return "1 (met without compression)"
    return f"{needed.compression:.4f}"


def _basis(args: argparse.Namespace, out: TextIO, notices: TextIO) -> tuple[whatif.Basis, str]:
    """What SOURCE gives the model (whatif.Basis), and what it was taken from (which run a directory or experiment
    took: on `notices`)."""
    path = pathlib.Path(args.source)
    refused = layout.experiment_file(args.source)
    if refused:
        raise ValueError(refused)
    if path.is_file():
        try:
            document = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not a profile file: not JSON ({error}); docs/whatif.md gives the format") \
                from None
        try:
            profile, batch = profile_.from_document(document)
        except ValueError as error:
            raise ValueError(f"{path}: not a profile file: {error}") from None
        return whatif.Basis(profile, batch, 1, _fusion(args), 0.0, None, None), str(path)
    if path.is_dir() and (path / records.LAYERS_FILE).is_file():  # a rank directory
        from ringleader.tracking import reading  # imported when needed, as sources.resolve does

        number = path.name.removeprefix("rank-")
        if number.isdigit() and (path.parent / layout.TRIAL_FILE).is_file():  # in its trial: what the trial gives
            return _trial_basis(reading.trial_from_directory(path.parent), int(number), out), str(path)
        layers = json.loads((path / records.LAYERS_FILE).read_text())
        iterations = records.read_iterations(path / records.ITERATIONS_FILE)
        profile, batch = whatif.from_rank(layers, iterations)
        measured = whatif.measured_compression(iterations)
        chosen = None if measured is None else dataclasses.replace(
            collectives.uniform(measured.compression, measured.codec_seconds), label="measured")
        return whatif.Basis(profile, batch, 1, overlap.RuntimeBuckets(recorded=profile_.bucket_sizes(layers)), 0.0,
                            None, chosen), str(path)
    found = sources.resolve(args.source, args.tracking_uri, notices, "not a profile file or run directory")
    if found.single:
        trial, why = found.trials[0], ""
    elif args.trial is not None:
        trial, why = _named(found, args.trial), ""
    else:
        trial, why = profile_.pick(found.trials)
        why = f" ({why})"
    rank = profile_.worker_rank(trial, args.rank)
    if not trial.records.get(rank):
        raise LookupError(f"trial {trial.trial.name} has no iteration records for rank {rank}, so no t_batch")
    taken = "--rank" if args.rank is not None else "the lowest worker rank"
    architecture = trial.spec.architecture
    if not variants.ARCHITECTURES[architecture].buckets:  # what is modelled is a ring, not this trial's exchange
        why += (f" (a {architecture.value} trial: modelled as a ring allreduce of its gradients after backward, "
                f"not as its own exchange; `ringleader predict` prices {architecture.value} itself)")
    return _trial_basis(trial, rank, out), f"trial {trial.trial.name}{why}, rank {rank} ({taken})"


def _trial_basis(trial, rank: int, out: TextIO) -> whatif.Basis:
    """A trial's basis, saying first when its ranks shared a node: what it measured was partly a bridge."""
    shared = placement_notes.link_note(trial.summary)
    if shared:
        print(shared, file=out)
    return whatif.basis(trial, rank)


def _fusion(args: argparse.Namespace) -> overlap.FusionWindow:
    return overlap.FusionWindow(args.cycle_time_ms / 1000, args.fusion_threshold_mib * MIB)


def _named(found: sources.Found, name: str):
    for trial in found.trials:
        if trial.trial.name == name:
            return trial
    raise LookupError(f"{found.where} has no trial {name!r}; its trials: "
                      f"{', '.join(t.trial.name for t in found.trials)}")
