"""Where numbers were taken, in one line: a machine's for `ringleader run`, a cluster's for the operator."""

from __future__ import annotations

import platform

from ringleader.contract import keys, provenance
from ringleader.tracking import schema

LOCAL = {"host": "vm", "cpus": 2, "cpuQuota": 2.0, "loadBefore": 4.13, "ringleader": "0.1.0", "torch": "2.9.1",
         "python": "3.11.7", "command": "ringleader run quickstart.yaml", "fileSha256": "0123456789abcdef",
         "loadAfter": 3.81}


def rank(node: str, cpus: float, load: float, torch: str = "2.9.1") -> dict:
    return {keys.HOST: f"pod-on-{node}", keys.NODE: node, keys.CPUS: cpus, keys.THREADS: 1, keys.LOAD_PER_CPU: load,
            keys.RINGLEADER: "0.1.0", keys.TORCH: torch, keys.PYTHON: "3.11.7"}


def test_a_machines_line_names_host_cpus_load_before_and_after_versions_command_and_file():
    assert provenance.words(LOCAL) == (
        "vm: 2 CPUs (quota 2.0), load 4.13 before, 3.81 after; ringleader 0.1.0, torch 2.9.1, Python 3.11.7; "
        "`ringleader run quickstart.yaml`, file sha256 0123456789abcdef")


def test_the_operator_knows_the_resource_its_generation_the_specs_hash_the_image_and_its_own_versions():
    spec = {"architecture": "RingAllReduce", "workers": {"replicas": 2}}
    taken = provenance.at_operator("team-a", "ring", 3, spec, "ghcr.io/example/ringleader:0.1.0")

    assert taken["command"] == "DistributedTrainingExperiment team-a/ring, generation 3"
    assert taken["image"] == "ghcr.io/example/ringleader:0.1.0"
    assert taken["operatorPython"] == platform.python_version() and taken["operatorRingleader"]
    assert "loadBefore" not in taken and "host" not in taken  # no one machine to speak of
    # The same spec, however its keys are ordered, has the same hash; another spec another; no value is told.
    assert taken["specSha256"] == provenance.spec_hash({"workers": {"replicas": 2}, "architecture": "RingAllReduce"})
    assert len(taken["specSha256"]) == 16
    assert taken["specSha256"] != provenance.spec_hash({**spec, "workers": {"replicas": 4}})
    assert "RingAllReduce" not in str(taken)


def test_credentials_in_an_image_reference_are_not_kept():
    taken = provenance.at_operator("default", "x", None, {}, "https://user:s3cret@registry.example/img:1")
    assert "s3cret" not in taken["image"] and taken["command"] == "DistributedTrainingExperiment default/x"


def test_the_pods_part_is_what_their_ranks_recorded_as_ranges_over_ranks_and_nodes():
    usages = [{"0": rank("node-b", 1.0, 0.31), "1": rank("node-a", 2.0, 0.05)},
              {"0": rank("node-a", 2.0, 0.12, torch="2.8.0")},
              {}]  # a trial whose ranks recorded no usage

    assert provenance.of_pods(usages) == {"nodes": "node-a, node-b", "cpuQuota": "1-2",
                                             "loadPerCpuAtEnd": "0.05-0.31", "ringleader": "0.1.0",
                                             "torch": "2.8.0 or 2.9.1", "python": "3.11.7"}
    assert provenance.of_pods([{}]) == {}


def test_a_clusters_line_names_nodes_pods_load_at_the_end_the_pods_and_the_operators_versions_and_the_resource():
    taken = {**provenance.at_operator("default", "ring", 1, {}, "ringleader:e2e"),
             "operatorRingleader": "0.1.0", "operatorPython": "3.12.1", "specSha256": "fedcba9876543210",
             **provenance.of_pods([{"0": rank("kind-worker", 1.0, 0.05), "1": rank("kind-worker2", 1.0, 0.4)}])}
    # As the report reads it back from the sweep run's tags: every value a string.
    read = schema.provenance_of(schema.provenance_tags(taken))

    assert provenance.words(read) == (
        "2 nodes (kind-worker, kind-worker2): pods with CPU quota 1, load per CPU 0.05-0.4 at the ranks' end; "
        "ringleader 0.1.0, torch 2.9.1, Python 3.11.7 in image ringleader:e2e; operator ringleader 0.1.0, "
        "Python 3.12.1; `DistributedTrainingExperiment default/ring, generation 1`, spec sha256 fedcba9876543210")
    assert "before" not in provenance.words(read) and "after" not in provenance.words(read)


def test_a_cluster_whose_ranks_recorded_nothing_says_so_rather_than_inventing_a_machine():
    taken = {**provenance.at_operator("default", "ring", 1, {}, "ringleader:e2e"), "operatorRingleader": "0.1.0",
             "operatorPython": "3.12.1", "specSha256": "fedcba9876543210"}

    assert provenance.words(taken) == (
        "the cluster: the ranks recorded no usage; image ringleader:e2e; operator ringleader 0.1.0, Python 3.12.1; "
        "`DistributedTrainingExperiment default/ring, generation 1`, spec sha256 fedcba9876543210")


def test_many_nodes_are_counted_and_the_first_named():
    usage = {str(i): rank(f"n{i:02d}", 1.0, 0.1) for i in range(9)}
    taken = {**provenance.at_operator("default", "big", 1, {}, "img"), **provenance.of_pods([usage])}
    assert provenance.words(taken).startswith("9 nodes (n00, n01, n02, n03, n04, n05, ...): pods with CPU quota 1")
    assert taken["nodes"].endswith("n08")  # the tag keeps them all


def test_a_resumed_sessions_line_names_each_run_that_made_it_the_first_and_every_resume():
    first = LOCAL
    second = provenance.resumed(first,
                                {**LOCAL, "command": "ringleader run --resume ringleader-runs/q", "loadBefore": 1.5})
    third = provenance.resumed(second,
                               {**LOCAL, "command": "ringleader run --resume ringleader-runs/q", "loadBefore": 0.5})
    first_words = provenance.words(first)
    second_words = provenance.words({k: v for k, v in second.items() if k != provenance.EARLIER_RUNS})
    assert third[provenance.EARLIER_RUNS] == [first_words, second_words]
    line = provenance.words(third)
    assert line.startswith("vm: 2 CPUs (quota 2.0), load 0.5 before, 3.81 after; ")
    assert line.endswith(f" (run 3, a resume; before it, run 1: {first_words}; run 2: {second_words})")
    # The sweep run's tags hold the same, read back into the same line.
    assert provenance.words(schema.provenance_of(schema.provenance_tags(third))) == line
    assert provenance.resumed({}, LOCAL) == LOCAL  # a session that recorded none: the resume's own
