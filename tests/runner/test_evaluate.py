"""evaluate(): repeats, number growth to min_repeat_ms, and the native loop's low per-call overhead."""

import importlib
import time

import numpy as np
import pytest

from compiler import build, te
from runner.evaluate import evaluate

# The module itself: the package's `runner.evaluate` attribute is the function.
evaluate_module = importlib.import_module("runner.evaluate")


def _axpy(n):
    X = te.placeholder((n,), name="X")
    Y = te.compute((n,), lambda i: X[i] * 2.0, name="Y")
    return build(te.create_prim_func([X, Y]), listings=False)


def test_returns_one_time_per_repeat_and_computes():
    kernel = _axpy(1000)
    x = np.ones(1000, np.float32)
    y = np.zeros(1000, np.float32)
    secs = evaluate(kernel, [x, y], number=3, repeat=4)
    assert len(secs) == 4 and all(0 < s < 0.1 for s in secs)
    np.testing.assert_array_equal(y, 2 * x)


def test_number_grows_until_a_repeat_lasts_min_repeat_ms():
    kernel = _axpy(64)
    args = [np.ones(64, np.float32), np.zeros(64, np.float32)]
    start = time.perf_counter()
    secs = evaluate(kernel, args, repeat=3, min_repeat_ms=20)
    elapsed = time.perf_counter() - start
    assert elapsed >= 3 * 0.02 * 0.9
    assert max(secs) < 1e-4  # a tiny kernel: each call is far below a repeat's length


def test_native_repeat_loop_overhead_is_small_against_python_calls():
    """A 64-element kernel takes tens of ns; one Python call costs ~1 us. Timed in the native loop,
    the per-call time must stay far below one Python call (structure, not a performance claim)."""
    kernel = _axpy(64)
    args = [np.ones(64, np.float32), np.zeros(64, np.float32)]
    per_call = min(evaluate(kernel, args, repeat=5, min_repeat_ms=5))
    assert per_call < 5e-7


def test_flush_cache_and_bad_arguments():
    kernel = _axpy(256)
    args = [np.ones(256, np.float32), np.zeros(256, np.float32)]
    assert len(evaluate(kernel, args, repeat=2, flush_cache=True)) == 2
    assert len(evaluate(kernel, args, repeat=3, flush_cache=True, keep_first_warm=True)) == 3
    with pytest.raises(ValueError, match="number and repeat"):
        evaluate(kernel, args, number=0)
    with pytest.raises(TypeError, match="dtype"):
        evaluate(kernel, [np.ones(256), args[1]])


def test_a_repeat_after_a_flush_wakes_the_thread_team_first(monkeypatch):
    """Evicting the caches takes milliseconds, after which libgomp's threads sleep: each flushed
    repeat wakes them before its timed call, as a forward pass keeps them awake. Warm repeats,
    back to back, need no waking."""
    woken = []
    monkeypatch.setattr(evaluate_module, "wake_threads", lambda: woken.append(1))
    monkeypatch.setattr(evaluate_module, "waited_ns", lambda: 0)  # no repeat re-timed on a busy host
    kernel = _axpy(256)
    args = [np.ones(256, np.float32), np.zeros(256, np.float32)]
    evaluate(kernel, args, repeat=4)
    assert woken == []
    evaluate(kernel, args, repeat=3, flush_cache=True, keep_first_warm=True)
    assert len(woken) == 3


class FakeWaits:
    """`waited_ns` as a test scripts it: the wait each timed repeat saw, in order (then none)."""

    def __init__(self, waits_ns):
        self.waits = list(waits_ns)
        self.total = 0
        self.reads = 0

    def __call__(self):
        self.reads += 1
        if self.reads % 2 == 0 and self.waits:  # the read after a repeat
            self.total += self.waits.pop(0)
        return self.total


@pytest.mark.parametrize(
    ("waits_ms", "timed"),
    [
        ([0, 0, 0], 3),  # undisturbed: three repeats timed
        ([5, 0, 5, 0, 0], 5),  # two disturbed repeats timed again
        ([5] * 10, 6),  # disturbed throughout: at most `repeat` more, then the times as they are
    ],
)
def test_a_repeat_whose_threads_waited_for_a_cpu_is_timed_again(monkeypatch, waits_ms, timed):
    kernel = _axpy(256)
    args = [np.ones(256, np.float32), np.zeros(256, np.float32)]
    waits = FakeWaits(w * 1_000_000 for w in waits_ms)
    monkeypatch.setattr(evaluate_module, "waited_ns", waits)
    monkeypatch.setattr(evaluate_module, "RETRY_PAUSE_S", 0.0)
    assert len(evaluate(kernel, args, repeat=3, min_repeat_ms=1)) == 3
    assert waits.reads == 2 * timed


def test_no_retry_where_the_kernel_does_not_report_waits(monkeypatch):
    kernel = _axpy(256)
    args = [np.ones(256, np.float32), np.zeros(256, np.float32)]
    reads = []
    monkeypatch.setattr(evaluate_module, "waited_ns", lambda: reads.append(1))
    assert len(evaluate(kernel, args, repeat=4)) == 4
    assert len(reads) == 8


def test_kernels_side_by_side_alternate_repeat_by_repeat(monkeypatch):
    """Round by round, one repeat of each kernel, each calibrated on its own: a slow phase of the
    host falls on every kernel alike."""
    first, second = _axpy(4096), _axpy(4096)
    args = [np.ones(4096, np.float32), np.zeros(4096, np.float32)]
    timed = []
    real_time = evaluate_module._time
    monkeypatch.setattr(evaluate_module, "waited_ns", lambda: None)  # no repeat timed again: a busy host
    names = {id(first): "first", id(second): "second"}
    monkeypatch.setattr(
        evaluate_module, "_time", lambda k, p, n: timed.append(names[id(k)]) or real_time(k, p, n)
    )
    secs = evaluate_module.evaluate_side_by_side([first, second], args, repeat=3, min_repeat_ms=2)
    calibrating, rounds = timed[:-6], timed[-6:]
    assert rounds == ["first", "second"] * 3
    split = calibrating.index("second")
    assert split > 0 and set(calibrating[:split]) == {"first"} and set(calibrating[split:]) == {"second"}
    assert [len(s) for s in secs] == [3, 3] and all(0 < t < 1e-3 for s in secs for t in s)
    np.testing.assert_array_equal(args[1], 2 * args[0])
