"""Every script in examples/ runs to completion (each checks its own results against numpy)."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script):
    result = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_there_are_examples():
    assert {p.stem for p in EXAMPLES} >= {
        "mm_relu_schedule",
        "mlc_extern_call",
        "mlc_random_search",
        "mlc_tune_tir",
        "mlc_tvmscript",
        "scan_cumsum",
        "scan_multi_stage",
        "scan_two_state",
    }
