"""The op vocabulary: every operation an expression node applies, each declared once with everything
the compiler needs of it.

An `Op` says which operand dtypes it takes and what dtype it gives, how it prints, how it folds on
constants, how it lowers to LLVM (on scalars, and on vectors when `vectorizes`), what numpy computes
for it (the reference of custom workloads), which cost-model feature counts it, and its name in the
custom-workload expression language (if it has one there). Nodes (`ir.Binary`, `ir.Unary`) check
their op and operand dtypes when they are built.

Adding an op is one entry here and one row in tests/compiler/test_ops.py, which checks every op
end to end: printed, folded, compiled scalar and vector, counted by the features, parsed.
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field

import llvmlite.ir as ll
import numpy as np

from compiler.dtypes import FLOAT_DTYPES, INT_DTYPES, is_float, is_unsigned
from compiler.llvm_math import erf_f32, exp_f32, expm1_f32, log1p_f32, log_f32, tanh_f32
from compiler.llvm_ops import FAST_MATH, I32, Emitter, call_intrinsic

NUMERIC = FLOAT_DTYPES + INT_DTYPES
BOOL = ("bool",)

Emit = Callable[[Emitter, str, list[ll.Value]], ll.Value]
Fold = Callable[..., int | float | bool]


@dataclass(frozen=True, eq=False)
class OpSpec:
    """Everything about one op. `emit` gets the operands' dtype and LLVM values (scalars, or vectors
    of equal lanes when the op `vectorizes`); `fold` gets Python numbers and may raise
    ArithmeticError or ValueError where the op is undefined (then it is not folded). `feature` maps
    the operands' dtype class ("float", "int", "bool") to the features' instruction-mix column."""

    name: str
    arity: int
    operands: tuple[str, ...]
    result: str  # "same" (the operands' dtype) or "bool"
    fold: Fold
    numpy: Callable[..., object]
    emit: Emit
    vectorizes: bool
    feature: dict[str, str] = field(repr=False)
    symbol: str | None = None  # infix (binary) or prefix (unary) symbol; None prints as T.name(...)
    precedence: int = 0  # of the symbol, higher binds tighter
    syntax: str | None = None  # the name or symbol in the expression language, if it is there


def _float_or_int(float_op: str, int_op: str) -> Emit:
    def emit(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        if is_float(dtype):
            return getattr(cg.builder, float_op)(*args, flags=FAST_MATH)
        return getattr(cg.builder, int_op)(*args)

    return emit


def _fdiv(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
    return cg.builder.fdiv(*args, flags=FAST_MATH)


def _floor_divmod(want_remainder: bool) -> Emit:
    """Python semantics (round toward -inf); LLVM's sdiv/srem round toward zero. Unsigned division
    has nothing to round toward but zero."""

    def emit(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        b, (x, y) = cg.builder, args
        if is_unsigned(dtype):
            return b.urem(x, y) if want_remainder else b.udiv(x, y)
        q, r = b.sdiv(x, y), b.srem(x, y)
        zero = x.type(0)
        adjust = b.and_(
            b.icmp_signed("!=", r, zero),
            b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero)),
        )
        if want_remainder:
            return b.select(adjust, b.add(r, y), r)
        return b.select(adjust, b.sub(q, x.type(1)), q)

    return emit


def _min_max(intrinsic: str, predicate: str) -> Emit:
    """Floats through llvm.minimum/maximum, which propagate NaN as numpy.minimum/maximum do and
    vectorize (vmaxps and a NaN blend); ints through a select. Not minnum/maxnum: LLVM 22's loop
    vectorizer aborts on a minnum/maxnum reduction of 128 or more steps (an assertion, "VPlan cost
    model and legacy cost model disagreed"), which is every softmax or max pool with such a row."""

    def emit(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        if is_float(dtype):
            return call_intrinsic(cg, intrinsic, args)
        x, y = args
        return cg.builder.select(_icmp(cg, dtype, predicate, x, y), x, y)

    return emit


def _compare(predicate: str) -> Emit:
    """Float comparisons as numpy's: false when either side is NaN, except != (true)."""

    def emit(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        if is_float(dtype) and predicate == "!=":
            return cg.builder.fcmp_unordered(predicate, *args)
        if is_float(dtype):
            return cg.builder.fcmp_ordered(predicate, *args)
        return _icmp(cg, dtype, predicate, *args)

    return emit


def _icmp(cg: Emitter, dtype: str, predicate: str, x: ll.Value, y: ll.Value) -> ll.Value:
    """An integer comparison by the sign of `dtype`."""
    if is_unsigned(dtype):
        return cg.builder.icmp_unsigned(predicate, x, y)
    return cg.builder.icmp_signed(predicate, x, y)


def _remainder(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
    """C's fmod: frem on floats, srem or urem on ints by their sign."""
    if is_float(dtype):
        return cg.builder.frem(*args, flags=FAST_MATH)
    return cg.builder.urem(*args) if is_unsigned(dtype) else cg.builder.srem(*args)


def _intrinsic(name: str) -> Emit:
    def emit(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        return call_intrinsic(cg, name, args)

    return emit


def _libm(float32_name: str, float64_name: str) -> Emit:
    """A C library function, for what LLVM has no intrinsic for (scalars only)."""

    def emit(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        ty = args[0].type
        fn = cg.declare(float32_name if dtype == "float32" else float64_name, ty, [ty] * len(args))
        return cg.builder.call(fn, args, fastmath=FAST_MATH)

    return emit


def _float32_inline(inline: Callable[[Emitter, ll.Value], ll.Value], float64: Emit) -> Emit:
    """float32 as inline arithmetic (compiler.llvm_math), which vectorizes: LLVM has no vector math
    library here, so an intrinsic on a vector is one scalar libm call per lane. float64 as `float64`."""

    def emit(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        return inline(cg, args[0]) if dtype == "float32" else float64(cg, dtype, args)

    return emit


def _lane_by_lane(scalar: Emit) -> Emit:
    """`scalar` on each lane of a vector operand (a libm function), so that an op can declare that it
    vectorizes when only some of its dtypes do."""

    def emit(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        (x,) = args
        if not isinstance(x.type, ll.VectorType):
            return scalar(cg, dtype, args)
        b, out = cg.builder, ll.Constant(x.type, ll.Undefined)
        for k in range(x.type.count):
            out = b.insert_element(out, scalar(cg, dtype, [b.extract_element(x, I32(k))]), I32(k))
        return out

    return emit


def _arith(name: str, symbol: str, precedence: int, emit: Emit, feature: dict[str, str]) -> OpSpec:
    """An infix arithmetic op the expression language writes with the same symbol."""
    fold, numpy = _ARITH_SEMANTICS[name]
    operands = FLOAT_DTYPES if name == "div" else NUMERIC
    return OpSpec(name, 2, operands, "same", fold, numpy, emit, True, feature, symbol, precedence, symbol)


_ARITH_SEMANTICS: dict[str, tuple[Fold, Callable[..., object]]] = {
    "add": (operator.add, np.add),
    "sub": (operator.sub, np.subtract),
    "mul": (operator.mul, np.multiply),
    "div": (operator.truediv, np.divide),
}


def _floor(name: str, symbol: str, fold: Fold, numpy: Callable[..., object]) -> OpSpec:
    """Integer division and modulo, rounding toward -inf as Python does (index arithmetic)."""
    emit = _floor_divmod(want_remainder=name == "floormod")
    return OpSpec(name, 2, INT_DTYPES, "same", fold, numpy, emit, False, {"int": "int_divmod"}, symbol, 5)


def _truncated_remainder(a: float, b: float) -> float:
    """C's fmod and LLVM's frem/srem: the remainder of division rounded toward zero, with a's sign."""
    if isinstance(a, float) or isinstance(b, float):
        return math.fmod(a, b)
    if b == 0:
        raise ZeroDivisionError("fmod by 0")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _minmax(name: str, fold: Fold, numpy: Callable[..., object], predicate: str) -> OpSpec:
    feature = {"float": "float_minmax", "int": "int_minmax"}
    emit = _min_max(f"{name}imum", predicate)
    return OpSpec(name, 2, NUMERIC, "same", fold, numpy, emit, True, feature, syntax=name)


def _cmp(name: str, symbol: str, fold: Fold, numpy: Callable[..., object]) -> OpSpec:
    feature = {"float": "float_cmp", "int": "int_cmp"}
    return OpSpec(name, 2, NUMERIC, "bool", fold, numpy, _compare(symbol), True, feature, symbol, 3)


def _logic(name: str, arity: int, precedence: int, numpy: Callable[..., object]) -> OpSpec:
    """and, or, not on bools. Scalars only: the vector code generator does not widen i1 values, so
    a logic op runs lane by lane."""
    folds: dict[str, Fold] = {
        "and": lambda a, b: bool(a and b),
        "or": lambda a, b: bool(a or b),
        "not": operator.not_,
    }
    fold = folds[name]

    def emit(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        b = cg.builder
        return b.and_(*args) if name == "and" else b.or_(*args) if name == "or" else b.not_(*args)

    return OpSpec(name, arity, BOOL, "bool", fold, numpy, emit, False, {"bool": "bool_op"}, name, precedence)


def _lanes_of(x: ll.Value, value: int) -> ll.Constant:
    """The integer `value` in `x`'s type, scalar or splat across its lanes."""
    if isinstance(x.type, ll.VectorType):
        return ll.Constant(x.type, [ll.Constant(x.type.element, value)] * x.type.count)
    return ll.Constant(x.type, value)


def _shift(left: bool) -> Emit:
    """A shift by an amount outside [0, bits) gives 0, or for a right shift of a negative value -1
    (the sign fills every bit), as numpy and ONNX's BitShift define it: LLVM's shifts make such an
    amount poison and hardware masks it. A right shift is arithmetic on a signed type."""

    def emit(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        b, (x, y) = cg.builder, args
        bits = x.type.element.width if isinstance(x.type, ll.VectorType) else x.type.width
        outside = b.icmp_unsigned(">=", y, _lanes_of(y, bits))  # a negative amount is a huge one
        zero = _lanes_of(x, 0)
        if not left and not is_unsigned(dtype):
            return b.ashr(x, b.select(outside, _lanes_of(y, bits - 1), y))
        shifted = (b.shl if left else b.lshr)(x, b.select(outside, zero, y))
        return b.select(outside, zero, shifted)

    return emit


def _np_shift(left: bool) -> Callable[..., np.ndarray]:
    def shift(x: object, y: object) -> np.ndarray:
        a, n = np.broadcast_arrays(np.asarray(x), np.asarray(y))
        outside = (n < 0) | (n >= 8 * a.dtype.itemsize)
        amount = np.where(outside, 0, n).astype(a.dtype)
        shifted = np.left_shift(a, amount) if left else np.right_shift(a, amount)
        fill = np.where(a < 0, -1, 0) if not left and a.dtype.kind == "i" else 0
        return np.where(outside, fill, shifted).astype(a.dtype)

    return shift


def _fold_shift(left: bool) -> Fold:
    """Python's shifts on the operands (the result wraps into the type when it becomes a constant):
    an amount outside [0, 64) gives what any amount outside a type's bits gives, whatever the type."""

    def fold(x: int, y: int) -> int:
        if not 0 <= y < 64:
            return 0 if left or x >= 0 else -1
        return x << y if left else x >> y

    return fold


def _bitwise(name: str, fold: Fold, numpy: Callable[..., object], emit: str) -> OpSpec:
    def lower(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
        return getattr(cg.builder, emit)(*args)

    return OpSpec(name, 2, INT_DTYPES, "same", fold, numpy, lower, True, {"int": "int_addsub"})


def _bitwise_not(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
    return cg.builder.not_(args[0])


def _math(
    name: str,
    fold: Callable[[float], float],
    numpy: Callable[..., object],
    emit: Emit | None = None,
    vectorizes: bool = True,
) -> OpSpec:
    """A float function: an LLVM intrinsic (by default), which takes vectors too, or `emit`; one that
    does not vectorize (a C library function, which takes one value) the vector code generator
    computes lane by lane."""
    feature = {"float": "float_math_call"}
    emit = emit or _intrinsic(name)
    return OpSpec(name, 1, FLOAT_DTYPES, "same", fold, numpy, emit, vectorizes, feature, syntax=name)


def _erf_numpy(x: object) -> np.ndarray:
    """numpy has no erf: libm's, element by element, in the operand's float dtype (the models' gelu
    needs it exact, as PyTorch computes it)."""
    a = np.asarray(x)
    dtype = a.dtype if a.dtype.kind == "f" else np.dtype("float64")
    return np.vectorize(math.erf, otypes=[dtype])(a)


def _pow() -> OpSpec:
    """x ** y: on floats through llvm.pow, which takes vectors (the backend calls powf per lane); on
    integers exactly, wrapping as numpy's and PyTorch's (`_int_power`)."""
    feature = {"float": "float_math_call", "int": "int_mul"}
    return OpSpec("pow", 2, NUMERIC, "same", _fold_power, _np_power, _power, True, feature, syntax="pow")


def _power(cg: Emitter, dtype: str, args: list[ll.Value]) -> ll.Value:
    return call_intrinsic(cg, "pow", args) if is_float(dtype) else _int_power(cg, dtype, *args)


def _int_power(cg: Emitter, dtype: str, x: ll.Value, e: ll.Value) -> ll.Value:
    """x ** e by squaring, in straight-line code over every bit of the exponent (a constant one
    folds to its multiplications): the product wraps, as numpy's does. A negative exponent (numpy and
    PyTorch refuse one) gives the power truncated toward zero: 1 for x = 1, (-1) ** e for x = -1, else
    0 (0 for x = 0 too, where the power has no value)."""
    b = cg.builder
    bits = x.type.element.width if isinstance(x.type, ll.VectorType) else x.type.width
    zero, one = _lanes_of(x, 0), _lanes_of(x, 1)
    steps = bits if is_unsigned(dtype) else bits - 1
    result, square = one, x
    for k in range(steps):
        mask = 1 << k if k < bits - 1 else -(1 << k)  # the top bit as a signed constant
        bit = b.icmp_unsigned("!=", b.and_(e, _lanes_of(e, mask)), zero)
        result = b.select(bit, b.mul(result, square), result)
        if k + 1 < steps:
            square = b.mul(square, square)
    if is_unsigned(dtype):
        return result
    odd = b.icmp_unsigned("!=", b.and_(e, one), zero)
    minus_one = b.select(odd, _lanes_of(x, -1), one)
    truncated = b.select(
        b.icmp_signed("==", x, one), one, b.select(b.icmp_signed("==", x, _lanes_of(x, -1)), minus_one, zero)
    )
    return b.select(b.icmp_signed("<", e, zero), truncated, result)


def _fold_power(x: float, y: float) -> float:
    """Python's power; on integers modulo 2**64 (the result wraps into the type when it becomes a
    constant: never a number of a billion digits), a negative exponent as `_int_power` says."""
    if isinstance(x, float) or isinstance(y, float):
        return math.pow(x, y)
    if y < 0:
        return 1 if x == 1 else (-1 if y % 2 else 1) if x == -1 else 0
    return pow(x, y, 2**64)


def _np_power(x: object, y: object) -> np.ndarray:
    """numpy's power; on integers with `_int_power`'s negative exponents (numpy refuses them)."""
    a, e = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if a.dtype.kind == "f":
        return np.power(a, e)
    with np.errstate(all="ignore"):
        power = np.power(a, np.where(e < 0, 0, e).astype(e.dtype))
    if e.dtype.kind == "u":
        return power
    truncated = np.where(a == 1, 1, np.where(a == -1, np.where(e % 2 == 1, -1, 1), 0))
    return np.where(e < 0, truncated, power).astype(a.dtype)


class Op(enum.Enum):
    """The ops, each an `OpSpec` (its `spec`)."""

    ADD = _arith("add", "+", 4, _float_or_int("fadd", "add"), {"float": "float_add", "int": "int_addsub"})
    SUB = _arith("sub", "-", 4, _float_or_int("fsub", "sub"), {"float": "float_sub", "int": "int_addsub"})
    MUL = _arith("mul", "*", 5, _float_or_int("fmul", "mul"), {"float": "float_mul", "int": "int_mul"})
    DIV = _arith("div", "/", 5, _fdiv, {"float": "float_div"})
    FLOORDIV = _floor("floordiv", "//", operator.floordiv, np.floor_divide)
    FLOORMOD = _floor("floormod", "%", operator.mod, np.mod)
    FMOD = OpSpec(
        "fmod",
        2,
        NUMERIC,
        "same",
        _truncated_remainder,
        np.fmod,
        _remainder,
        True,
        {"float": "float_div", "int": "int_divmod"},
        syntax="fmod",
    )
    MIN = _minmax("min", min, np.minimum, "<")
    MAX = _minmax("max", max, np.maximum, ">")
    LT = _cmp("lt", "<", operator.lt, np.less)
    LE = _cmp("le", "<=", operator.le, np.less_equal)
    GT = _cmp("gt", ">", operator.gt, np.greater)
    GE = _cmp("ge", ">=", operator.ge, np.greater_equal)
    EQ = _cmp("eq", "==", operator.eq, np.equal)
    NE = _cmp("ne", "!=", operator.ne, np.not_equal)
    AND = _logic("and", 2, 2, np.logical_and)
    OR = _logic("or", 2, 1, np.logical_or)
    NOT = _logic("not", 1, 6, np.logical_not)
    EXP = _math("exp", math.exp, np.exp, _float32_inline(exp_f32, _intrinsic("exp")))
    EXPM1 = _math(
        "expm1", math.expm1, np.expm1, _float32_inline(expm1_f32, _lane_by_lane(_libm("expm1f", "expm1")))
    )
    LOG1P = _math(
        "log1p", math.log1p, np.log1p, _float32_inline(log1p_f32, _lane_by_lane(_libm("log1pf", "log1p")))
    )
    SQRT = _math("sqrt", math.sqrt, np.sqrt)
    LOG = _math("log", math.log, np.log, _float32_inline(log_f32, _intrinsic("log")))
    TANH = _math("tanh", math.tanh, np.tanh, _float32_inline(tanh_f32, _lane_by_lane(_libm("tanhf", "tanh"))))
    FABS = _math("fabs", math.fabs, np.fabs)
    FLOOR = _math("floor", lambda v: float(math.floor(v)), np.floor)
    CEIL = _math("ceil", lambda v: float(math.ceil(v)), np.ceil)
    TRUNC = _math("trunc", lambda v: float(math.trunc(v)), np.trunc)
    ROUND = _math("round", lambda v: float(round(v)), np.round, _intrinsic("roundeven"))  # halves to even
    ERF = _math("erf", math.erf, _erf_numpy, _float32_inline(erf_f32, _lane_by_lane(_libm("erff", "erf"))))
    POW = _pow()
    BITWISE_AND = _bitwise("bitwise_and", operator.and_, np.bitwise_and, "and_")
    BITWISE_OR = _bitwise("bitwise_or", operator.or_, np.bitwise_or, "or_")
    BITWISE_XOR = _bitwise("bitwise_xor", operator.xor, np.bitwise_xor, "xor")
    BITWISE_NOT = OpSpec(
        "bitwise_not",
        1,
        INT_DTYPES,
        "same",
        operator.invert,
        np.invert,
        _bitwise_not,
        True,
        {"int": "int_addsub"},
    )
    SHIFT_LEFT = OpSpec(
        "shift_left",
        2,
        INT_DTYPES,
        "same",
        _fold_shift(True),
        _np_shift(True),
        _shift(True),
        True,
        {"int": "int_addsub"},
    )
    SHIFT_RIGHT = OpSpec(
        "shift_right",
        2,
        INT_DTYPES,
        "same",
        _fold_shift(False),
        _np_shift(False),
        _shift(False),
        True,
        {"int": "int_addsub"},
    )

    def __init__(self, spec: OpSpec) -> None:
        # Plain attributes, read every time a node is built: an enum's `value` is a descriptor.
        self.spec = spec
        self.arity = spec.arity
        self.operands = frozenset(spec.operands)
        self.bool_result = spec.result == "bool"

    # By identity, in C: enum hashes by name in Python, and every node built hashes its op.
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Op.{self.name}"

    def __reduce_ex__(self, protocol: object) -> tuple[object, ...]:
        return getattr, (Op, self.name)  # by name: the spec holds functions, which do not pickle

    @property
    def is_comparison(self) -> bool:
        """An order or equality test of numbers (a bool result from non-bool operands)."""
        return self.bool_result and self.spec.operands != BOOL

    def result_dtype(self, operand_dtype: str) -> str:
        return "bool" if self.bool_result else operand_dtype

    def feature(self, operand_dtype: str) -> str:
        """The features' instruction-mix column that counts this op on operands of `operand_dtype`."""
        kind = "float" if is_float(operand_dtype) else "bool" if operand_dtype == "bool" else "int"
        return self.spec.feature[kind]

    def fold(self, *values: object) -> int | float | bool | None:
        """The op on Python numbers, or None where it is undefined (a division by zero, log(-1))."""
        try:
            return self.spec.fold(*values)
        except (ArithmeticError, ValueError):
            return None


BY_NAME: dict[str, Op] = {op.spec.name: op for op in Op}
# The expression language's functions and operators, by the name or symbol it writes them with.
BY_SYNTAX: dict[str, Op] = {op.spec.syntax: op for op in Op if op.spec.syntax is not None}
