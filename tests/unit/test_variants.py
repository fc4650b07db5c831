"""Every architecture, paradigm and compression method has an entry in every table that treats variants apart.

api/variants.py says what each variant is; each layer keeps its implementations in one table keyed by the same
enum. A member added to an enum without its entries fails here, naming each table that lacks it, instead of
falling through an if-chain to another variant's branch.
"""

from __future__ import annotations

import enum

import pytest

from ringleader.models import architectures, collectives, profile
from ringleader.api import spec, variants
from ringleader.runtime import compression, main, paradigms
from ringleader.topology import rendering

TABLES: dict[str, tuple[type[enum.Enum], dict]] = {
    "api/variants.py ARCHITECTURES": (variants.Architecture, variants.ARCHITECTURES),
    "api/variants.py PARADIGMS": (variants.Paradigm, variants.PARADIGMS),
    "api/variants.py CODECS": (variants.CompressionMethod, variants.CODECS),
    "runtime/main.py SYNCHRONIZERS": (variants.Architecture, main.SYNCHRONIZERS),
    "runtime/paradigms.py GATES": (variants.Paradigm, paradigms.GATES),
    "runtime/compression.py BUCKET_CODECS": (variants.CompressionMethod, compression.BUCKET_CODECS),
    "topology/rendering.py TEMPLATES": (variants.Architecture, rendering.TEMPLATES),
    "models/architectures.py ARCHITECTURE_MODELS": (variants.Architecture, architectures.ARCHITECTURE_MODELS),
    "models/collectives.py ROUNDS": (variants.CompressionMethod, collectives.ROUNDS),
    "models/profile.py CRITICAL": (variants.Waits, profile.CRITICAL),
}


def gaps(tables: dict[str, tuple[type[enum.Enum], dict]]) -> list[str]:
    """'<table> has no entry for <Enum>.<MEMBER>' for every member a table lacks (members compared by value)."""
    return [f"{name} has no entry for {members.__name__}.{member.name}"
            for name, (members, table) in tables.items()
            for member in members if member.value not in {getattr(key, "value", key) for key in table}]


def extended(members: type[enum.Enum], name: str, value: str) -> type[enum.Enum]:
    """A copy of a str enum with one member more, as adding a variant to api/variants.py would make it."""
    return enum.Enum(members.__name__, {**{m.name: m.value for m in members}, name: value},
                     type=str)  # type: ignore[return-value]


def test_every_member_of_every_variant_enum_has_an_entry_in_every_table():
    assert gaps(TABLES) == []


@pytest.mark.parametrize("members", [variants.Architecture, variants.Paradigm, variants.CompressionMethod,
                                     variants.Waits])
def test_a_member_without_its_entries_fails_naming_every_table_that_lacks_it(members):
    probe = extended(members, "PROBE", "Probe")
    tables = {name: (probe if enum_ is members else enum_, table) for name, (enum_, table) in TABLES.items()}
    expected = [f"{name} has no entry for {members.__name__}.PROBE"
                for name, (enum_, _) in TABLES.items() if enum_ is members]
    assert gaps(tables) == expected
    assert expected  # every enum has at least one table


def test_the_spec_uses_the_tables_enums():
    assert variants.Architecture is variants.Architecture
    assert variants.Paradigm is variants.Paradigm
    assert variants.CompressionMethod is variants.CompressionMethod
    assert spec.ExperimentSpec.model_fields["architecture"].annotation is variants.Architecture


def test_the_fields_a_variant_reads_are_fields_of_the_spec():
    sync_fields = {field.alias for field in spec.SyncSpec.model_fields.values()}
    compression_fields = {field.alias for field in spec.Compression.model_fields.values()}
    assert set(variants.STALENESS_FIELDS) == sync_fields - {"paradigm"}
    assert set(variants.COMPRESSION_FIELDS) == compression_fields - {"method"}
    for traits in variants.PARADIGMS.values():
        assert set(traits.staleness_fields) <= set(variants.STALENESS_FIELDS)
    for codec in variants.CODECS.values():
        assert set(codec.parameters) <= set(variants.COMPRESSION_FIELDS)


def test_every_architecture_has_workers_a_backend_per_device_and_a_reason_for_each_paradigm_it_refuses():
    for architecture, traits in variants.ARCHITECTURES.items():
        assert traits.roles[-1] == "worker", architecture
        assert set(traits.backends) == {variants.CPU, variants.CUDA}, architecture
        assert traits.paradigms, architecture
        assert bool(traits.paradigms_why) == traits.collective, architecture
        assert traits.cost_model == architectures.ARCHITECTURE_MODELS[architecture].prediction.name


def test_a_bucketed_architecture_has_a_replay_of_its_buckets_for_the_overlap_figure():
    for architecture, traits in variants.ARCHITECTURES.items():
        assert traits.buckets == (architectures.ARCHITECTURE_MODELS[architecture].prediction.replay
                                  is not None), architecture


def test_what_the_tables_say_today():
    A = variants.Architecture
    ring = variants.ARCHITECTURES[A.RING_ALL_REDUCE]
    assert variants.COLLECTIVES == (A.RING_ALL_REDUCE, A.HIERARCHICAL_RING_ALL_REDUCE,
                                    A.PARAMETER_SERVER_POD_AGGREGATION)
    assert ring.paradigms == (variants.Paradigm.BSP,) and ring.nccl
    assert ring.backend("cuda") == "cpu:gloo,cuda:nccl" and ring.backend("cpu") == "gloo"
    assert variants.SERVER_ARCHITECTURES == (A.PARAMETER_SERVER, A.PARAMETER_SERVER_POD_AGGREGATION)
    assert variants.STALE_PARADIGMS == (variants.Paradigm.SSP, variants.Paradigm.DSSP)
    assert variants.RESTRICTED_METHODS == (variants.CompressionMethod.POWER_SGD, variants.CompressionMethod.TOP_K)
    assert [variants.label(a, 4) for a in A] == ["4ps", "p2p", "ring", "hring", "4psagg"]
    assert [a for a, t in variants.ARCHITECTURES.items() if t.buckets] == [A.RING_ALL_REDUCE,
                                                                          A.HIERARCHICAL_RING_ALL_REDUCE]
    assert [a for a, t in variants.ARCHITECTURES.items() if t.pod_pushes] == [A.PARAMETER_SERVER_POD_AGGREGATION]
