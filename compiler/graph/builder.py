"""Build a module node by node, as the frontends do: unique names, checked calls, shared constants."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from compiler import te
from compiler.dtypes import HALF_DTYPES
from compiler.graph.extern import check_call
from compiler.graph.ir import (
    DTYPES,
    CallDPSPacked,
    CallTIR,
    Constant,
    EmptyTensorError,
    GraphError,
    Input,
    Module,
    Node,
    TensorType,
)
from compiler.graph.op import call
from compiler.ir import PrimFunc, static_shape
from compiler.names import unique_name


def sanitize(name: str) -> str:
    """A name usable in the printed graph and in buffer names: letters, digits and underscores."""
    out = re.sub(r"\W", "_", name).strip("_") or "t"
    return out if not out[0].isdigit() else f"t{out}"


class GraphBuilder:
    """Records inputs, constants and calls; `module(outputs)` returns what they compute."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.inputs: list[Input] = []
        self.scalar_inputs: set[int] = set()
        self.funcs: dict[str, PrimFunc] = {}  # the PrimFuncs of call_tir and emit_te, by name
        self.func_names: dict[str, str] = {}  # their names, by structural hash: one copy each

    def name(self, hint: str) -> str:
        name = unique_name(sanitize(hint), self.used, sep="_")
        self.used.add(name)
        return name

    def input(self, name: str, shape: Sequence[int], dtype: str) -> Input:
        """A model input; its shape must be static and its dtype one a model computes with. A rank-0
        input is held as shape (1,) (`Module.scalar_inputs`). An empty one (a size of 0) is taken and
        never read: the frontends fold what it computes, knowing its one value."""
        if dtype not in DTYPES:
            raise GraphError(name, "input", f"dtype {dtype} is not supported ({', '.join(DTYPES)})")
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise GraphError(
                name, "input", f"shape {tuple(shape)} is not static: every dimension must be a known size"
            )
        if not shape:
            self.scalar_inputs.add(len(self.inputs))
        node = Input(self.name(name), TensorType(tuple(int(d) for d in shape) or (1,), dtype))
        self.inputs.append(node)
        return node

    def constant(self, name: str, data: np.ndarray) -> Constant:
        """A weight or other constant; float64 data stays float64, a rank-0 value becomes shape (1,)."""
        array = np.ascontiguousarray(data)
        if array.ndim == 0:
            array = array.reshape(1)
        if str(array.dtype) not in DTYPES:
            raise GraphError(name, "constant", f"dtype {array.dtype} is not supported")
        return Constant(self.name(name), array.copy())

    def call(self, op: str, args: Sequence[Node], name: str | None = None, **attrs: object) -> Node:
        return self.call_attrs(op, args, attrs, name)

    def call_attrs(
        self, op: str, args: Sequence[Node], attrs: Mapping[str, object], name: str | None = None
    ) -> Node:
        node_name = self.name(name or op)
        empty = next((a for a in args if 0 in a.type.shape), None)
        if empty is not None:
            raise EmptyTensorError(
                node_name, op, f"{empty.name} is empty: no operator computes on an empty tensor"
            )
        half = next((a.type.dtype for a in args if a.type.dtype in HALF_DTYPES), None)
        if half is None or op == "cast":
            return call(node_name, op, args, attrs)
        return self._in_float32(node_name, op, args, attrs, half)

    def _in_float32(
        self, node_name: str, op: str, args: Sequence[Node], attrs: Mapping[str, object], half: str
    ) -> Node:
        """`op` on half-precision arguments, computed in float32: each one cast up, and a float32
        result rounded back to `half`. One rounding per operator, as numpy computes float16 and ONNX
        Runtime's CPU kernels do; fusion puts the casts inside the kernels."""
        wide = [
            call(self.name(f"{node_name}_float32"), "cast", [a], {"dtype": "float32"})
            if a.type.dtype in HALF_DTYPES
            else a
            for a in args
        ]
        out = call(self.name(f"{node_name}_computed"), op, wide, attrs)
        if out.type.dtype != "float32":
            return out
        return call(node_name, "cast", [out], {"dtype": half})

    def call_tir(self, func: PrimFunc, args: Sequence[Node], name: str | None = None) -> CallTIR:
        """A call of `func` (Relax's `call_tir`): its parameters are `args`, then the one output. A
        function already scheduled by hand (`Schedule`) is compiled as it is by `graph.build`; an
        unscheduled one gets the default schedule, or a tuned one, like any fused kernel."""
        node_name = self.name(name or func.name)
        expected = [a.type for a in args]
        if len(func.params) != len(expected) + 1:
            raise GraphError(
                node_name,
                "call_tir",
                f"{func.name} takes {len(func.params)} buffers, given {len(args)} + 1 output",
            )
        if func.size_vars:
            raise GraphError(
                node_name, "call_tir", f"{func.name} has symbolic dimensions: a graph's are static"
            )
        for buf, want in zip(func.params, expected):
            if TensorType(static_shape(buf.shape, func.name), buf.dtype) != want:
                raise GraphError(
                    node_name,
                    "call_tir",
                    f"{func.name}'s {buf.name} is {buf.shape} {buf.dtype}, given {want}",
                )
        out = func.params[-1]
        key = func.structural_hash()
        fname = self.func_names.get(key)
        if fname is None:
            fname = unique_name(sanitize(func.name), set(self.funcs), sep="_")
            self.funcs[fname], self.func_names[key] = func, fname
        return CallTIR(
            node_name, tuple(args), TensorType(static_shape(out.shape, func.name), out.dtype), func=fname
        )

    def emit_te(
        self, fcompute: Callable[..., te.Tensor], *args: Node, name: str | None = None, **attrs: object
    ) -> CallTIR:
        """A call of the PrimFunc that `fcompute` (a te function, such as `compiler.topi`'s) defines
        over placeholders of the arguments' types (Relax's `emit_te`)."""
        holders = [te.placeholder(a.type.shape, a.type.dtype, name=f"p{k}") for k, a in enumerate(args)]
        out = fcompute(*holders, **attrs)
        if not isinstance(out, te.Tensor):
            raise GraphError(
                name or "emit_te", "emit_te", f"fcompute must return one te tensor, got {type(out).__name__}"
            )
        func_name = sanitize(name or str(getattr(fcompute, "__name__", "te_func")))
        return self.call_tir(te.create_prim_func([*holders, out], name=func_name), args, name=name)

    def call_dps_packed(
        self,
        func: str,
        args: Sequence[Node],
        out_type: TensorType | tuple[Sequence[int], str],
        name: str | None = None,
    ) -> CallDPSPacked:
        """A call of the extern function registered as `func` (Relax's `call_dps_packed`): it takes
        `args` and writes one output of `out_type` (a TensorType, or a shape and a dtype), which it
        cannot infer. The function must be registered already (`compiler.graph.extern`), so that a
        misspelled name fails here and not when the model runs."""
        if not isinstance(out_type, TensorType):
            shape, dtype = out_type
            out_type = TensorType(tuple(int(d) for d in shape), dtype)
        node = CallDPSPacked(self.name(name or func), tuple(args), out_type, func=func)
        check_call(node)
        return node

    def module(self, outputs: Sequence[Node], scalar_outputs: Sequence[int] = ()) -> Module:
        """The module computing `outputs`; those at `scalar_outputs` are rank 0 to the caller (each
        must hold one element)."""
        for k in scalar_outputs:
            shape = outputs[k].type.shape
            if shape != (1,):
                raise GraphError(
                    outputs[k].name, "output", f"a rank-0 output holds one element, not shape {shape}"
                )
        return Module(
            tuple(self.inputs),
            tuple(outputs),
            funcs=dict(self.funcs),
            scalar_inputs=frozenset(self.scalar_inputs),
            scalar_outputs=frozenset(scalar_outputs),
        )
