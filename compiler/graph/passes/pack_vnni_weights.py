"""VNNI packing of quantized dense layers: a matmul_integer of uint8 activations by constant int8
weights [K, N] (K a multiple of 4, N of 16) becomes a matmul_integer_vnni whose weights are packed
once, here, as AVX-512 VNNI reads them (`matmul_integer_vnni.pack_vnni`). A CPU without VNNI
computes the packed form too (MultiLevelTiling), as it computes the plain one."""

from __future__ import annotations

from compiler.graph.ir import Call, Constant, Module
from compiler.graph.ops.matmul_integer_vnni import LANES, STEPS, pack_vnni
from compiler.graph.passes.pack_weights import pack_weights


def pack_vnni_weights(module: Module) -> Module:
    return pack_weights(module, _packable, "matmul_integer_vnni", pack_vnni)


def _packable(node: Call) -> bool:
    if node.op != "matmul_integer" or not isinstance(node.args[1], Constant):
        return False
    x, w = node.args[0].type, node.args[1].type
    return (
        x.dtype == "uint8"
        and w.dtype == "int8"
        and len(w.shape) == 2
        and w.shape[0] % STEPS == 0
        and w.shape[1] % LANES == 0
    )
