"""Operator fusion with TVM's rules: every graph-operator call ends up in exactly one fused PrimFunc,
called from `main` through a CallTIR.

Groups grow from a root (each call not yet in a group, in dataflow order) towards the root's
immediate post-dominator: when every call on every path from the group's output to that
post-dominator may join, they all join, and the group grows again from there. A post-dominator
makes this safe for diamonds (gelu's and layer norm's decompositions read one tensor twice): every
user of a node on those paths is on them too, so no value escapes the group but its output and
no cycle between groups can appear. What may join depends on the root's pattern:
- a conv2d/matmul (ANCHOR) or a reduction takes elementwise and broadcast ops of its output's shape
  (bias, batch-norm scale, residual add, activation), reshapes that only add or drop unit
  dimensions, and the copy of a blocked output back to NCHW (`from_nchwc`): the tuner tiles the
  anchor and fuses the epilogue into its output tile;
- elementwise, broadcast and injective roots take further elementwise, broadcast and injective ops;
- anchors and reductions never join another group;
- an extern call (`CallDPSPacked`) is no operator: it joins no group and stays as it is, opaque.
A group becomes one PrimFunc by composing its operators' te computes over placeholders for the
group's arguments (activations and weights alike), so identical layers give identical functions
(one entry in `Module.funcs`, by structural hash).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from compiler import te
from compiler.graph.ir import Call, CallTIR, DPSCall, Module, Node, with_args
from compiler.graph.op import OPS, Pattern
from compiler.ir import PrimFunc
from compiler.names import unique_name

_EPILOGUE = (Pattern.ELEMWISE, Pattern.BROADCAST)
_INJECTIVE_CHAIN = (Pattern.ELEMWISE, Pattern.BROADCAST, Pattern.INJECTIVE)
_EXIT = -1  # the virtual node every output flows into


@dataclass
class Group:
    root: Call
    members: list[Call] = field(default_factory=list)

    @property
    def output(self) -> Call:
        return self.members[-1]


def fuse(module: Module) -> Module:
    """`module` with every Call replaced by a CallTIR of a fused PrimFunc (CallTIRs and extern calls
    are kept)."""
    groups = _partition(module)
    return _lower_groups(module, groups)


def _pattern(node: Node) -> Pattern | None:
    return OPS[node.op].pattern if isinstance(node, Call) else None


def _partition(module: Module) -> list[Group]:
    nodes = module.nodes()
    order = {id(n): k for k, n in enumerate(nodes)}
    users = module.users()
    ipdom = _post_dominators(module, nodes, users, order)
    assigned: dict[int, Group] = {}
    groups: list[Group] = []
    for node in nodes:
        if not isinstance(node, Call) or id(node) in assigned:
            continue
        group = Group(node, [node])
        assigned[id(node)] = group
        groups.append(group)
        _grow(group, nodes, order, users, ipdom, assigned)
    return groups


def _grow(
    group: Group,
    nodes: list[Node],
    order: dict[int, int],
    users: dict[int, list[Node]],
    ipdom: dict[int, int],
    assigned: dict[int, Group],
) -> None:
    root_pattern = OPS[group.root.op].pattern
    allowed = _EPILOGUE if root_pattern in (Pattern.ANCHOR, Pattern.REDUCTION) else _INJECTIVE_CHAIN
    if root_pattern == Pattern.OPAQUE:
        return
    while True:
        out = group.output
        target = ipdom[id(out)]
        if target == _EXIT:
            return
        path = _between(out, nodes[target], users)
        if not all(_may_join(n, group, allowed, root_pattern, assigned) for n in path):
            return
        for n in sorted(path, key=lambda n: order[id(n)]):
            assert isinstance(n, Call)
            group.members.append(n)
            assigned[id(n)] = group


def _may_join(
    node: Node, group: Group, allowed: tuple[Pattern, ...], root: Pattern, assigned: dict[int, Group]
) -> bool:
    if not isinstance(node, Call) or id(node) in assigned:
        return False
    if root not in (Pattern.ANCHOR, Pattern.REDUCTION):
        return OPS[node.op].pattern in allowed
    # An epilogue runs over the anchor's output tile: it must have the group's output shape, up to
    # unit dimensions, which a reshape may add or drop (PyTorch wraps each Linear in such views);
    # a blocked conv's copy back to NCHW visits the same tile in another order.
    shape = _without_units(group.output.type.shape)
    same_shape = _without_units(node.type.shape) == shape
    unit_reshape = node.op == "reshape" and _without_units(node.args[0].type.shape) == shape
    copy_back = node.op == "from_nchwc" and _without_units(node.args[0].type.shape) == shape
    return (same_shape and (OPS[node.op].pattern in allowed or unit_reshape)) or copy_back


def _without_units(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def _between(source: Node, sink: Node, users: dict[int, list[Node]]) -> list[Node]:
    """Every node on a path from `source` (excluded) to its post-dominator `sink` (included): since
    every path from `source` passes through `sink`, that is everything reachable before it."""
    found: dict[int, Node] = {}
    stack = list(users[id(source)])
    while stack:
        n = stack.pop()
        if id(n) in found:
            continue
        found[id(n)] = n
        if n is not sink:
            stack.extend(users[id(n)])
    return list(found.values())


def _post_dominators(
    module: Module, nodes: list[Node], users: dict[int, list[Node]], order: dict[int, int]
) -> dict[int, int]:
    """Each node's immediate post-dominator, as an index into `nodes` (or _EXIT), computed in reverse
    dataflow order as the nearest common post-dominator of its users (outputs flow into _EXIT)."""
    ipdom: dict[int, int] = {}
    depth: dict[int, int] = {_EXIT: 0}
    outputs = {id(o) for o in module.outputs}

    def common(a: int, b: int) -> int:
        while a != b:
            if depth[a] < depth[b]:
                a, b = b, a
            a = ipdom[id(nodes[a])]
        return a

    for k in range(len(nodes) - 1, -1, -1):
        node = nodes[k]
        successors = [order[id(u)] for u in users[id(node)]] + ([_EXIT] if id(node) in outputs else [])
        if not successors:
            dom = _EXIT
        else:
            dom = successors[0]
            for s in successors[1:]:
                dom = common(dom, s)
        ipdom[id(node)] = dom
        depth[k] = depth[dom] + 1
    return ipdom


def _lower_groups(module: Module, groups: list[Group]) -> Module:
    funcs: dict[str, PrimFunc] = dict(module.funcs)
    by_hash = {f.structural_hash(): name for name, f in funcs.items()}
    replaced: dict[int, Node] = {}
    group_of_output = {id(g.output): g for g in groups}
    for node in module.nodes():
        if id(node) in group_of_output:
            group = group_of_output[id(node)]
            func, args = _group_func(group)
            name = _func_name(func, funcs, by_hash)
            ops = tuple(m.op for m in group.members)
            flops = sum(OPS[m.op].flops([a.type for a in m.args], m.type, m.attrs) for m in group.members)
            new_args = tuple(replaced.get(id(a), a) for a in args)
            replaced[id(node)] = CallTIR(node.name, new_args, node.type, func=name, ops=ops, flops=flops)
        elif isinstance(node, DPSCall):
            replaced[id(node)] = with_args(node, [replaced.get(id(a), a) for a in node.args])
    outputs = tuple(replaced.get(id(o), o) for o in module.outputs)
    return replace(module, outputs=outputs, funcs=funcs)


def _group_func(group: Group) -> tuple[PrimFunc, list[Node]]:
    """The group's PrimFunc (parameters: its arguments in first-use order, then its output) and those
    arguments. Tensor names depend only on the group's operators, not on the model's node names."""
    inside = {id(m) for m in group.members}
    args: list[Node] = []
    tensors: dict[int, te.Tensor] = {}
    for m in group.members:
        for a in m.args:
            if id(a) not in inside and id(a) not in tensors:
                tensors[id(a)] = te.placeholder(a.type.shape, a.type.dtype, name=f"p{len(args)}")
                args.append(a)
    used: set[str] = {f"p{k}" for k in range(len(args))}
    for m in group.members:
        name = unique_name(m.op, used, sep="_")
        used.add(name)
        tensors[id(m)] = OPS[m.op].compute([tensors[id(a)] for a in m.args], m.attrs, name)
    placeholders = [tensors[id(a)] for a in args]
    name = "fused_" + "_".join(list(dict.fromkeys(m.op for m in group.members))[:4])
    func = te.create_prim_func([*placeholders, tensors[id(group.output)]], name=name)
    return func, args


def _func_name(func: PrimFunc, funcs: dict[str, PrimFunc], by_hash: dict[str, str]) -> str:
    digest = func.structural_hash()
    if digest not in by_hash:
        name = unique_name(func.name, set(funcs), sep="_")
        funcs[name] = func
        by_hash[digest] = name
    return by_hash[digest]
