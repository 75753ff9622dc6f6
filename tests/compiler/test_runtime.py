"""compiler.runtime's memory for what a compiled model keeps: 2 MB aligned regions of their own,
the weights copied into one of them unchanged."""

import numpy as np
import pytest

from compiler import graph
from compiler.graph import GraphBuilder
from compiler.runtime import HUGE_PAGE_BYTES, huge_page_bytes


@pytest.mark.parametrize("nbytes", [1, 100_000, 3 * HUGE_PAGE_BYTES + 5])
def test_a_region_is_zeroed_writable_and_starts_at_a_huge_page(nbytes: int) -> None:
    region = huge_page_bytes(nbytes)
    assert region.nbytes == nbytes and region.ctypes.data % HUGE_PAGE_BYTES == 0
    assert not region.any()
    region[:] = 7
    assert (region == 7).all()


def test_a_models_weights_sit_in_one_region_in_order_and_unchanged() -> None:
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (3, 5), "float32")
    w1, w2 = rng.standard_normal((5, 7)).astype("float32"), rng.standard_normal((7, 2)).astype("float32")
    h = b.call("relu", [b.call("matmul", [x, b.constant("w1", w1)])])
    model = graph.build(b.module([b.call("matmul", [h, b.constant("w2", w2)])]))
    weights = model._constants
    addresses = [w.ctypes.data for w in weights]
    assert addresses[0] % HUGE_PAGE_BYTES == 0 and addresses == sorted(addresses)
    assert all(a % 64 == 0 for a in addresses) and addresses[-1] - addresses[0] < HUGE_PAGE_BYTES
    for kept, original in zip(weights, model.forward_plan.constants):
        np.testing.assert_array_equal(kept, original.data)
    assert model._arena.ctypes.data % HUGE_PAGE_BYTES == 0
    xs = rng.standard_normal((3, 5)).astype("float32")
    np.testing.assert_allclose(model(xs)[0], np.maximum(xs @ w1, 0) @ w2, rtol=1e-5, atol=1e-5)


def test_a_region_the_memory_limit_refuses_is_a_memory_error() -> None:
    """As numpy's allocations: the measuring process reports it as "out of memory"."""
    with pytest.raises(MemoryError):
        huge_page_bytes(1 << 62)
