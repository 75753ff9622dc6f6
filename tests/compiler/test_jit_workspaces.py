"""compiler.workspaces in our own processes: a JIT-compiled kernel, and a model's forward pass, take
their large intermediates from the cache, which keeps a freed block for the next call of its size;
the library the cache is built into is compiled once and found again."""

import numpy as np
import torch
from torch import nn

from compiler import build, frontend, graph, te
from compiler.runtime import load_runtime, workspace_cache
from compiler.workspaces import KEPT, cached_library


def _kept(nbytes: int) -> int:
    """Bytes the cache keeps in blocks of exactly `nbytes`."""
    load_runtime()
    cache = workspace_cache()
    assert cache is not None, "the test machines have a C compiler"
    return int(getattr(cache, KEPT)(nbytes))


def test_a_kernels_intermediate_is_kept_for_its_next_call_and_computes():
    n = 300_017  # 1.2 MB of float32, a size no other test asks for: heap memory, not the stack
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 3.0, name="B")
    c = te.compute((n,), lambda i: b[n - 1 - i] + 1.0, name="C")
    kernel = build(te.create_prim_func([a, c]), listings=False)
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    y = np.empty_like(x)
    kernel(x, y)
    np.testing.assert_allclose(y, x[::-1] * 3.0 + 1.0, rtol=1e-6)
    assert _kept(4 * n) == 4 * n
    kernel(x, y)
    assert _kept(4 * n) == 4 * n  # the same block again, not a second one


def test_a_models_forward_pass_takes_its_kernels_workspaces_from_the_cache():
    """The forward pass links the kernels' objects again, into a library of its own."""
    torch.manual_seed(0)
    conv = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()).eval()
    x = torch.randn(1, 16, 97, 93)
    model = graph.build(graph.optimize(frontend.from_torch(conv, (x,))))
    padded = 16 * 99 * 95 * 4  # the padded image, made by the conv's kernel on each call
    assert _kept(padded) == 0
    y = model(x.numpy())[0]
    np.testing.assert_allclose(y, conv(x).detach().numpy(), rtol=1e-4, atol=1e-4)
    assert _kept(padded) == padded


def test_the_library_is_compiled_once(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = cached_library()
    assert first is not None and first.parent == tmp_path / "tensor-tuner"
    stamp = first.stat().st_mtime_ns
    assert cached_library() == first and first.stat().st_mtime_ns == stamp
