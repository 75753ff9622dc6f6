"""Column blocking of dense layers: a matmul by constant weights [K, N] (N a multiple of the block)
becomes a matmul_nblock whose weights are packed once, here, in blocks of `NBLOCK` columns
(`topi.pack_nblock`), as ONNX Runtime's MLAS and oneDNN pack a GEMM's constant operand.

Why: inside a forward pass a layer's weights come from memory, not from cache (each layer reads its
own, and a BERT-base encoder layer's 28 MB do not stay in cache between passes). A register tile of
a plain [K, N] matmul reads, per step of k, one short run of a weight row, a row (here 3 to 12 kB)
from the last: each step lands on another page and the hardware prefetchers do not follow. Packed,
each block of columns is one contiguous run of K x NBLOCK floats, read in order.
"""

from __future__ import annotations

from compiler import topi
from compiler.graph.ir import Call, Constant, Module
from compiler.graph.passes.pack_weights import pack_weights

NBLOCK = 16


def block_matmul_columns(module: Module) -> Module:
    return pack_weights(module, _blockable, "matmul_nblock", lambda w: topi.pack_nblock(w, NBLOCK))


def _blockable(node: Call) -> bool:
    if node.op != "matmul" or not isinstance(node.args[1], Constant):
        return False
    weight = node.args[1].type.shape
    return len(weight) == 2 and weight[1] % NBLOCK == 0
