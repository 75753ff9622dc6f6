"""A zero pad of a conv's height and width folds into the conv's own padding. Models exported with
TensorFlow-style "same" padding pad explicitly before each conv (Hugging Face's MobileNetV2 pads
before all 52 of its convs): a separate copy of every activation, where the conv reads its padding
for free. Runs before the layout passes and fusion, which take the conv as they find it."""

from __future__ import annotations

from compiler.graph.ir import Call, Module, Node, rewrite
from compiler.graph.op import attr_ints, call


def fold_pad_into_conv(module: Module) -> Module:
    def fold(node: Node, args: tuple[Node, ...]) -> Node | None:
        if not (isinstance(node, Call) and node.op == "conv2d"):
            return None
        pad = args[0]
        if not (isinstance(pad, Call) and pad.op == "pad" and float(pad.attrs["value"]) == 0.0):  # type: ignore[arg-type]
            return None
        pads = attr_ints(pad.attrs, "pads")
        rank = len(pads) // 2
        before, after = pads[:rank], pads[rank:]
        if rank != 4 or any(before[:2]) or any(after[:2]) or min(pads) < 0:
            return None  # a pad of the batch or channels, or a crop
        top, left, bottom, right = attr_ints(node.attrs, "padding")
        padding = (top + before[2], left + before[3], bottom + after[2], right + after[3])
        return call(node.name, "conv2d", [pad.args[0], *args[1:]], {**node.attrs, "padding": padding})

    return rewrite(module, fold)
