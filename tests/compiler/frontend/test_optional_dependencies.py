"""The core works without the models extra: without torch, onnx and onnxruntime, the compiler, the
graph level and the tuner import, and each frontend says which package it needs."""

import subprocess
import sys

SCRIPT = """
import sys
for name in ("torch", "onnx", "onnxruntime"):
    sys.modules[name] = None  # importing it now raises ImportError, as if it were not installed
import numpy as np
import tuner.cli
from compiler import frontend, graph
b = graph.GraphBuilder()
x = b.input("x", (2, 3), "float32")
(y,) = graph.build(graph.optimize(b.module([b.call("relu", [x])])))(-np.ones((2, 3), "float32"))
assert not y.any()
loaders = {"onnx": lambda: frontend.from_onnx(b"x"), "torch": lambda: frontend.from_torch(None, ())}
for package, load in loaders.items():
    try:
        load()
    except ImportError as e:
        assert package in str(e) and "models" in str(e), e
    else:
        raise AssertionError(package)
print("ok")
"""


def test_core_works_without_the_models_extra() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
