"""Validation of `ringleader predict`: every trial predicts every other trial of its worker count; median and worst
|error|.

Runbook (from the repository root; 5 to 8 minutes on a loaded 2-core machine):

    .venv/bin/python bench/bench_predict_validation.py                  # 200Mbit emulated and loopback, 2 3 4 workers
    .venv/bin/python bench/bench_predict_validation.py --links 200Mbit --workers 2 3   # the acceptance check (2 min)
    .venv/bin/python bench/bench_predict_validation.py --rescore /tmp/x/runs-200Mbit   # score runs again, no new trials
    .venv/bin/python bench/bench_predict_validation.py --links 200Mbit --workers 2 3 --burners 2   # under 2 busy cores
    ... --record tests/fixtures/predict_validation.json.gz   # add the runs to those the bands are fitted on

For each link (an emulated cap such as 200Mbit, or `loopback`: no cap) it writes one experiment file
(an mlp, BSP, one parameter server) sweeping ParameterServer, PeerToPeer and RingAllReduce over the
worker counts, runs it once with `ringleader run` into a temporary directory, then runs `ringleader
predict RUN -o json` and scores, for every trial X and every trial Y with X's worker count, X's
prediction of Y's architecture against Y's measured median iteration time:

    error = predicted / measured - 1          (X = Y: the trial's own prediction; counted apart)

It prints, per link, each scenario kind (the predicted architecture; "all" for every pair) at each
worker count and over all of them: pairs, median |error|, worst |error|, mean error (its sign says
over- or under-prediction) and how many pairs fell inside the band `ringleader predict` stated for them
(a band: the |error| 9 in 10 held-out predictions kept within, prediction_validation.fit over the recorded runs,
no narrower than any one machine's own).
The acceptance check of docs/predict-validation.md is the 200Mbit link's "all" row at 2 and 3 workers:
median at most 5 %, worst at most 10 %. Results, with the machine's load average before and after and
the run queue measured through the trials (harness.Load), go to bench/results/predict_validation.json.
Not a test: nothing asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import harness
from ringleader.models import prediction_validation
from ringleader.tracking import reading

ARCHITECTURES = ("ParameterServer", "PeerToPeer", "RingAllReduce")
LOOPBACK = "loopback"
ALL = "all"
ACCEPT_MEDIAN, ACCEPT_WORST = 0.05, 0.10
CLI = [sys.executable, "-m", "ringleader.cli"]


def experiment(link: str, args: argparse.Namespace) -> dict:
    """The experiment file of one link: the three architectures at every worker count, as `ringleader run` takes it."""
    spec = {
        "parameterServers": {"replicas": 1},
        "workers": {"replicas": args.workers[0]},
        "model": {"name": args.model, "batchSize": args.batch_size, "iterations": args.iterations,
                  "warmupIterations": args.warmup},
        "data": {"synthetic": {"samples": 1024}},
        "sweep": {"matrix": {"architecture": list(ARCHITECTURES), "workers": list(args.workers)}},
    }
    if link != LOOPBACK:
        spec["network"] = {"bandwidth": link}
    name = "pv-" + ("loopback" if link == LOOPBACK else link.lower())
    return {"apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
            "metadata": {"name": name}, "spec": spec}


def run_link(link: str, directory: pathlib.Path, args: argparse.Namespace) -> pathlib.Path:
    """Run the link's experiment once; the run directory."""
    return harness.run_experiment(experiment(link, args), directory, args.trial_timeout,
                                  len(ARCHITECTURES) * len(args.workers))


def predictions(run: pathlib.Path) -> list[dict]:
    """`ringleader predict RUN -o json`: one document per predicted trial."""
    done = subprocess.run(CLI + ["predict", str(run), "-o", "json"], env=harness.cli_environ(), capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"ringleader predict failed ({done.returncode}):\n{done.stderr[-3000:]}")
    if done.stderr.strip():
        print(done.stderr.strip(), file=sys.stderr)
    return json.loads(done.stdout)


def pairs(run: pathlib.Path, documents: list[dict]) -> list[dict]:
    """Every (predicting trial, predicted trial) of one worker count, with the prediction and the measurement."""
    sweep = reading.from_directory(run)
    trials = {t.trial.name: t for t in sweep.trials if t.summary and t.summary.prediction}
    by_name = {d["trial"]: d for d in documents}
    found = []
    for name, document in by_name.items():
        source = trials[name].trial
        for other, target in trials.items():
            if len(target.trial.worker_slots()) != len(source.worker_slots()) or other not in by_name:
                continue
            label = by_name[other]["architecture"]
            predicted = document["architectures"].get(label, {}).get("iterationSeconds")
            measured = by_name[other]["measuredIterationSeconds"]
            if predicted is None or not measured:
                continue
            found.append({"from": name, "fromArchitecture": document["architecture"], "to": other,
                          "architecture": label, "workers": len(source.worker_slots()), "own": name == other,
                          "predictedSeconds": predicted, "measuredSeconds": measured,
                          "error": predicted / measured - 1.0,
                          "band": document["architectures"][label].get("errorBandFraction")})
    return found


