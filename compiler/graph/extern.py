"""Extern functions a graph may call (Relax's `call_dps_packed`): native code or Python, registered by
name as `tvm.register_func` registers them, and called in destination-passing style.

A native function is a symbol of a shared library (`register_native_func`), with this convention:

    int32_t f(void *const *args, const int64_t *const *shapes, const int32_t *ndims, int32_t nargs);

`args` holds the `nargs` data pointers, the inputs' then the output's (C-contiguous, of the element
types the call site names); `shapes[k]` points at the `ndims[k]` dimensions of argument k. It writes
the output and returns 0; any other value is a failure: the forward pass stops and the call raises
ExternCallError naming the function. It is a shared library rather than a C source we compile
because that is what a native kernel usually comes as (a vendor library, another compiler's output),
and it can be both loaded into this process and linked against by an exported model.

A Python function (`register_func`) takes numpy arrays, the inputs (read-only) then the output, and
writes the output in place; it returns None. It runs only in this process: a model calling one cannot
be exported. Functions are held by name, so a module read back from its JSON form calls whatever is
registered under the name then; a name nobody registered is refused when the graph is built.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, overload

import numpy as np

from compiler.graph.ir import DTYPES, CallDPSPacked, GraphError, TensorType
from compiler.graph.native_call import ExternCallError, ExternSite

# The convention as ctypes sees it, for calling a native function and for a Python one's callback.
EXTERN_FUNCTION = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)),
    ctypes.POINTER(ctypes.c_int32),
    ctypes.c_int32,
)

F = TypeVar("F", bound=Callable[..., object])


class ExternFuncError(ValueError):
    """A function that cannot be registered: its name is taken, or its library or symbol is missing."""


@dataclass(frozen=True)
class NativeFunc:
    name: str
    library: Path  # absolute, so that the JIT and an exported model's link find the same file
    symbol: str

    @property
    def address(self) -> int:
        pointer = ctypes.cast(getattr(_loaded(self.library), self.symbol), ctypes.c_void_p).value
        assert pointer is not None
        return pointer


@dataclass(frozen=True)
class PythonFunc:
    name: str
    fn: Callable[..., object] = field(repr=False)


ExternFunc = NativeFunc | PythonFunc

_FUNCS: dict[str, ExternFunc] = {}


@overload
def register_func(name: str, f: None = None, *, override: bool = False) -> Callable[[F], F]: ...


@overload
def register_func(name: str, f: F, *, override: bool = False) -> F: ...


def register_func(name: str, f: F | None = None, *, override: bool = False) -> F | Callable[[F], F]:
    """Register the Python function `f` as `name` (or, without `f`, a decorator that does), as
    `tvm.register_func` does. A name already registered is refused unless `override`."""

    def register(fn: F) -> F:
        _add(PythonFunc(name, fn), override)
        return fn

    return register if f is None else register(f)


def register_native_func(
    name: str, library: str | Path, symbol: str, *, override: bool = False
) -> NativeFunc:
    """Register `symbol` of the shared library at `library` as `name`. The library is loaded now, so
    a wrong path or symbol is refused here rather than when a model runs."""
    path = Path(library).resolve()
    try:
        loaded = _loaded(path)
    except OSError as e:
        raise ExternFuncError(f"extern function {name!r}: cannot load {path}: {e}") from None
    if not hasattr(loaded, symbol):
        raise ExternFuncError(f"extern function {name!r}: {path} defines no symbol {symbol!r}")
    func = NativeFunc(name, path, symbol)
    _add(func, override)
    return func


def remove_func(name: str) -> None:
    """Forget the function registered as `name` (a KeyError if there is none)."""
    del _FUNCS[name]


def _add(func: ExternFunc, override: bool) -> None:
    if func.name in _FUNCS and not override:
        raise ExternFuncError(
            f"extern function {func.name!r} is already registered (override=True replaces it)"
        )
    _FUNCS[func.name] = func


@functools.cache
def _loaded(path: Path) -> ctypes.CDLL:
    """One handle per library, kept for the process: the JIT holds raw addresses into it."""
    return ctypes.CDLL(str(path))


def resolve(func: str, node: str) -> ExternFunc:
    """The function registered as `func`, which node `node` calls; a GraphError naming both if none is."""
    found = _FUNCS.get(func)
    if found is None:
        raise GraphError(
            node,
            "call_dps_packed",
            f"no extern function is registered as {func!r} (register_func or register_native_func)",
        )
    return found


def check_call(node: CallDPSPacked) -> None:
    """What a call site must be: of a registered function, with a static output of a model's dtype."""
    resolve(node.func, node.name)
    out = node.type
    if out.dtype not in DTYPES:
        raise GraphError(node.name, "call_dps_packed", f"dtype {out.dtype} is not supported")
    if not (out.is_static and out.dims and all(d > 0 for d in out.shape)):
        raise GraphError(
            node.name, "call_dps_packed", f"the output {out} must have a static, non-empty shape"
        )


