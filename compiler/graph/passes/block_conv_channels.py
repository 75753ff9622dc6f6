"""Channel blocking of convolutions: a conv2d with constant weights (groups 1, output channels a
multiple of the block) becomes a conv2d_kblock whose weights are packed once, here, in blocks of
`KBLOCK` output channels (`topi.pack_kblock`).

Why: the tuner vectorizes a conv's innermost spatial loop. In NCHW that is the output width, which
in the late layers of a CNN is 7 or 14: a 16-lane vector then runs 7 or 14 lanes, and the register
tile cannot grow along channels because their weights are strided. Blocked, the innermost loop is
16 output channels, contiguous in the packed weights, and the data is broadcast. Measured with 64
trials each on ResNet-18's 7x7 layer (AVX-512, bench/results/2026-11-24-a.md): 57 GFLOPS in NCHW, 183 blocked,
TVM MetaSchedule 145. The packing costs nothing at run time: the weights are constants.

Which convs are blocked (measured with the default schedules on one core, bench/results/2026-11-24-a.md):
- only those with a reduction of at least `MIN_REDUCTION` taps (C x R x S): the copy back to NCHW
  gathers each element, which a short reduction does not pay for (MobileNetV2's 32 -> 192 1x1 at
  28x28 with its bias and relu: 0.184 ms blocked, 0.132 in NCHW; 64 -> 384 at 14x14: 0.115 blocked,
  0.164 in NCHW);
- strided convs on any image: along the width their input is strided (ResNet's 7x7 stem: 73 GFLOPS
  in NCHW with strided vector loads, 107 blocked);
- other convs when their output is small (`BLOCK_MAX_PIXELS`): on large images NCHW vectorizes well
  along the width (64 channels at 56x56: 104-108 GFLOPS either way), and the blocked output costs
  the copy back.
"""

from __future__ import annotations

from compiler import topi
from compiler.graph.ir import Call, Constant, Module
from compiler.graph.op import attr_int, attr_ints
from compiler.graph.passes.pack_weights import pack_weights

KBLOCK = 16
BLOCK_MAX_PIXELS = 28 * 28
MIN_REDUCTION = 64


def block_conv_channels(module: Module) -> Module:
    return pack_weights(
        module,
        _blockable,
        "conv2d_kblock",
        lambda w: topi.pack_kblock(w, KBLOCK),
        ("strides", "padding", "dilation"),
    )


def _blockable(node: Call) -> bool:
    if node.op != "conv2d" or not isinstance(node.args[1], Constant) or attr_int(node.attrs, "groups") != 1:
        return False
    _, K, OH, OW = node.type.shape
    _, C, R, S = node.args[1].type.shape
    strided = attr_ints(node.attrs, "strides") != (1, 1)
    return K % KBLOCK == 0 and C * R * S >= MIN_REDUCTION and (strided or OH * OW <= BLOCK_MAX_PIXELS)
