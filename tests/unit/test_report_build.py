"""The report of synthetic sweeps: which figures appear for what the sweep varies, what the findings say, and
that report.html stands alone. Trials are real (api.expand), records are shaped like the runtime's (sweeps.py)."""

from __future__ import annotations

import csv
import json
import random
import re

import pytest

import sweeps
from ringleader.models import contention, results, statistics, summary
from ringleader.report import assembly, figures, findings, scaling
from ringleader.contract import keys

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def built(tmp_path, spec, change=lambda trial: {}, name="rep"):
    trials = sweeps.trials(spec, name)
    sweep = results.SweepResult(name, [sweeps.result_of(trial, **change(trial)) for trial in trials])
    return sweep, assembly.build(sweep, tmp_path / "report")


def figure_ids(made: assembly.Report) -> list[str]:
    return [figure.id for figure in made.figures]


def test_an_architecture_sweep_with_repetitions_compares_with_intervals(tmp_path):
    sweep, made = built(tmp_path, {"sweep": {"repetitions": 2, "matrix": {
        "architecture": ["ParameterServer", "PeerToPeer", "RingAllReduce"]}}},
                        lambda t: {"jitter": 0.001 * t.repetition} if t.index != 3 else
                        {"status": "FAILED", "message": "rank 1 (worker-1) exited with code 3"})

    assert figure_ids(made) == ["comparison", "time", "repetitions"]
    # Throughput of 2 workers of batch 16: 32 / iteration seconds (20 ms compute + communication + jitter).
    ps = [32 / 0.050, 32 / 0.051]
    p2p = 32 / 0.040  # its second repetition failed
    ring = [32 / 0.030, 32 / 0.031]
    fastest = statistics.estimate(ring)
    # What the comparisons leave out comes first.
    assert made.findings[0] == "Incomplete: 1 did not finish (rep-3 FAILED). What follows compares only the trials " \
                               "that finished."
    # One PeerToPeer trial finished: ring against it within the runs (batch means of every iteration), named
    # faster since the interval clears parity by the margin runs differ by.
    assert made.findings[1].startswith(f"Fastest: RingAllReduce: {fastest.mean:.1f} samples/s (95 % CI "
                                       f"{fastest.low:.1f}-{fastest.high:.1f}, 2 repetitions), iteration p50 30.5 ms; "
                                       f"{fastest.mean / p2p:.2f}x the runner-up, PeerToPeer (95 % CI ")
    assert made.findings[1].endswith(" within runs).")
    versus_ps = statistics.ratio(ring, ps)
    assert (f"RingAllReduce: {versus_ps.mean:.2f}x the throughput of ParameterServer "
            f"(95 % CI {versus_ps.low:.2f}-{versus_ps.high:.2f}).") in made.findings
    # The fastest and its runner-up are compared once: in the fastest's sentence, not again among the comparisons.
    assert not any("the throughput of PeerToPeer" in f for f in made.findings)
    assert ("Communication is 60 % of iteration time for ParameterServer, waiting 0 %; "
            "34 % of iteration time for RingAllReduce, waiting 0 %.") in made.findings
    assert made.findings[-1] == "rep-3 FAILED: rank 1 (worker-1) exited with code 3."

    heading, combined = made.sections[0]
    assert heading.startswith("Combinations")
    throughput = statistics.estimate(ps)
    assert combined.rows[0][:3] == ["ParameterServer", "2/2",
                                    f"{throughput.mean:.1f} ({throughput.low:.1f}-{throughput.high:.1f})"]
    assert combined.rows[1][1] == "1/2"


