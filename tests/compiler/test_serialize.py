"""The PrimFunc's data form: it round-trips every kind of node (scheduled and lowered programs too),
its hash ignores variable names and the printer, and malformed data is refused naming where."""

import copy
import json
from dataclasses import replace

import pytest
from helpers import conv2d, matmul, mm_relu, softmax

from compiler import Schedule
from compiler.lower import lower
from compiler.serialize import SerializeError, canonical_text, from_json, structural_hash, to_json
from compiler.workloads import workload_from_spec

# The structural hash of matmul 4x4x4 in format version 1. It may change only with VERSION (and a
# migration of the database's workload hashes): a test that fails here caught an accidental change.
MATMUL_4_HASH = "0b154f37d89a51e0bb529aabf6436171430e78a4143435c37fcc1189f3a4ccad"


def scheduled(func):
    sch = Schedule(func, seed=0)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i, j0, k, j1)
    sch.vectorize(j1)
    sch.parallel(i)
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    return sch.func


@pytest.mark.parametrize("make", [matmul, conv2d, softmax, lambda: mm_relu(16, 8, 12)])
def test_round_trip(make):
    func = make().func
    for f in (func, lower(func)):
        assert from_json(to_json(f)) == f
        assert canonical_text(from_json(to_json(f))) == canonical_text(f)


def test_round_trip_of_a_scheduled_program():
    func = scheduled(matmul().func)
    assert from_json(to_json(func)) == func
    assert from_json(to_json(lower(func))) == lower(func)


def test_hash_is_pinned_and_ignores_names_and_the_printer():
    func = workload_from_spec({"op": "matmul", "params": {"M": 4, "N": 4, "K": 4}}).func
    assert structural_hash(func) == MATMUL_4_HASH
    assert structural_hash(replace(func, name="other")) == MATMUL_4_HASH


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(version=2), "version 1"),
        (lambda d: d["body"].__setitem__(0, "loop"), "unknown statement kind 'loop'"),
        (lambda d: d["params"][0].update(dtype="float8_e4m3fn"), r"params\[0\]\.dtype: must be one of"),
        (lambda d: d["params"][0].update(shape=[0, 4]), r"params\[0\]\.shape\[0\]: must be >= 1"),
        (lambda d: d["params"].append(dict(d["params"][0])), "declared twice"),
    ],
)
def test_malformed_data_is_refused_naming_where(edit, message):
    data = copy.deepcopy(
        to_json(workload_from_spec({"op": "matmul", "params": {"M": 4, "N": 4, "K": 4}}).func)
    )
    edit(data)
    with pytest.raises(SerializeError, match=message):
        from_json(data)


def test_ill_typed_nodes_are_refused_naming_where():
    data = to_json(workload_from_spec({"op": "matmul", "params": {"M": 4, "N": 4, "K": 4}}).func)
    text = canonical_text(from_json(data)).replace('["mul",', '["floordiv",', 1)
    with pytest.raises(SerializeError, match="floordiv takes int8 or int16 or int32 or int64 or uint8"):
        from_json(json.loads(text))
    with pytest.raises(SerializeError, match="unknown buffer 'Z'"):
        from_json(json.loads(text.replace('"load","A"', '"load","Z"', 1)))
