"""bench.default_ab: the traces one version dumps replay in another, and only changed schedules
are built and timed."""

import json
import random
import re

import pytest

from bench import default_ab
from bench.peer_suite import SHAPES
from compiler import Trace
from compiler.workloads import workload_from_spec
from tuner.search.mutators import mutate_tile_size


def test_a_changed_default_is_timed_against_the_old_one_and_an_unchanged_one_is_not(tmp_path, capsys):
    old = tmp_path / "old.json"
    default_ab.main(["dump", str(old), "--shapes", "mlp.fc1", "odd.primes"])
    traces = json.loads(old.read_text())
    trace = Trace.from_json(traces["mlp.fc1"])
    decisions = mutate_tile_size(trace, random.Random(0))
    assert decisions is not None
    func = workload_from_spec(SHAPES["mlp.fc1"].spec).func
    traces["mlp.fc1"] = trace.apply(func, decisions).trace.to_json()
    old.write_text(json.dumps(traces))

    default_ab.main(["compare", str(old), "--shapes", "mlp.fc1", "odd.primes", "--rounds", "2"])
    out = capsys.readouterr().out
    assert re.search(r"\| mlp\.fc1 \| [\d.]+ \| [\d.]+ \| \d+ -> \d+ \| \*\*[\d.]+\*\*", out)
    assert "| odd.primes | same schedule |" in out


def test_an_unknown_shape_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(SystemExit):
        default_ab.main(["dump", str(tmp_path / "x.json"), "--shapes", "no.such.shape"])
    assert not (tmp_path / "x.json").exists()
