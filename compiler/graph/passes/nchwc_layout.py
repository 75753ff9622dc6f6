"""The NCHWc layout for depthwise convolutions and their neighbours (`compiler.nchwc`): each
depthwise conv2d (one filter per channel) becomes a depthwise_conv2d_nchwc, and a dense conv2d
(groups 1, constant weights) becomes a conv2d_nchwc when its input is already blocked or its output
feeds a depthwise conv. Their activations stay blocked between them: the elementwise epilogues
(bias, relu6, residual add) run on the blocked tensors, with their per-channel constants blocked
here, and a conv that reads a blocked tensor reads it as it is. Channels that do not fill whole
blocks of `CBLOCK` are padded with zero channels (zero filters and biases; the next conv's weights
for them are zero). Where a blocked tensor meets a layer that stays in NCHW, a `from_nchwc` copies
its real channels back; fusion puts that copy in the producing conv's kernel.

Why: MobileNetV2's layers are a 1x1 conv expanding the channels, a depthwise 3x3 conv and a 1x1
conv projecting them back. In NCHW the depthwise conv vectorizes along the image's width, with
strided loads at stride 2 and part-filled vectors on 14- and 7-wide images; blocked, every tap is
one contiguous vector per 16 channels. Blocking only the depthwise conv would cost two copies per
layer, so its neighbours join the layout too, and MobileNetV2's 24-channel layers are padded to 32
so that no copy is left between its blocks, as in ONNX Runtime's NCHWc graph transformer.
"""

from __future__ import annotations

from collections.abc import Callable

from compiler import nchwc, topi
from compiler.graph.ir import Call, Constant, Module, Node, name_supply, rewrite
from compiler.graph.op import OPS, Pattern, attr_int, call

CBLOCK = 16
_WINDOW = ("strides", "padding", "dilation")
# What may run on blocked tensors: ops of one element that keep a padding channel's value finite,
# so that the zero weights reading it give zero (log, division and power could make it inf or NaN).
_UNARY_UNSAFE = frozenset(("log",))
_BINARY = frozenset(("add", "subtract", "multiply", "maximum", "minimum"))
Fresh = Callable[[str], str]


def nchwc_layout(module: Module) -> Module:
    feeds = _feeding_depthwise(module)
    fresh = name_supply(module)

    def replace(node: Node, args: tuple[Node, ...]) -> Node | None:
        if not isinstance(node, Call):
            return None
        source = _blocked_source(args[0]) if args else None
        if _depthwise(node):
            channels = node.type.shape[1]
            if source is not None and source.type.shape[4] == CBLOCK:
                return _blocked_depthwise(node, source, fresh)
            if channels % CBLOCK == 0:
                return _blocked_depthwise(node, args[0], fresh)
            return None
        if _dense(node) and (source is not None or id(node) in feeds):
            return _blocked_dense(node, args[0] if source is None else source, fresh)
        return _blocked_elementwise(node, args, fresh)

    return rewrite(module, replace)


def _copied_back(node: Call, blocked: Node) -> Call:
    """The copy of `blocked` back to NCHW, standing for `node` (its name, its channels)."""
    return call(node.name, "from_nchwc", [blocked], {"channels": node.type.shape[1]})


def _window(node: Call) -> dict[str, object]:
    return {k: v for k, v in node.attrs.items() if k in _WINDOW}


def _blocked_depthwise(node: Call, data: Node, fresh: Fresh) -> Call:
    """The conv on `data` (NCHW of whole blocks, or blocked and maybe padded), its filters padded
    to whole blocks."""
    weight = _constant(node.args[1])
    padded = nchwc.zero_padded(weight.data, 0, nchwc.whole_blocks(weight.data.shape[0], CBLOCK))
    packed = Constant(fresh(f"{weight.name}_nchwc"), nchwc.pack_depthwise(padded, CBLOCK))
    conv = call(fresh(f"{node.name}_nchwc"), "depthwise_conv2d_nchwc", [data, packed], _window(node))
    return _copied_back(node, conv)