def rows(link: str, found: list[dict]) -> list[dict]:
    """Per scenario kind (the predicted architecture, and all) and worker count (and all): median and worst |error|."""
    table = []
    cross = [p for p in found if not p["own"]]
    kinds = [ALL] + sorted({p["architecture"] for p in cross})
    counts = sorted({p["workers"] for p in cross})
    for kind in kinds + ["own"]:
        chosen = [p for p in found if p["own"]] if kind == "own" else \
            [p for p in cross if kind == ALL or p["architecture"] == kind]
        for workers in counts + [ALL]:
            counted = [p for p in chosen if workers == ALL or p["workers"] == workers]
            errors = [p["error"] for p in counted]
            if not errors:
                continue
            banded = [p for p in counted if p["band"] is not None]
            table.append({"link": link, "scenario": kind, "workers": workers, "pairs": len(errors),
                          "medianAbsError": statistics.median(abs(e) for e in errors),
                          "worstAbsError": max(abs(e) for e in errors), "meanError": statistics.fmean(errors),
                          "banded": len(banded), "insideBand": sum(abs(p["error"]) <= p["band"] for p in banded)})
    return table


def print_table(table: list[dict]) -> None:
    print(f"{'link':<10} {'scenario':<8} {'workers':>7} {'pairs':>5} {'median |err|':>12} {'worst |err|':>11} "
          f"{'mean err':>9} {'inside the stated band':>22}")
    for row in table:
        inside = f"{row['insideBand']} of {row['banded']}" if row["banded"] else "no band"
        print(f"{row['link']:<10} {row['scenario']:<8} {str(row['workers']):>7} {row['pairs']:>5} "
              f"{100 * row['medianAbsError']:>11.1f}% {100 * row['worstAbsError']:>10.1f}% "
              f"{100 * row['meanError']:>+8.1f}% {inside:>22}")


def acceptance(table: list[dict], link: str, workers: tuple[int, ...] = (2, 3)) -> str | None:
    """The acceptance check on `link` at `workers`: every cross pair there, median and worst |error|."""
    chosen = [r for r in table if r["link"] == link and r["scenario"] == ALL and r["workers"] in workers]
    if not chosen:
        return None
    return " ".join(
        f"N={r['workers']}: median {100 * r['medianAbsError']:.1f}% (<= {100 * ACCEPT_MEDIAN:.0f}%), "
        f"worst {100 * r['worstAbsError']:.1f}% (<= {100 * ACCEPT_WORST:.0f}%)"
        f"{' ok' if r['medianAbsError'] <= ACCEPT_MEDIAN and r['worstAbsError'] <= ACCEPT_WORST else ' MISSED'};"
        for r in chosen)


def settle(burners: int, seconds: float = 90) -> None:
    """Wait (at most `seconds`) until the 1-minute load average shows the burners: the ranks record it as their
    machine's load, and the band a trial takes follows it, so a first trial that started before the average rose
    would be recorded as quieter than it ran."""
    deadline = time.monotonic() + seconds
    while burners and os.getloadavg()[0] < 0.9 * burners and time.monotonic() < deadline:
        time.sleep(2)
    if burners:
        print(f"load: 1-minute average {os.getloadavg()[0]:.2f} with {burners} burners, before the first trial")


def record(path: pathlib.Path, trials: dict[str, list], load: dict) -> None:
    """Add each link's recorded trials (prediction_validation.record of its run) to `path` (its runs kept), each with
    the load it ran under."""
    recorded = prediction_validation.read(path) if path.exists() else []
    for link, kept in trials.items():
        recorded.append({"link": link, **load, "trials": kept})
    prediction_validation.write(path, recorded)
    print(f"recorded: {len(trials)} run(s) added to {path} ({len(recorded)} in all)")
    print_bands(recorded)


