"""Verification: poisoned outputs catch unwritten elements, NaN never passes, tolerances per dtype."""

import ml_dtypes
import numpy as np

from runner.verify import compare, poison


def test_poison_marks_every_element():
    f, i = np.zeros(5, np.float32), np.zeros(5, np.int32)
    poison([f, i])
    assert np.isnan(f).all() and (i == np.iinfo(np.int32).min).all()


def test_unwritten_element_is_reported_with_its_position():
    want = np.ones((3, 4), np.float32)
    got = want.copy()
    got[2, 1] = np.nan
    msg = compare([got], [want], ["C"])
    assert msg is not None and "C:" in msg and "(2, 1)" in msg


def test_tolerance_scales_with_magnitude_but_catches_real_errors():
    rng = np.random.default_rng(0)
    want = rng.standard_normal((64, 64)).astype(np.float32) * 100
    assert compare([want * (1 + 1e-6)], [want], ["C"]) is None
    wrong = want.copy()
    wrong[5, 7] += 1.0
    assert "(5, 7)" in compare([wrong], [want], ["C"])


def test_integers_must_match_exactly():
    assert compare([np.arange(4)], [np.arange(4)], ["I"]) is None
    assert compare([np.arange(4) + 1], [np.arange(4)], ["I"]) is not None


def test_a_bool_output_is_poisoned_with_a_byte_that_is_neither_true_nor_false():
    """Whatever the reference says, an element the kernel never writes differs from it."""
    want = np.array([True, False, True, False])
    got = np.zeros(4, np.bool_)
    poison([got])
    assert compare([got], [want], ["M"]).startswith("M: 4 of 4 elements differ")
    got[:] = want
    got[3] = True
    assert "first at (3,)" in compare([got], [want], ["M"])
    got[3] = False
    assert compare([got], [want], ["M"]) is None


def test_half_precision_outputs_are_poisoned_and_compared_within_their_precision():
    for dtype in ("float16", "bfloat16"):
        want = np.linspace(-3, 3, 12).astype(dtype)
        got = np.zeros(12, dtype)
        poison([got])
        assert np.isnan(got.astype(np.float32)).all()
        assert "never written" in compare([got], [want], ["H"])
        nudged = (want.astype(np.float32) * (1 + ml_dtypes.finfo(dtype).eps)).astype(dtype)
        assert compare([nudged], [want], ["H"]) is None
        nudged[4] = nudged[4] + 1
        assert "first at (4,)" in compare([nudged], [want], ["H"])
