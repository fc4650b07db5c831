"""`ringleader predict SOURCE`: a trial's iteration time as the models predict it, and 1PS's, 4PS's, P2P's and the
ring's;
`ringleader predict --profile P --network N`: a cluster not run on, planned (commands/plan.py).

    ringleader predict ringleader-runs/                   # every trial of the newest run
    ringleader predict ringleader-runs/quickstart-20250101-120000/quickstart-2 -o json
    ringleader predict 3f2a9c...                          # a trial or sweep run in MLflow

SOURCE is a trial or run directory of `ringleader run`, or in MLflow a trial run id, a sweep run id or an
experiment (as `ringleader whatif` and `ringleader report` find them). Each trial is predicted from the link
it probed at its start, its lowest worker rank's layers.json (as `ringleader whatif` takes it) and its
workers' records (models/prediction.py; docs/predict.md). Exit status: 0 when at least one trial was
predicted, 1 when SOURCE names nothing or no trial could be, 2 for wrong options.
Importing this module is cheap: MLflow is imported only when SOURCE must be looked up.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import textwrap
from typing import Any, TextIO

from ringleader.models import combinations, placement_notes, prediction
from ringleader.models.profile import worker_rank
from ringleader.models.results import TrialResult
from ringleader.contract import exits
from ringleader.commands import plan, sources

MIB = 1024 * 1024
FORMATS = ("table", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SOURCE", nargs="?",
                        help="a trial or run directory of `ringleader run` (a run directory: every trial), or in "
                             "MLflow a trial run id, a sweep run id or an experiment name or id; or none, to plan "
                             "from --profile and --network")
    parser.add_argument("--trial", metavar="NAME", help="only this trial of a run directory or sweep")
    sources.add_profile_arguments(parser, "whatif")
    parser.add_argument("--bucket-mib", type=float, default=prediction.DEFAULT_BUCKET_BYTES / MIB, metavar="MIB",
                        help="the ring's bucket size the DAG model groups layers by where a trial recorded no "
                             "buckets of its own (a ring trial's are used): RINGLEADER_BUCKET_BYTES of the run "
                             "(default %(default)g, the runtime's default)")
    parser.add_argument("-o", "--output", choices=FORMATS, default="table",
                        help="table (default) or json: one document per trial (planning: the plan's)")
    plan.add_arguments(parser)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    # The streams of the moment of the call, not of the import: a caller may have replaced sys.stdout since.
    out, err = out or sys.stdout, err or sys.stderr
    if args.rank is not None and args.rank < 0:
        print("ringleader predict: --rank must be greater than or equal to 0", file=err)
        return exits.USAGE
    if not args.bucket_mib > 0:
        print("ringleader predict: --bucket-mib must be greater than 0", file=err)
        return exits.USAGE
    if plan.asked(args):
        return plan.run(args, args.bucket_mib * MIB, out, err)
    if args.source is None:
        print("ringleader predict: give SOURCE (a trial or run directory, or an MLflow run or experiment), or "
              "--profile FILE and --network FILE to plan a cluster", file=err)
        return exits.USAGE
    try:
        found = sources.resolve(args.source, args.tracking_uri, err, "not a trial or run directory")
        trials = _chosen(found, args.trial)
    except (LookupError, OSError, ValueError) as error:
        print(f"ringleader predict: {error}", file=err)
        return exits.FAILED

    documents, predicted = [], 0
    refused: dict[str, list[str]] = {}  # {reason: the trials it holds for}
    for trial in trials:
        name = trial.trial.name
        try:
            rank = worker_rank(trial, args.rank)
            why = "--rank" if args.rank is not None else "the lowest worker rank"
            summary = trial.summary
            result = prediction.predict_trial(trial.trial, trial.records, trial.layers[rank], rank,
                                              summary.link_probe if summary else None, args.bucket_mib * MIB,
                                              summary.usage if summary else None)
        except (LookupError, ValueError) as error:
            # The line names the trials itself: a reason that starts with the trial's name would say it twice.
            refused.setdefault(_cause(trial, found, str(error).removeprefix(f"trial {name}: ")), []).append(name)
            continue
        predicted += 1
        if args.output == "json":
            documents.append(_document(trial, rank, result))
        else:
            _print(trial, f"rank {rank} ({why})", result, out)
    for reason, names in refused.items():
        print(f"ringleader predict: trial{'s' if len(names) > 1 else ''} {', '.join(names)}: {reason}", file=err)
    if args.output == "json":
        print(json.dumps(documents, indent=2), file=out)
    elif predicted:
        print(textwrap.fill(prediction.TERMS, 110), file=out)
    if not predicted:
        print(f"ringleader predict: {found.where}: no trial could be predicted", file=err)
        return exits.FAILED
    return exits.OK


def _cause(trial: TrialResult, found: sources.Found, reason: str) -> str:
    """Why a trial cannot be predicted, in its real cause: a trial that ended before its workers traced backward
    (stopped, killed, failed) is said to have, with the command that finishes it, rather than how tracing works."""
    if trial.status == combinations.FINISHED or trial.layers:
        return reason
    if found.where.startswith(("trial run", "sweep run")):  # read from MLflow: its run directory is not at hand
        again = "run it again to the end"
    else:
        session = pathlib.Path(found.where).parent if found.single else pathlib.Path(found.where)
        again = f"resume it: ringleader run --resume {session}"
    return (f"the trial is {trial.status}: it ended before any worker traced its backward (after warm-up), so "
            f"there is no profile to predict from; {again}")


def _chosen(found: sources.Found, name: str | None) -> list[TrialResult]:
    if name is None:
        return found.trials
    chosen = [t for t in found.trials if t.trial.name == name]
    if not chosen:
        raise LookupError(f"{found.where} has no trial {name!r}; its trials: "
                          f"{', '.join(t.trial.name for t in found.trials) or 'none'}")
    return chosen


def _print(trial: TrialResult, rank: str, result: prediction.TrialPrediction, out: TextIO) -> None:
    spec, inputs = trial.spec, result.inputs
    print(f"trial {trial.trial.name} ({spec.architecture.value}, {spec.sync.paradigm.value}, {inputs.workers} "
          f"workers), profile of {rank}: model {inputs.profile.total_bytes / 1e6:.3f} MB "
          f"in {len(inputs.profile.gradients)} gradients, backward {1000 * inputs.profile.backward_seconds:.3f} ms; "
          f"compute per iteration {1000 * inputs.compute.median_seconds:.3f} ms (median), the slowest worker's "
          f"{1000 * inputs.compute.slowest_per_iteration_seconds:.3f} ms", file=out)
    print(f"link ({inputs.calibration.kind}): {inputs.calibration.fit}", file=out)
    shared = placement_notes.link_note(trial.summary)
    if shared:
        print(shared, file=out)
    print(prediction.table(result), file=out)
    print(f"this trial, {prediction.headline(result)}\n", file=out)


def _document(trial: TrialResult, rank: int, result: prediction.TrialPrediction) -> dict[str, Any]:
    """The trial's name and rank, and the trial summary's `prediction` object (docs/predict.md)."""
    shared = placement_notes.link_note(trial.summary)
    return {"trial": trial.trial.name, "rank": rank, **result.to_document(),
            **({"placement": shared} if shared else {})}
