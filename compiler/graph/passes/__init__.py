"""Graph passes, each a function Module -> Module; `optimize` runs them in order."""

from collections.abc import Callable, Sequence

from compiler.graph.ir import Module
from compiler.graph.passes.block_conv_channels import block_conv_channels
from compiler.graph.passes.block_matmul_columns import block_matmul_columns
from compiler.graph.passes.dead_code import eliminate_dead_code
from compiler.graph.passes.expand_powers import expand_powers
from compiler.graph.passes.fold_batch_norm import fold_batch_norm
from compiler.graph.passes.fold_constants import fold_constants
from compiler.graph.passes.fold_pad import fold_pad_into_conv
from compiler.graph.passes.fuse import fuse
from compiler.graph.passes.layer_norm_pattern import match_layer_norm
from compiler.graph.passes.nchwc_layout import nchwc_layout
from compiler.graph.passes.pack_vnni_weights import pack_vnni_weights
from compiler.graph.passes.pad_matmul import pad_matmul
from compiler.graph.passes.tasks import ExtractedTask, extract_tasks
from compiler.graph.passes.uniform_constants import shrink_uniform_constants
from compiler.graph.passes.verify import verify
from compiler.graph.passes.winograd_convs import winograd_convs

Pass = Callable[[Module], Module]

PASSES: tuple[Pass, ...] = (
    fold_constants,
    fold_batch_norm,
    fold_constants,
    match_layer_norm,
    shrink_uniform_constants,
    expand_powers,
    fold_pad_into_conv,
    eliminate_dead_code,
    winograd_convs,
    nchwc_layout,
    block_conv_channels,
    pad_matmul,
    block_matmul_columns,
    pack_vnni_weights,
    fuse,
    eliminate_dead_code,
)


def optimize(module: Module, *, check: bool = False, passes: Sequence[Pass] = PASSES) -> Module:
    """Fold constants and batch norms, recognize written-out layer norms, shrink constants of one
    value that an operator broadcasts to one element, expand powers by small constants into
    multiplications, fold zero pads into the convs after them, drop what computes
    nothing, compute stride-1 3x3 convs by Winograd, keep depthwise convs and their neighbours in the
    NCHWc layout, block the output channels of other convs on small images, pad matmuls' long
    columns to a multiple of 16 where the vector tile could not divide them, pack dense layers'
    weights in blocks of columns (and quantized ones as VNNI reads them), fuse into PrimFuncs.
    With `check`, the verifier runs after every pass (the tests do this). `passes` replaces the list
    (a module made for a range of sizes leaves out the padding that depends on them)."""
    for run in passes:
        module = run(module)
        if check:
            verify(module)
    return module


__all__ = [
    "PASSES",
    "ExtractedTask",
    "block_conv_channels",
    "block_matmul_columns",
    "eliminate_dead_code",
    "expand_powers",
    "extract_tasks",
    "fold_batch_norm",
    "fold_constants",
    "fold_pad_into_conv",
    "fuse",
    "match_layer_norm",
    "nchwc_layout",
    "optimize",
    "pack_vnni_weights",
    "pad_matmul",
    "shrink_uniform_constants",
    "verify",
    "winograd_convs",
]