def print_bands(recorded: list[dict]) -> None:
    """The bands the recorded runs fit (validation.BANDS and docs/predict-validation.md's table take them), and how
    many pairs each held-out check finds inside."""
    found = prediction_validation.recorded_pairs(recorded)
    print("bands the recorded runs fit (for validation.BANDS and docs/predict-validation.md):")
    for (kind, label), bands in prediction_validation.bands(found).items():
        for band in bands:
            print(f"| `{kind}` | `{label}` | {band.machine()} | {band.load_per_cpu} | {band.pairs} | "
                  f"{100 * band.within:.1f} % | {100 * band.median:.1f} % | {100 * band.worst:.1f} % | "
                  f"{', '.join(map(str, band.workers))} | {band.threads_per_cpu:.1f} |")
    for name, (covered, total) in (("leave one pair out", prediction_validation.held_out(found)),
                                   ("leave one trial out", prediction_validation.held_out_trials(found))):
        print(f"held out, {name}: {covered} of {total} inside")
    for machine, (covered, total) in prediction_validation.held_out_machines(found).items():
        print(f"held out by machine, {machine}'s pairs against the bands of the others: {covered} of {total} inside")


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", nargs="+", default=["200Mbit", LOOPBACK],
                        help="emulated caps (e.g. 200Mbit) and/or `loopback` (no cap) (default: %(default)s)")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 3, 4],
                        help="worker counts (default: %(default)s)")
    parser.add_argument("--iterations", type=int, default=40, help="iterations per trial (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up iterations (default %(default)s)")
    parser.add_argument("--model", default="mlp", help="built-in model (default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=16, help="per-worker batch (default %(default)s)")
    parser.add_argument("--trial-timeout", type=int, default=180,
                        help="seconds one trial may take (default %(default)s)")
    parser.add_argument("--rescore", nargs="+", type=pathlib.Path, metavar="RUN",
                        help="score these `ringleader run` directories again (their link read from the trials) "
                             "instead of running new trials")
    parser.add_argument("--burners", type=int, default=0, help="CPU burners running through the new trials "
                                                                "(harness.Load), "
                                                                "so that the load is a setting (default 0)")
    parser.add_argument("--record", type=pathlib.Path, metavar="FILE",
                        help="add the runs' trials, as `ringleader predict` reads them, and the load they ran under to "
                             "FILE (gzipped JSON, models/prediction_validation.py): the recorded runs the bands are "
                             "fitted on and tests/unit/test_prediction_held_out.py checks "
                             "(tests/fixtures/predict_validation.json.gz)")
    parser.add_argument("--keep", type=pathlib.Path, metavar="DIR", help="run into DIR and keep it (default: a "
                                                                        "temporary directory, removed)")
    args = parser.parse_args()
    if args.record and args.rescore:
        parser.error("--record needs new trials: the load a rescored run ran under is not known here, and a "
                     "recorded run says what load its band was measured under")

    load_before = os.getloadavg()
    started = time.monotonic()
    found: dict[str, list[dict]] = {}
    runs: dict[str, str] = {}
    kept: dict[str, list] = {}
    load_measured = None
    if args.rescore:
        for run in args.rescore:
            kept = run / "runs"  # a --keep directory's runs-LINK: the `ringleader run` directory is inside its runs/
            run = reading.session_directory(kept if kept.is_dir() else run)[0]
            bandwidth = reading.from_directory(run).trials[0].trial.spec.network.bandwidth
            link = bandwidth or LOOPBACK
            found[link] = pairs(run, predictions(run))
            runs[link] = str(run)
    else:
        trials = len(args.links) * len(ARCHITECTURES) * len(args.workers)
        with tempfile.TemporaryDirectory(prefix="bench-predict-") as temporary, \
                harness.Load(args.burners, seconds=args.trial_timeout * trials) as load:
            base = args.keep or pathlib.Path(temporary)
            settle(args.burners)
            for link in args.links:
                print(f"{link}: running {len(ARCHITECTURES) * len(args.workers)} trials "
                      f"(workers {' '.join(map(str, args.workers))})", flush=True)
                run = run_link(link, base / f"runs-{link}", args)
                found[link] = pairs(run, predictions(run))
                runs[link] = str(run)
                if args.record:  # read now: a temporary directory is gone once the runs end
                    kept[link] = prediction_validation.record(reading.from_directory(run).trials)
        load_measured = load.document()
        print(f"load: {load.said()}")
    load_after = os.getloadavg()

    table = [row for link, pairs_ in found.items() for row in rows(link, pairs_)]
    print()
    print_table(table)
    for link in found:
        verdict = acceptance(table, link)
        if verdict and link != LOOPBACK:
            print(f"acceptance, {link}: {verdict}")
    print(f"load average (1, 5, 15 min): before {' '.join(f'{x:.2f}' for x in load_before)}, "
          f"after {' '.join(f'{x:.2f}' for x in load_after)}; {time.monotonic() - started:.0f} s")
    document = {"machine": harness.machine(), "loadBefore": load_before, "loadAfter": load_after,
                "load": load_measured,
                "arguments": {k: (str(v) if isinstance(v, pathlib.Path) else v) for k, v in vars(args).items()
                              if k != "rescore"},
                "runs": runs, "rows": table, "pairs": found}
    print(f"results: {harness.write_result('predict_validation', document)}")
    if args.record:
        record(args.record, kept, {"loadBefore": load_before, "loadAfter": load_after, "load": load_measured,
                                   "burners": args.burners, "machine": harness.machine(),
                                   "command": " ".join(sys.argv)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