def test_the_csv_and_json_carry_the_summaries_numbers_unrounded(tmp_path):
    sweep, made = built(tmp_path, {"sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}})

    rows = list(csv.DictReader((made.directory / "report.csv").open()))
    document = json.loads((made.directory / "report.json").read_text())
    for trial, row, entry in zip(sweep.trials, rows, document["trials"]):
        assert row["trial"] == entry["name"] == trial.trial.name
        timing = trial.summary.timing
        assert float(row["throughput"]) == timing.throughput == entry["summary"]["throughput"]
        assert float(row["comm_seconds"]) == timing.comm_seconds
        assert float(row["iteration_time_p50_seconds"]) == timing.iteration_time_p50_seconds
    assert document["axes"] == {"architecture": ["ParameterServer", "RingAllReduce"]}
    assert [f["file"] for f in document["figures"]] == ["comparison.png", "time.png"]
    assert document["findings"] == made.findings


def test_report_html_stands_alone_with_every_figure_inline(tmp_path):
    _, made = built(tmp_path, {"workers": {"replicas": 2}, "sweep": {"repetitions": 2, "matrix": {
        "architecture": ["ParameterServer", "RingAllReduce"], "workers": [2, 4]}}},
                    lambda t: {"jitter": 0.002 * t.repetition, "layers": sweeps.layers_document()})

    page = made.html.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page)
    assert "<script" not in page and "@import" not in page and "url(" not in page
    images = re.findall(r'<figure id="([^"]+)">\s*<h3>[^<]*</h3>\s*<img src="data:image/png;base64,[A-Za-z0-9+/=]+" '
                        r'alt="([^"]+)">', page)
    assert [figure_id for figure_id, _ in images] == figure_ids(made) == ["comparison", "time", "scaling",
                                                                          "communication",
                                                                         "repetitions"]
    assert "cost models of ParameterServer, RingAllReduce dashed" in dict(images)["communication"]
    for finding in made.findings:
        assert finding.replace("'", "&#x27;") in page
    for figure in made.figures:
        assert figure.path.read_bytes().startswith(PNG_MAGIC) and figure.path in made.files
    assert "workers=4: 2.00x the throughput of workers=2 at RingAllReduce" in " ".join(made.findings)


def test_a_paradigm_sweep_times_each_paradigm_to_the_worst_final_loss(tmp_path):
    _, made = built(tmp_path, {"architecture": "ParameterServer", "sync": {"staleness": 2}, "sweep": {"matrix": {
        "paradigm": ["BSP", "SSP"]}}},
                    lambda t: {"stale": 2, "loss_rate": 0.05} if t.spec.sync.paradigm.value == "SSP" else {})

    assert figure_ids(made) == ["comparison", "time", "loss", "time-to-loss", "staleness"]
    # BSP: loss 2.0 - 0.1*step, SSP: 2.0 - 0.05*step; 20 steps, trailing mean of 10 losses of 2 workers
    # (5 steps): SSP's last is 2.0 - 0.05*17 = 1.15, BSP reaches it within its run.
    [timing] = [f for f in made.findings if f.startswith("Time to loss")]
    assert timing.startswith("Time to loss 1.15 (the final loss of rep-1): BSP ")
    assert re.search(r"BSP (\d+\.\d) s; SSP 1\.0 s\.$", timing), timing


def test_a_sweep_timed_to_a_target_says_each_paradigms_time_and_which_was_first(tmp_path):
    spec = {"architecture": "ParameterServer", "sync": {"staleness": 2}, "data": {"format": "Digits"},
            "model": {"evaluation": {"everyIterations": 5}, "target": {"accuracyPercent": 90}},
            "sweep": {"matrix": {"paradigm": ["BSP", "SSP", "ASP"]}}}
    reached = {"BSP": 20.0, "SSP": 12.5, "ASP": None}  # ASP never got there
    trials = []
    for trial in sweeps.trials(spec):
        trials.append(sweeps.reached_at(sweeps.result_of(trial), reached[trial.spec.sync.paradigm.value]))
    made = assembly.build(results.SweepResult("rep", trials), tmp_path / "report")
    # Time to the target is what the sweep was run for: it leads the findings.
    assert made.findings[0] == (
        "Time to 90 % held-out accuracy: BSP 20.0 s; SSP 12.5 s; ASP never. Earliest in this run: SSP, but one run "
        "each cannot say how sure: a time to target moves from run to run; set sweep.repetitions (3 or more) to know.")
    untimed = assembly.build(results.SweepResult("rep", [sweeps.result_of(t) for t in sweeps.trials(
        {"architecture": "ParameterServer", "sweep": {"matrix": {"paradigm": ["BSP", "ASP"]}}})]), tmp_path / "none")
    assert not any(f.startswith("Time to 90") or "held-out" in f for f in untimed.findings)


def timed_repetitions(tmp_path, seconds: dict[str, list[float]]):
    spec = {"architecture": "ParameterServer", "sync": {"staleness": 2}, "data": {"format": "Digits"},
            "model": {"evaluation": {"everyIterations": 5}, "target": {"accuracyPercent": 90}},
            "sweep": {"repetitions": 3, "matrix": {"paradigm": list(seconds)}}}
    trials = []
    for trial in sweeps.trials(spec):
        trials.append(sweeps.reached_at(sweeps.result_of(trial),
                                        seconds[trial.spec.sync.paradigm.value][trial.repetition]))
    made = assembly.build(results.SweepResult("rep", trials), tmp_path / "report")
    return made.findings[0], json.loads((made.directory / "report.json").read_text())["findingRecords"][0]


def test_repetitions_name_the_first_to_the_target_only_when_their_intervals_part(tmp_path):
    text, record = timed_repetitions(tmp_path / "a", {"BSP": [20.0, 21.0, 19.5], "ASP": [12.0, 12.5, 11.8]})
    assert text.endswith(" First: ASP.") and record["distinguishable"] and record["basis"] == "repetitions"
    text, record = timed_repetitions(tmp_path / "b", {"BSP": [13.4, 24.0, 15.0], "ASP": [7.5, 19.9, 12.0]})
    assert text.endswith(" No clear first: ASP and BSP overlap; more repetitions would settle it.")
    assert record["distinguishable"] is False and record["subjects"] == ["ASP", "BSP"]


def test_a_bandwidth_sweep_draws_the_what_if_model_only_from_a_layer_profile(tmp_path):
    spec = {"architecture": "RingAllReduce", "sweep": {"matrix": {"bandwidth": ["100Mbit", "1Gbit"]}}}
    _, with_profile = built(tmp_path / "a", spec, lambda t: {"layers": sweeps.layers_document()})
    _, without = built(tmp_path / "b", spec)

    assert figure_ids(with_profile) == figure_ids(without) == ["comparison", "time", "network"]
    assert "what-if model's curve" in with_profile.figures[-1].alt
    assert "what-if model's curve" not in without.figures[-1].alt
    assert "no what-if curve: it needs a worker's layers.json" in without.figures[-1].caption
    [network] = [f for f in with_profile.findings if "scaling factor" in f]
    assert re.fullmatch(r"scaling factor 0\.67 at 0\.1 Gbit/s and 0\.67 at 1 Gbit/s \(measured\); "
                        r"the what-if model says 0\.\d\d and 0\.\d\d\.", network), network


def test_a_sweep_where_nothing_finished_says_so_and_draws_nothing(tmp_path):
    _, made = built(tmp_path, {"sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}},
                    lambda t: {"status": "FAILED", "message": "pod evicted"})
    assert made.figures == []
    assert made.findings == ["No finished trial has a summary (summary.json): nothing to compare (2 trials).",
                             "rep-0 FAILED: pod evicted.", "rep-1 FAILED: pod evicted."]


def test_the_note_drops_table_rows_to_fit_and_says_where_the_rest_is(tmp_path):
    _, made = built(tmp_path, {"sweep": {"repetitions": 3, "matrix": {
        "architecture": ["ParameterServer", "PeerToPeer", "RingAllReduce"]}}})
    full = made.note(where="report/report.html")
    assert full.count("| rep-") == 9 and full.endswith("Full report with figures: report/report.html\n")

    short = made.note(1500, "report/report.html")
    assert len(short) <= 1500
    assert "more rows in report.csv and report.html" in short
    assert short.count("| rep-") < 9 and "Fastest:" in short
    assert len(made.note(40)) <= 40


def noisy_result(the_trial, seconds: float, noise: float, rng) -> results.TrialResult:
    """A finished trial whose workers' iterations take `seconds` each, times a random factor within +-`noise`."""
    records = {}
    for slot in the_trial.worker_slots():
        rows, now = [], sweeps.START
        for step in range(the_trial.spec.model.iterations):
            took = seconds * (1 + rng.uniform(-noise, noise))
            now += took
            rows.append({"step": step, "role": "worker", "warmup": step < 2, "timestamp": now, "time/iteration": took,
                         "time/forward": took / 4, "time/backward": took / 2, "time/comm": took / 4, "time/wait": 0.0,
                         "loss": 1.0})
        records[slot.rank] = rows
    return results.TrialResult(the_trial, "FINISHED", None, summary.summarize(records, the_trial), records)


CLOSE_RACE = {"model": {"batchSize": 16, "iterations": 60, "warmupIterations": 2},
              "sweep": {"matrix": {"architecture": ["PeerToPeer", "RingAllReduce"]}}}


def test_a_close_race_run_three_times_never_names_winners_that_contradict(tmp_path):
    rng = random.Random(4)
    named = set()
    for run in range(3):
        trials = sweeps.trials(CLOSE_RACE)
        # The two setups are the same speed; each run's noise puts one or the other a few percent ahead.
        sweep = results.SweepResult("race", [noisy_result(t, 0.030, 0.3, rng) for t in trials])
        made = assembly.build(sweep, tmp_path / f"run-{run}")
        records = json.loads((tmp_path / f"run-{run}" / "report.json").read_text())["findingRecords"]
        [first] = [r for r in records if r["kind"] == "fastest"]
        assert first["basis"] == "within-run" and first["low"] < first["ratio"] < first["high"]
        if first["distinguishable"]:
            named.add(first["subjects"][0])
        else:
            assert made.findings[0].startswith("No clear fastest: ")
            assert "sweep.repetitions of 3 or more would" in made.findings[0]
    assert len(named) <= 1


def test_a_clear_win_within_single_runs_is_named_with_its_interval(tmp_path):
    rng = random.Random(5)
    trials = sweeps.trials(CLOSE_RACE)
    sweep = results.SweepResult("win", [noisy_result(t, 0.045 if t.index == 0 else 0.030, 0.3, rng) for t in trials])
    made = assembly.build(sweep, tmp_path)
    [first] = [r for r in json.loads((tmp_path / "report.json").read_text())["findingRecords"]
               if r["kind"] == "fastest"]
    assert (first["subjects"], first["distinguishable"], first["basis"]) == (["RingAllReduce", "PeerToPeer"], True,
                                                                             "within-run")
    assert first["low"] > 1 + findings.SINGLE_RUN_MARGIN
    assert made.findings[0].startswith("Fastest: rep-1 (RingAllReduce): ") \
        and "x the runner-up, rep-0 (PeerToPeer) (95 % CI" in made.findings[0]


def test_a_clear_win_within_single_runs_on_shared_cpus_is_a_lead_not_a_winner(tmp_path):
    rng = random.Random(5)
    trials = [noisy_result(t, 0.045 if t.index == 0 else 0.030, 0.3, rng) for t in sweeps.trials(CLOSE_RACE)]
    # 3 ranks on a 2-CPU laptop: contended timings drift between runs
    trials = [sweeps.with_usage(t, {str(rank): used("laptop", 2.0, 0.6) for rank in range(3)}) for t in trials]
    made = assembly.build(results.SweepResult("win", trials), tmp_path)
    [first] = [r for r in json.loads((tmp_path / "report.json").read_text())["findingRecords"]
               if r["kind"] == "fastest"]
    assert first["low"] > 1 + findings.SINGLE_RUN_MARGIN and first["distinguishable"] is False
    assert made.findings[0].startswith("No clear fastest: rep-1 (RingAllReduce) leads rep-0 (PeerToPeer) by ")
    assert "but their ranks shared CPUs (CPU contention, below)" in made.findings[0]
    assert made.findings[1].startswith("CPU contention: ")  # it qualifies the answer, after it


def test_a_sweep_that_did_not_run_every_trial_says_what_is_missing_first(tmp_path):
    trials = sweeps.trials({"sweep": {"matrix": {"architecture": ["ParameterServer", "PeerToPeer", "RingAllReduce"]}}})
    sweep = results.SweepResult("partial", [sweeps.result_of(t) for t in trials[:2]], tuple(t.name for t in trials))
    made = assembly.build(sweep, tmp_path)
    assert made.findings[0] == ("Incomplete: 1 of 3 trials never ran (rep-2). What follows compares only the trials "
                                "that finished.")
    assert made.findings[1].startswith("Fastest: rep-1 (PeerToPeer): ")


def test_the_time_figure_labels_its_mean_bars_with_the_mean_iteration(tmp_path):
    # Like with like: the bars are means of phases, so the label is the mean iteration, not the p50.
    trials = sweeps.trials({"sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}})
    sweep = results.SweepResult("means", [sweeps.result_of(t, jitter=0.004) for t in trials])
    assert [figures.mean_iteration_seconds(t) for t in sweep.trials] == pytest.approx([0.054, 0.034])
    made = assembly.build(sweep, tmp_path)
    [time] = [figure for figure in made.figures if figure.id == "time"]
    assert "the mean iteration time, the same statistic as the bars" in time.caption


def test_a_sweep_with_a_target_draws_held_out_quality_against_time_and_time_to_that_target(tmp_path):
    spec = {"architecture": "ParameterServer", "sync": {"staleness": 2}, "data": {"format": "Digits"},
            "model": {"evaluation": {"everyIterations": 5}, "target": {"accuracyPercent": 90}},
            "sweep": {"matrix": {"paradigm": ["BSP", "ASP"]}}}
    trials = []
    for trial in sweeps.trials(spec):
        found = sweeps.result_of(trial)
        for records in found.records.values():  # the evaluating worker measures every 5 iterations
            for record in records[4::5]:
                record[keys.EVAL_ACCURACY] = 0.5 + 0.02 * record["step"]
        trials.append(sweeps.reached_at(found, 0.6))
    made = assembly.build(results.SweepResult("acc", trials), tmp_path)
    ids = figure_ids(made)
    assert {"held-out", "time-to-target"} <= set(ids) and "time-to-loss" not in ids
    [held_out] = [f for f in made.figures if f.id == "held-out"]
    assert "the experiment's own target, 90 % held-out accuracy" in held_out.caption
    [timed] = [f for f in made.figures if f.id == "time-to-target"]
    assert "until 90 % held-out accuracy was first reached" in timed.alt


def test_a_lead_within_runs_smaller_than_the_drift_between_runs_is_a_lead_not_a_winner(tmp_path):
    rng = random.Random(6)
    trials = sweeps.trials(CLOSE_RACE)
    # 6 % apart: the within-run interval excludes parity, not the 10 % separate runs differ by.
    sweep = results.SweepResult("lead", [noisy_result(t, 0.0318 if t.index == 0 else 0.030, 0.05, rng)
                                         for t in trials])
    made = assembly.build(sweep, tmp_path)
    [first] = [r for r in json.loads((tmp_path / "report.json").read_text())["findingRecords"]
               if r["kind"] == "fastest"]
    assert 1.0 < first["low"] and first["high"] < 1 + findings.SINGLE_RUN_MARGIN and not first["distinguishable"]
    assert made.findings[0].startswith("No clear fastest: rep-1 (RingAllReduce) leads rep-0 (PeerToPeer) by 1.0")
    assert made.findings[0].endswith("not beyond the 10 % runs apart differ by: sweep.repetitions of 3 or more "
                                     "would confirm it.")


def used(host: str, cpus: float, busy: float, threads: int = 1) -> dict:
    return {keys.HOST: host, keys.CPUS: cpus, keys.THREADS: threads, keys.CPU_UTILIZATION: busy}


def test_ranks_with_more_threads_than_their_machines_cpus_are_said_to_be_contended_right_after_the_answer(tmp_path):
    crowded, spread = (sweeps.result_of(t) for t in sweeps.trials(
        {"workers": {"replicas": 3}, "sweep": {"matrix": {"architecture": ["PeerToPeer", "RingAllReduce"]}}}, "cpu"))
    # One laptop of 2 CPUs for 3 ranks; then a pod of 2 CPUs per rank, one with 2 threads: room for each.
    crowded = sweeps.with_usage(crowded, {str(rank): used("laptop", 2.0, busy)
                                          for rank, busy in enumerate((0.6, 0.7, 0.65))})
    spread = sweeps.with_usage(spread, {str(rank): used(f"pod-{rank}", 2.0, 1.9, threads=rank % 2 + 1)
                                        for rank in range(3)})

    made = assembly.build(results.SweepResult("cpu", [crowded, spread]), tmp_path / "report")

    assert made.findings[0].startswith("No clear fastest: ")
    assert made.findings[1] == ("CPU contention: cpu-0: 3 ranks ran 3 threads on 2 CPUs (demand 1.5x supply), 1.9 of "
                                "them busy on average (97 %). Their timings are contended: "
                                "they include waiting for a CPU, so compare them only "
                                "with trials that shared the CPUs alike, or give each rank CPUs of its own (fewer "
                                "ranks per machine, or a cluster).")

    def contention(*trials) -> list[str]:
        return [f.text for f in findings.findings(results.SweepResult("cpu", list(trials))) if f.kind == "contention"]

    assert contention(spread) == []
    # Threads count too: one rank of 4 threads on 2 CPUs waits for them as 4 ranks would.
    spread = sweeps.with_usage(spread, {"0": used("pod-0", 2.0, 1.96, threads=4)})
    assert contention(spread)[0].startswith("CPU contention: cpu-1: 1 rank ran 4 threads on 2 CPUs (demand 2.0x "
                                            "supply), 2.0 of them busy on average (98 %)")
    # Pods whose CPU limit is below a core, each rank alone on its machine: said once, by shape.
    spread = sweeps.with_usage(spread, {str(rank): used(f"pod-{rank}", 0.5, 0.49) for rank in range(3)})
    assert contention(spread)[0].startswith("CPU contention: cpu-1: 3 machines' ranks ran more threads than CPUs "
                                            "(1 thread on 0.5 CPUs (demand 2.0x supply), 0.5 of them busy on average "
                                            "(98 %)). ")


def test_more_threads_than_cpus_that_sat_mostly_idle_is_no_contention_and_leaves_the_answer_alone(tmp_path):
    # 3 ranks on 2 CPUs, 0.3 of them busy: the ranks waited for the network, not for a CPU. Nothing is said,
    # and a clear win within the runs is named as it would be on a machine of its own.
    rng = random.Random(5)
    trials = [noisy_result(t, 0.045 if t.index == 0 else 0.030, 0.3, rng) for t in sweeps.trials(CLOSE_RACE)]
    trials = [sweeps.with_usage(t, {str(rank): used("laptop", 2.0, 0.1) for rank in range(3)}) for t in trials]
    assert contention.crowded(trials[0].summary.usage) is None
    made = assembly.build(results.SweepResult("idle", trials), tmp_path)
    assert made.findings[0].startswith("Fastest: rep-1 (RingAllReduce): ")
    assert not any(f.startswith("CPU contention") for f in made.findings)


@pytest.mark.parametrize("usage, said", [
    ({"0": used("laptop", 4.0, 1.0), "1": used("laptop", 4.0, 1.0)}, None),  # demand 2 <= supply 4
    ({str(r): used("laptop", 2.0, 1.0) for r in range(2)}, None),  # demand 2 = supply 2: a CPU each
    ({str(r): used("laptop", 2.0, 0.2) for r in range(3)}, None),  # over, 30 % busy: idle CPUs, no waiting
    ({str(r): used("laptop", 2.0, 0.5) for r in range(3)}, (3, 2, 1.5, 75)),  # over and 75 % busy
    ({str(r): {**used("laptop", 2.0, 0.5), keys.CPU_UTILIZATION: None} for r in range(3)}, (3, 2, None, None)),
])
def test_contention_is_demand_against_supply_said_only_when_the_cpus_were_busy_enough_to_wait_for(usage, said):
    text = contention.crowded(usage)
    if said is None:
        assert text is None
        return
    threads, cpus, busy, share = said
    assert text.startswith(f"3 ranks ran {threads} threads on {cpus} CPUs (demand {threads / cpus:.1f}x supply), ")
    if busy is None:
        assert text.endswith("how busy unmeasured")
    else:
        assert text.endswith(f"{busy:.1f} of them busy on average ({share} %)")


def test_a_compression_series_gets_its_own_what_if_curve_priced_at_the_ratio_and_codec_it_measured(tmp_path):
    spec = {"architecture": "RingAllReduce",
            "sweep": {"matrix": {"bandwidth": ["10Mbit", "100Mbit"], "compression": ["None", "FP16"]}}}

    def measured(trial):  # FP16 trials sent half the bytes and spent 2 ms coding, outside t_batch's 20 ms
        found = sweeps.result_of(trial, layers=sweeps.layers_document())
        if trial.spec.compression.method.value == "FP16":
            for records in found.records.values():
                for r in records:
                    r.update({"bytes/uncompressed": 1000.0, "bytes/sent": 500.0, "time/codec": 0.002,
                              "time/iteration": r["time/iteration"] + 0.002})
        return found

    sweep = results.SweepResult("rep", [measured(t) for t in sweeps.trials(spec, "rep")])
    lines = {line.label: line.trials for line in scaling.bandwidth_lines(sweep)}
    assert len(lines) == 2
    plain, fp16 = (scaling.whatif_curve(trials, [1e7]) for trials in lines.values())
    # The ring's buckets: [layer3] (4 MB, ready at 2 ms), then [layer2..0] (12 MB, at 8 ms). At 10 Mbit/s, 2 workers:
    # 3.2 s then 9.6 s, ending 12.802 s into a 10 ms backward; FP16 halves both (6.402 s) and adds its 2 ms codec.
    assert (plain.method, fp16.method) == ("", "FP16")
    assert plain.points[0][1] == pytest.approx(0.020 / (0.020 + 12.792))
    assert fp16.points[0][1] == pytest.approx(0.020 / (0.020 + 6.392 + 0.002))
    # measured in the model's terms: t_batch 20 ms over the iteration (30 ms; FP16 32 ms)
    series = scaling.bandwidth_series(sweep)
    assert [e.mean for points in series.values() for _, e in points] == pytest.approx(
        [0.020 / 0.030] * 2 + [0.020 / 0.032] * 2)
    made = assembly.build(sweep, tmp_path / "report")
    [network] = [f for f in made.figures if f.id == "network"]
    assert "what-if model's curve of each series" in network.alt and (made.directory / network.path).is_file()


def test_a_clear_win_between_setups_placed_differently_is_never_named_without_saying_so(tmp_path):
    rng = random.Random(5)
    trials = [noisy_result(t, 0.045 if t.index == 0 else 0.030, 0.3, rng) for t in sweeps.trials(CLOSE_RACE)]
    # PeerToPeer spread over nodes, RingAllReduce on one node
    trials = [sweeps.placed(t, 3 if share else 1, share) for t, share in zip(trials, (1.0, 0.0))]
    made = assembly.build(results.SweepResult("win", trials), tmp_path)
    [fastest] = [f for f in made.findings if f.startswith("Fastest:")]
    assert "x the runner-up" in fastest  # still the measured verdict ...
    assert fastest.endswith("but they were placed differently: 0% of rep-1 (RingAllReduce)'s bytes crossed nodes and "
                            "100% of rep-0 (PeerToPeer)'s, so part of the gap is placement (a node's bridge against a "
                            "NIC), not the setup; set scheduling.placement (Spread or Pack) to compare them alike.")
    # ... and said once: the pair is not compared again below it.
    assert [f for f in made.findings if f.startswith("RingAllReduce: ")] == []


def test_setups_placed_alike_are_compared_without_a_placement_caveat(tmp_path):
    rng = random.Random(5)
    trials = [noisy_result(t, 0.045 if t.index == 0 else 0.030, 0.3, rng) for t in sweeps.trials(CLOSE_RACE)]
    trials = [sweeps.placed(t, 3, share) for t, share in zip(trials, (1.0, 0.97))]
    made = assembly.build(results.SweepResult("win", trials), tmp_path)
    assert not any("placed differently" in f for f in made.findings)


def legends_of_saved_figures(monkeypatch) -> dict[str, list[str]]:
    """Each figure's legend entries, read as assembly.build saves it (figures.save), by figure id."""
    legends: dict[str, list[str]] = {}
    save = figures.save

    def reading(figure, directory, figure_id):
        legends[figure_id] = [text.get_text() for axes in figure.axes if axes.get_legend()
                              for text in axes.get_legend().get_texts()]
        return save(figure, directory, figure_id)

    monkeypatch.setattr(figures, "save", reading)
    return legends


def test_the_time_figure_has_one_legend_entry_per_band_it_draws(tmp_path, monkeypatch):
    # No trial compresses: no codec band, so no "encoding & decoding" entry for a band nobody sees.
    legends = legends_of_saved_figures(monkeypatch)
    trials = sweeps.trials({"sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}})
    assembly.build(results.SweepResult("bands", [sweeps.result_of(t) for t in trials]), tmp_path)
    entries = legends["time"]
    assert len(entries) == len(set(entries)) and "encoding & decoding" not in entries
    assert {"compute", "communication"} <= set(entries)


@pytest.mark.parametrize("width", [4.0, 6.0, 12.0])
def test_a_long_figure_title_is_wrapped_to_fit_inside_the_figure(width):
    figure = figures.pyplot.figure(figsize=(width, 3.0))
    try:
        figures.suptitle(figure, "trial quickstart-2 (a RingAllReduce trial, the one with the fewest workers), rank 0 "
                                 "(the lowest worker rank)\nsecond line kept")
        figure.canvas.draw()
        box = figure._suptitle.get_window_extent(figure.canvas.get_renderer())
        assert 0 <= box.x0 and box.x1 <= figure.bbox.width  # not clipped on either side
        assert figure._suptitle.get_text().endswith("\nsecond line kept")
    finally:
        figures.pyplot.close(figure)


def test_the_fastest_and_its_runner_up_are_compared_once_when_the_sweep_varies_two_axes(tmp_path):
    # Ring at 4 workers first, the parameter server at 4 second: the per-axis comparison of the same two trials
    # ("RingAllReduce: ... of ParameterServer at workers=4") would say the fastest's sentence again.
    trials = [sweeps.result_of(t) for t in sweeps.trials({"sweep": {"matrix": {
        "architecture": ["ParameterServer", "RingAllReduce"], "workers": [2, 4]}}})]
    found = findings.findings(results.SweepResult("two-axes", trials))
    [fastest] = [f for f in found if f.kind == "fastest"]
    assert "RingAllReduce, workers=4" in fastest.text and "ParameterServer, workers=4" in fastest.text, fastest.text
    assert not [f.text for f in found if f.kind == "comparison" and f.compared == fastest.compared]
    assert any("of ParameterServer at workers=2" in f.text for f in found)  # the other context is still compared
