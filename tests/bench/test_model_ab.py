"""bench.model_ab: a model exported by two builds loads side by side, its outputs are checked
against the first library's before anything is timed."""

import re

import pytest

from bench import model_ab


def test_two_exports_of_a_model_are_checked_and_timed_side_by_side(tmp_path, capsys):
    paths = [tmp_path / "a.so", tmp_path / "b.so"]
    for path in paths:
        model_ab.main(["export", "mlp", str(path)])
    model_ab.main(["compare", "mlp", *map(str, paths), "--rounds", "1"])
    out = capsys.readouterr().out
    assert re.search(r"b\.so: median [\d.]+ ms, fastest [\d.]+ ms, [\d.]+x the first's speed", out)


@pytest.mark.parametrize("argv", [["export", "mlp", "a.so", "b.so"], ["compare", "mlp", "a.so"]])
def test_a_wrong_number_of_libraries_is_refused_before_anything_runs(argv, tmp_path):
    with pytest.raises(SystemExit):
        model_ab.main(argv)
    assert not (tmp_path / "a.so").exists()
