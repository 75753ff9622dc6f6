"""`python -m bench NAME ...` checks every argument before it runs anything: an option given to the
runner instead of to one benchmark's module used to be ignored until a long run had ended."""

import re

import pytest

from bench.__main__ import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["model_tuning", "--budgets", "0"], "`python -m bench.<name> --budgets ...`"),
        (["model_tuning", "no_such_benchmark"], "unknown benchmark 'no_such_benchmark'"),
    ],
)
def test_bad_arguments_stop_before_any_benchmark_runs(argv, message, capsys) -> None:
    with pytest.raises(SystemExit, match=re.escape(message)):
        main(argv)
    assert "==" not in capsys.readouterr().out
