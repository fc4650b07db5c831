"""A trial's summary: throughput over all workers, percentiles, fractions and the straggler, after warm-up."""

import dataclasses
import json

import pytest

from ringleader.models import summary, targets
from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import keys


def make_trial(**spec) -> trial_.Trial:
    base = {"architecture": "ParameterServer", "workers": {"replicas": 2}, "model": {"batchSize": 10}}
    return trial_.Trial(experiment="e", name="e-0", index=0, spec=spec_.ExperimentSpec.model_validate({**base, **spec}))


def worker_record(step, warmup=False, data=0.0, forward=0.1, backward=0.2, comm=0.1, wait=0.0, update=0.1,
                  iteration=0.5, sent=1000.0, **extra):
    return {"step": step, "role": "worker", "warmup": warmup, "time/data": data, "time/forward": forward,
            "time/backward": backward, "time/comm": comm, "time/wait": wait, "time/update": update,
            "time/iteration": iteration, "bytes/sent": sent, **extra}


def document_of(records_by_rank, trial, usage_by_rank=None) -> dict:
    """summary.json's document of the typed summary."""
    return summary.summarize(records_by_rank, trial, usage_by_rank).to_document()


def two_workers():
    fast = [worker_record(0, warmup=True, iteration=9.0, loss=2.0)] + [
        worker_record(s, iteration=0.5, loss=1.0) for s in range(1, 5)]
    slow = [worker_record(0, warmup=True, iteration=9.0, loss=2.2)] + [
        worker_record(s, forward=0.3, backward=0.4, iteration=1.0, wait=0.1, loss=1.2) for s in range(1, 5)]
    server = [{"step": s, "role": "ps", "warmup": False, "server/aggregation": 0.01 * s, "server/queue_depth": s}
              for s in range(1, 3)]
    return {0: server, 1: fast, 2: slow}


def test_throughput_adds_every_workers_rate_and_ignores_warmup():
    result = document_of(two_workers(), make_trial())
    # 10 samples per 0.5 s plus 10 samples per 1.0 s; the 9-second warm-up iterations do not count.
    assert result["throughput"] == pytest.approx(20 + 10)
    assert result["measuredIterations"] == 8 and result["workers"] == 2


def test_the_typed_summary_is_the_document_in_parts_and_what_the_lowest_rank_adds_joins_it():
    typed = summary.summarize(two_workers(), make_trial())
    assert typed.timing.throughput == pytest.approx(30) and typed.timing.straggler_rank == 2
    assert typed.learning.server_queue_depth_mean == pytest.approx(1.5) and typed.traffic.compression == "None"
    document = typed.to_document()
    assert document[keys.STRAGGLER_RANK] == 2 and document[keys.PER_RANK] == typed.per_rank
    # None is written for what every summary has, and left out for what only some do.
    assert document[keys.WAIT_FRACTION] is not None and keys.COMPRESSION_RATIO not in document
    assert not {keys.LINK_PROBE, keys.PREDICTION, keys.LINK_INTERFACE} & set(document)
    added = dataclasses.replace(typed, link_interface="lo (shared)", link_probe={keys.PROBE_SHARED_HOST: True},
                                prediction={keys.PREDICTION_UNAVAILABLE: "one worker"}).to_document()
    assert added[keys.LINK_INTERFACE] == "lo (shared)" and added[keys.LINK_PROBE] == {keys.PROBE_SHARED_HOST: True}
    assert added[keys.PREDICTION] == {keys.PREDICTION_UNAVAILABLE: "one worker"}
    assert keys.LINK_BITS_PER_SECOND not in added


def test_percentiles_pool_all_workers_iterations():
    result = document_of(two_workers(), make_trial())
    assert result["iterationTimeP50Seconds"] == pytest.approx(0.75)
    assert result["iterationTimeP95Seconds"] == pytest.approx(1.0)
    assert summary.percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert summary.percentile([], 50) is None


def test_fractions_say_where_the_time_went_and_who_straggles():
    result = document_of(two_workers(), make_trial())
    total = 4 * 0.5 + 4 * 1.0
    assert result["computeFraction"] == pytest.approx((4 * 0.4 + 4 * 0.8) / total)
    assert result["commFraction"] == pytest.approx(8 * 0.1 / total)
    assert result["waitFraction"] == pytest.approx(4 * 0.1 / total)
    assert result["stragglerRank"] == 2
    assert result["perRank"]["2"]["computeSeconds"] == pytest.approx(0.8)
    assert result["bytesPerIteration"] == pytest.approx(1000.0)


def test_encoding_is_a_share_of_its_own_and_the_ratio_is_bytes_sent_over_uncompressed():
    records = {1: [worker_record(0, warmup=True, sent=4000.0, **{"bytes/uncompressed": 4000.0})] + [
        worker_record(s, backward=0.15, **{"time/codec": 0.05, "bytes/uncompressed": 2000.0}) for s in range(1, 5)]}
    result = document_of(records, make_trial(compression={"method": "FP16"}))
    assert result["compression"] == "FP16"
    assert result["compressionRatio"] == pytest.approx(0.5)  # the warm-up's uncompressed bytes do not count
    assert result["codecSeconds"] == pytest.approx(0.05) and result["codecFraction"] == pytest.approx(0.1)
    assert result["computeFraction"] == pytest.approx(0.35 / 0.5)  # data, forward, backward, update: not codec
    plain = document_of(two_workers(), make_trial())
    assert plain["compression"] == "None" and "compressionRatio" not in plain  # nothing said what it would be