class PythonCallback:
    """A Python function as a C function of the convention, for one call site (whose types give the
    arrays' dtypes). An exception cannot cross the native forward pass: it is kept in `error` and the
    call returns 1, so the pass stops and the caller raises it."""

    def __init__(self, func: PythonFunc, types: Sequence[TensorType]) -> None:
        self.func = func
        self.types = tuple(types)
        self.error: BaseException | None = None
        self._c = EXTERN_FUNCTION(self._call)

    @property
    def address(self) -> int:
        pointer = ctypes.cast(self._c, ctypes.c_void_p).value
        assert pointer is not None
        return pointer

    def take_error(self) -> BaseException | None:
        error, self.error = self.error, None
        return error

    def _call(self, args: Any, shapes: Any, ndims: Any, nargs: int) -> int:
        try:
            last = len(self.types) - 1
            return _run_python(self.func, [_array(args[k], t, k == last) for k, t in enumerate(self.types)])
        except Exception as e:  # anything else would be printed by ctypes and the pass would go on
            self.error = e
            return 1


def _array(address: int, t: TensorType, writable: bool) -> np.ndarray:
    """The array at `address`, without a copy."""
    memory = memoryview((ctypes.c_char * t.nbytes).from_address(address)).cast("B")
    array = np.frombuffer(memory, t.dtype).reshape(t.shape)
    array.flags.writeable = writable
    return array


def _run_python(func: PythonFunc, arrays: Sequence[np.ndarray]) -> int:
    result = func.fn(*arrays)
    if result is None:
        return 0
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    raise TypeError(
        f"extern function {func.name!r} returned {type(result).__name__}: it writes its output in "
        "place and returns None"
    )


def call(node: CallDPSPacked, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """Node `node`'s output on `inputs`, computed here through its function (the reference's way)."""
    site = ExternSite(node.func, node.name)
    func = resolve(node.func, node.name)
    arrays = [np.ascontiguousarray(a) for a in inputs] + [np.zeros(node.type.shape, node.type.dtype)]
    if isinstance(func, PythonFunc):
        try:
            status = _run_python(func, [*(_read_only(a) for a in arrays[:-1]), arrays[-1]])
        except Exception as e:
            raise ExternCallError(site, f"it raised {e!r}") from e
    else:
        status = _call_native(func, arrays)
    if status != 0:
        raise ExternCallError(site, f"it returned {status}")
    return arrays[-1]


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def _call_native(func: NativeFunc, arrays: Sequence[np.ndarray]) -> int:
    n, int64p = len(arrays), ctypes.POINTER(ctypes.c_int64)
    dims = [(ctypes.c_int64 * a.ndim)(*a.shape) for a in arrays]
    shapes = (int64p * n)(*(ctypes.cast(d, int64p) for d in dims))
    data = (ctypes.c_void_p * n)(*(a.ctypes.data for a in arrays))
    ranks = (ctypes.c_int32 * n)(*(a.ndim for a in arrays))
    return int(EXTERN_FUNCTION(func.address)(data, shapes, ranks, n))


__all__ = [
    "ExternFunc",
    "ExternFuncError",
    "NativeFunc",
    "PythonFunc",
    "register_func",
    "register_native_func",
    "remove_func",
]
