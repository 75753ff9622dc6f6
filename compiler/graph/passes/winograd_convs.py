"""Winograd convolutions: a stride-1 3x3 conv2d (groups 1) with constant weights becomes a
conv2d_winograd whose weights are transformed once, here (`winograd.pack_winograd`).

Why: such a conv spends 9 multiply-adds per channel pair and output pixel, and ResNet's stages
are mostly these layers; F(2x2, 3x3) spends 4 (plus the transforms), so a layer that already ran
at 80-85% of the FMA peak direct runs 1.26-1.52x faster (ResNet-18's 56x56 to 14x14 layers, 128
trials each, timed warm on one host, bench/results/2026-11-24-b.md). The output tile is 2: F(4x4, 3x3)
multiplies less but its transforms cost more on these sizes, its transformed weights are 4x the
originals (the 512-channel layer's 9.4 MB become 38 MB), and its float32 error is 10x larger;
tuned, it won on no layer.

Which convs:
- at least `MIN_CHANNELS` input and output channels, where the matmul over channels dominates the
  transforms (measured from 64 to 512; with fewer channels the transforms, a fixed cost per channel,
  would weigh more, so those stay direct);
- at least `MIN_TILES` output tiles: each transformed weight is read once per tile, and a forward
  pass finds the weights in memory, not in cache (ResNet-18's weights are larger than this host's
  L3). ResNet-18's 512-channel layers at 7x7 (16 tiles, 16.8 MB of transformed weights) ran
  1.34-1.45 ms per call by Winograd inside a tuned pass, against about 1.05 direct; at 14x14 (49
  tiles) 1.02 against 1.05-1.1, and twice as fast as direct at 28x28 and 56x56.
"""

from __future__ import annotations

from compiler import winograd
from compiler.graph.ir import Call, Constant, Module
from compiler.graph.op import attr_int, attr_ints
from compiler.graph.passes.pack_weights import pack_weights

TILE = 2
MIN_CHANNELS = 32
MIN_TILES = 32


def winograd_convs(module: Module) -> Module:
    return pack_weights(
        module, _eligible, "conv2d_winograd", lambda w: winograd.pack_winograd(w, TILE), ("padding",)
    )


def _eligible(node: Call) -> bool:
    if node.op != "conv2d" or not isinstance(node.args[1], Constant) or attr_int(node.attrs, "groups") != 1:
        return False
    K, C, R, S = node.args[1].type.shape
    N, _, OH, OW = node.type.shape
    unit = attr_ints(node.attrs, "strides") == (1, 1) and attr_ints(node.attrs, "dilation") == (1, 1)
    tiles = N * winograd.tiles(OH, TILE) * winograd.tiles(OW, TILE)
    return unit and (R, S) == (3, 3) and min(C, K) >= MIN_CHANNELS and tiles >= MIN_TILES