def _blocked_dense(node: Call, data: Node, fresh: Fresh) -> Call:
    """The conv on `data` (NCHW, or blocked and maybe padded), its filters padded to whole blocks."""
    weight = _constant(node.args[1])
    K = nchwc.whole_blocks(weight.data.shape[0], CBLOCK)
    padded = nchwc.zero_padded(nchwc.zero_padded(weight.data, 0, K), 1, nchwc.channels(data.type.shape))
    packed = Constant(fresh(f"{weight.name}_nchwc"), topi.pack_kblock(padded, CBLOCK))
    conv = call(fresh(f"{node.name}_nchwc"), "conv2d_nchwc", [data, packed], _window(node))
    return _copied_back(node, conv)


def _constant(node: Node) -> Constant:
    assert isinstance(node, Constant)
    return node


def _conv_weights(node: Call) -> tuple[int, ...] | None:
    return node.args[1].type.shape if node.op == "conv2d" and isinstance(node.args[1], Constant) else None


def _depthwise(node: Call) -> bool:
    shape = _conv_weights(node)
    if shape is None:
        return False
    K, cg, _, _ = shape
    return cg == 1 and K == node.args[0].type.shape[1] == attr_int(node.attrs, "groups")


def _dense(node: Call) -> bool:
    return _conv_weights(node) is not None and attr_int(node.attrs, "groups") == 1


def _elementwise(node: Call) -> bool:
    """An op of one element at a time, whatever the layout, that keeps padding channels finite."""
    unary = OPS[node.op].pattern is Pattern.ELEMWISE and node.op not in _UNARY_UNSAFE
    return unary or node.op in _BINARY


def _feeding_depthwise(module: Module) -> set[int]:
    """The dense convs whose output reaches a depthwise conv's input through elementwise ops whose
    other operands are constants."""
    found: set[int] = set()
    for node in module.calls():
        if not (isinstance(node, Call) and _depthwise(node)):
            continue
        source = node.args[0]
        while isinstance(source, Call) and _elementwise(source):
            variables = [a for a in source.args if not isinstance(a, Constant)]
            if len(variables) != 1:
                break
            source = variables[0]
        if isinstance(source, Call) and _dense(source):
            found.add(id(source))
    return found


def _blocked_source(node: Node | None) -> Node | None:
    """The blocked tensor that `node` copies back to NCHW, if it is such a copy."""
    return node.args[0] if isinstance(node, Call) and node.op == "from_nchwc" else None


def _blocked_elementwise(node: Call, args: tuple[Node, ...], fresh: Fresh) -> Call | None:
    """An elementwise op whose arguments are copies back to NCHW (all of the op's own shape, in the
    same blocks) or constants, computed on the blocked tensors (constants blocked along channels)
    and then copied back; None unless one argument is such a copy and all can follow."""
    if not _elementwise(node):
        return None
    sources = [_blocked_source(a) for a in args]
    shapes = {s.type.shape for s in sources if s is not None}
    copies = [a for a, s in zip(args, sources) if s is not None]
    if len(shapes) != 1 or any(c.type.shape != node.type.shape for c in copies):
        return None
    (shape,) = shapes
    moved: list[Node] = []
    for arg, source in zip(args, sources):
        follows = source if source is not None else _blocked_constant(arg, shape, fresh)
        if follows is None:
            return None
        moved.append(follows)
    return _copied_back(node, call(fresh(f"{node.name}_nchwc"), node.op, moved, node.attrs))


def _blocked_constant(node: Node, shape: tuple[int, ...], fresh: Fresh) -> Node | None:
    """A constant that broadcasts against NCHW tensors per channel, or as a scalar, as one that
    broadcasts the same way against the blocked `shape` (zero on padding channels); None for any
    other node."""
    if not isinstance(node, Constant) or node.data.ndim > 4:
        return None
    data = node.data.reshape((1,) * (4 - node.data.ndim) + node.data.shape)
    if data.shape[0] != 1 or data.shape[2:] != (1, 1):
        return None
    if data.shape[1] == 1:
        return node
    padded = nchwc.zero_padded(data, 1, shape[1] * shape[4])
    return Constant(fresh(f"{node.name}_nchwc"), nchwc.to_nchwc_numpy(padded, shape[4]))
