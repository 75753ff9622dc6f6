"""Readable text of a graph module, close to TVMScript's Relax in spirit: `main` over its inputs,
one line per call (graph operators by name, fused kernels as `call_tir` and extern functions as
`call_dps_packed`, both in destination-passing style), the weights as named constants, and every
PrimFunc the module holds after it."""

from __future__ import annotations

from dataclasses import replace

from compiler.graph.ir import Call, CallDPSPacked, CallTIR, Constant, Input, Module, Node
from compiler.printer import script


def module_script(module: Module) -> str:
    nodes = module.nodes()
    params = ", ".join(f"{n.name}: {n.type}" for n in module.inputs)
    outs = ", ".join(str(o.type) for o in module.outputs)
    lines = [f"def main({params}) -> ({outs}):"]
    constants = [n for n in nodes if isinstance(n, Constant)]
    if constants:
        total = sum(c.type.nbytes for c in constants)
        lines.append(f"    # {len(constants)} constants, {total / 1e6:.2f} MB:")
        lines += [f"    #   {c.name}: {c.type}" for c in constants]
    lines += [f"    {n.name} = {_call_text(n)}" for n in nodes if not isinstance(n, (Input, Constant))]
    lines.append(f"    return ({', '.join(o.name for o in module.outputs)},)")
    for name, func in module.funcs.items():
        lines += ["", script(replace(func, name=name))]
    return "\n".join(lines)


def _call_text(node: Node) -> str:
    args = ", ".join(a.name for a in node.args)
    if isinstance(node, Call):
        attrs = f", {node.attrs}" if len(node.attrs) else ""
        return f"{node.op}({args}{attrs})  # {node.type}"
    if isinstance(node, CallTIR):
        fused = f"  # {' + '.join(node.ops)}" if node.ops else ""
        return f"call_tir({node.func}, ({args},), out={node.type}){fused}"
    if isinstance(node, CallDPSPacked):
        return f"call_dps_packed({node.func!r}, ({args},), out_sinfo={node.type})"
    raise TypeError(f"not a call: {type(node).__name__}")