def test_servers_staleness_and_losses_are_summarized():
    records = two_workers()
    records[1][2]["staleness"] = 3
    records[2][3]["staleness"] = 1
    result = document_of(records, make_trial())
    assert result["stalenessMean"] == pytest.approx(2.0) and result["stalenessMax"] == 3
    assert result["serverAggregationSeconds"] == pytest.approx(0.015)
    assert result["serverQueueDepthMean"] == pytest.approx(1.5)
    assert result["lossFirst"] == pytest.approx(2.1) and result["lossLast"] == pytest.approx(1.1)


def test_measured_link_rates_get_a_mean_and_p95_over_every_worker_iteration_after_warmup():
    records = two_workers()
    records[1][0].update({"link/tx_bytes_per_second": 1e9, "link/utilization": 0.9})  # warm-up: left out
    for rank, offset in ((1, 0), (2, 4)):
        for step in range(1, 5):
            tx = 1000.0 * (step + offset)  # 1000 .. 8000
            records[rank][step].update({"link/tx_bytes_per_second": tx, "link/rx_bytes_per_second": tx / 2,
                                        "link/utilization": tx / 10000})
    result = document_of(records, make_trial())
    assert result["linkTxBytesPerSecondMean"] == pytest.approx(4500.0)
    assert result["linkTxBytesPerSecondP95"] == pytest.approx(7000 + 0.65 * 1000)  # numpy's linear p95 of 1000..8000
    assert result["linkUtilizationMean"] == pytest.approx(0.45)
    assert result["linkUtilizationP95"] == pytest.approx(0.765)
    assert not any(key.startswith("link") for key in document_of(two_workers(), make_trial()))


def test_network_utilization_is_reported_against_the_emulated_bandwidth():
    result = document_of(two_workers(), make_trial(network={"bandwidth": "1Mbit"}))
    # 8 iterations x 1000 bytes in 6 s of worker time: 8000*8/6 bit/s over 1 Mbit/s.
    assert result["sentOverBandwidth"] == pytest.approx(8 * 1000 * 8 / 6.0 / 1e6)
    assert "sentOverBandwidth" not in document_of(two_workers(), make_trial())


def test_a_trial_that_only_warmed_up_still_has_a_summary():
    records = {0: [worker_record(0, warmup=True, iteration=2.0)]}
    assert document_of(records, make_trial(workers={"replicas": 1}))["throughput"] == pytest.approx(5.0)


def test_the_status_part_validates_against_the_api_and_the_whole_fits_a_termination_message():
    result = document_of(two_workers(), make_trial())
    status = summary.to_status(result)
    assert status.throughput == pytest.approx(30) and status.straggler_rank == 2
    assert status.wire()["iterationTimeP50Seconds"] == pytest.approx(0.75)
    big = {**result, "perRank": {str(r): result["perRank"]["1"] for r in range(200)}}
    compact = summary.compact(big)
    assert len(json.dumps(compact)) <= 4000 and compact["throughput"] == result["throughput"]
    assert summary.compact(result) == result


def test_a_rank_summary_means_each_metric_after_warmup():
    records = two_workers()[2]
    result = summary.rank_summary(records)
    assert result["iterations"] == 5 and result["measuredIterations"] == 4
    assert result["time/iteration"] == pytest.approx(1.0) and result["loss"] == pytest.approx(1.2)
    assert result["lossFirst"] == pytest.approx(2.2) and result["lossLast"] == pytest.approx(1.2)
    assert "step" not in result and "warmup" not in result


def test_timestamps_are_not_averaged_into_a_rank_summary():
    records = [worker_record(s, timestamp=1.7e9 + s) for s in range(3)]
    assert "timestamp" not in summary.rank_summary(records)


def test_the_status_summary_is_rounded_for_people_reading_kubectl_get():
    from ringleader.api import status

    shown = status.Summary(throughput=1805.5186803674728, iteration_time_p50_seconds=0.0123456789,
                           compute_fraction=0.123456)
    assert (shown.throughput, shown.iteration_time_p50_seconds, shown.compute_fraction) == (1805.5, 0.012346, 0.1235)


