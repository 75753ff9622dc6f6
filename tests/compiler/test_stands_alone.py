"""The compiler stands alone (dependencies point one way: tuner -> runner -> compiler): importing it,
building a small model with the default schedules and calling it loads no tuner or runner module."""

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
import numpy as np
import compiler
from compiler import graph
b = graph.GraphBuilder()
x = b.input("x", (4, 8), "float32")
w = b.constant("w", np.ones((8, 3), "float32"))
(y,) = graph.build(b.module([b.call("relu", [b.call("matmul", [x, w])])]))(np.ones((4, 8), "float32"))
assert (y == 8).all(), y
print(sorted({m.split(".")[0] for m in sys.modules} & {"tuner", "runner"}))
"""


def test_building_a_model_loads_no_tuner_or_runner_module() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_no_compiler_module_imports_the_tuner_or_the_runner() -> None:
    """Not even inside a function, where an import test would not see it."""
    root = Path(__file__).resolve().parents[2] / "compiler"
    upward = [
        f"{path.relative_to(root.parent)}:{n}: {line.strip()}"
        for path in root.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if line.strip().startswith(("from tuner", "import tuner", "from runner", "import runner"))
    ]
    assert upward == []