def test_time_to_target_runs_from_the_first_iteration_to_the_end_of_the_iteration_that_reached_it():
    def record(step, timestamp, **evaluated):
        return {"step": step, "role": "worker", "warmup": False, "timestamp": timestamp,
                keys.TIME_ITERATION: 1.0, keys.LOSS: 1.0, **evaluated}

    def evaluated(loss, accuracy, seconds):
        return {keys.EVAL_LOSS: loss, keys.EVAL_ACCURACY: accuracy, keys.EVAL_SECONDS: seconds}

    records = {
        # rank 1 evaluates after steps 1, 3 and 5; each evaluation takes 0.5 s and delays its record.
        1: [record(0, 101.0), record(1, 102.5, **evaluated(1.2, 0.40, 0.5)), record(2, 103.5),
            record(3, 105.0, **evaluated(0.6, 0.80, 0.5)), record(4, 106.0),
            record(5, 107.5, **evaluated(0.7, 0.75, 0.5))],
        2: [record(0, 100.5), record(1, 101.5)],  # started half a second before rank 1
    }
    by_accuracy = targets.summarize(records, spec_.Target(accuracyPercent=80))
    assert by_accuracy[keys.TARGET_ITERATIONS] == 4
    assert by_accuracy[keys.TARGET_SECONDS] == pytest.approx(105.0 - 0.5 - 99.5)
    assert by_accuracy[keys.EVALUATIONS] == 3
    assert by_accuracy[keys.EVAL_ACCURACY_LAST] == 0.75 and by_accuracy[keys.EVAL_ACCURACY_BEST] == 0.80
    assert by_accuracy[keys.EVAL_LOSS_LAST] == 0.7
    assert targets.summarize(records, spec_.Target(loss=1.2))[keys.TARGET_ITERATIONS] == 2
    never = targets.summarize(records, spec_.Target(accuracyPercent=95))
    assert keys.TARGET_SECONDS not in never and never[keys.EVALUATIONS] == 3
    assert targets.summarize({1: [record(0, 1.0)]}, spec_.Target(loss=1.0)) == {}


@pytest.mark.parametrize("network, enforced_by", [
    ({"bandwidth": "1Mbit"}, "Emulated"), ({"bandwidth": "1Mbit", "enforcement": "Network"}, "Network"), ({}, "None")])
def test_the_summary_says_what_applied_the_cap(network, enforced_by):
    assert document_of(two_workers(), make_trial(network=network))["bandwidthEnforcement"] == enforced_by


def test_each_ranks_usage_is_carried_by_rank_and_left_out_first_of_a_termination_message():
    used = {rank: {keys.HOST: "laptop", keys.CPUS: 2.0, keys.THREADS: 1, keys.CPU_UTILIZATION: 0.6,
                   keys.PEAK_RSS_BYTES: 3e8} for rank in range(1, 201)}
    result = document_of(two_workers(), make_trial(), used)
    assert result[keys.USAGE]["1"] == used[1] and len(result[keys.USAGE]) == 200
    assert keys.USAGE not in document_of(two_workers(), make_trial())
    compact = summary.compact(result)
    assert keys.USAGE not in compact and compact["throughput"] == result["throughput"]


def test_every_reader_gets_the_typed_summary_back_from_its_document_and_the_document_back_from_it():
    trial = make_trial(data={"format": "Digits"},
                       model={"batchSize": 10, "evaluation": {"everyIterations": 1}, "target": {"accuracyPercent": 80}})
    records = two_workers()
    records[1] = [{**r, keys.EVAL_LOSS: 0.5, keys.EVAL_ACCURACY: 0.9, keys.TIMESTAMP: 100.0 + r["step"]}
                  for r in records[1]]
    used = {rank: {keys.HOST: f"pod-{rank}", keys.CPUS: 1.0, keys.NODE: f"node-{rank % 2}"} for rank in range(3)}
    typed = dataclasses.replace(summary.summarize(records, trial, used), link_probe={keys.PROBE_SHARED_HOST: False},
                                prediction={keys.PREDICTION_UNAVAILABLE: "one worker"})
    assert typed.evaluation.evaluations == 5 and typed.evaluation.target_iterations == 1
    assert typed.placement.node_count == 2 and typed.usage is not None
    document = json.loads(json.dumps(typed.to_document()))  # as summary.json holds it
    read = summary.TrialSummary.from_document(document)
    assert read == typed and list(read.to_document()) == list(document)
    assert read.number(keys.THROUGHPUT) == pytest.approx(30) and read.number(keys.COMPRESSION) is None


def test_a_document_of_another_version_or_a_termination_message_is_read_with_what_it_has():
    document = {keys.THROUGHPUT: 12.5, keys.P50: 0.08, "retiredKey": [1, 2]}
    read = summary.TrialSummary.from_document(document)
    assert read.timing.throughput == 12.5 and read.timing.iteration_time_p50_seconds == 0.08
    assert read.per_rank is None and read.placement == summary.RecordedPlacement()
    assert read.evaluation == summary.HeldOutEvaluation()
    assert read.extras == {"retiredKey": [1, 2]}  # kept as found: the report's JSON still has it
    assert read.to_document()["retiredKey"] == [1, 2]
    full = document_of(two_workers(), make_trial())
    compacted = summary.TrialSummary.from_document(summary.compact(full, limit=len(json.dumps(full)) // 2))
    assert compacted.timing.throughput == full[keys.THROUGHPUT] and compacted.per_rank is None
    assert summary.read(None) is None and summary.read([1]) is None and summary.read(full).timing.workers == 2
