"""Which algorithm a 3x3 conv runs, Winograd or direct, chosen by measurement on each machine.

Why: the Winograd pass's rules were measured on cores with one 512-bit FMA port, where F(2x2, 3x3)
ran ResNet-18's 56x56 and 28x28 layers twice as fast as the direct conv. On a core with two ports (a
Rocket Lake) the direct conv in blocks of output channels reaches 80% of a peak twice as high and
runs the 56x56 layers as fast as Winograd, whose transforms gain nothing from the second port
(bench/RESULTS.md, fifteenth stop). So the tuner tunes both forms of every conv the rules would
compute by Winograd (`alternatives`), and a build takes, per conv, the form whose best record on its
machine is faster (`measured_direct`), as TVM's operator strategies pick among implementations by
their tuned records. Where either form has no record, the rules decide.

The two forms of a conv are found through their packed weights: the packing passes name the packed
constant after the conv's weights and the op (`pack_weights`), and fusion keeps it as an argument of
the conv's fused kernel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.graph.ir import Call, CallTIR, Constant, Module
from compiler.graph.passes import PASSES, optimize, winograd_convs
from compiler.graph.passes.winograd_convs import eligible
from compiler.ir import PrimFunc

if TYPE_CHECKING:
    from runner.hardware import Hardware
    from tuner.database import Database


@dataclass(frozen=True)
class Alternative:
    """One conv's two fused kernels: by Winograd, and direct in blocks of output channels."""

    conv: str  # the conv's node name, as `optimize(direct=...)` takes it
    winograd: PrimFunc
    direct: PrimFunc


@dataclass(frozen=True)
class Alternatives:
    """A model optimized both ways: every eligible conv by Winograd, and every one direct."""

    by_winograd: Module
    by_direct: Module
    convs: list[Alternative]


def alternatives(module: Module) -> Alternatives:
    """Both forms of every conv of `module` (operator calls, not yet optimized) that the rules compute
    by Winograd; none when it has no such conv or when a form cannot be found (a packed constant
    renamed because its name was taken)."""
    weights = winograd_weights(module)
    by_winograd = optimize(module)
    if not weights:
        return Alternatives(by_winograd, by_winograd, [])
    by_direct = optimize(module, direct=frozenset(weights))
    convs = []
    for conv, weight in weights.items():
        fast = _kernel_reading(by_winograd, f"{weight}_winograd")
        direct = _kernel_reading(by_direct, f"{weight}_kblock")
        if fast is not None and direct is not None:
            convs.append(Alternative(conv, fast, direct))
    return Alternatives(by_winograd, by_direct, convs)


def winograd_weights(module: Module) -> dict[str, str]:
    """The convs the rules compute by Winograd, each to its weights' name, in the module as the
    Winograd pass finds it (after the folding passes before it)."""
    for run in PASSES[: PASSES.index(winograd_convs)]:
        module = run(module)
    return {
        c.name: c.args[1].name
        for c in module.calls()
        if isinstance(c, Call) and eligible(c) and isinstance(c.args[1], Constant)
    }


def measured_direct(module: Module, database: Database | str, hardware: Hardware) -> frozenset[str]:
    """The convs of `module` whose direct kernel has a faster record on `hardware` than their
    Winograd kernel (records timed as layers of a forward pass): `optimize(direct=...)` of them."""
    from runner import TimingKind
    from tuner.database import Database
    from tuner.tune import best_record, open_database

    convs = alternatives(module).convs
    if not convs:
        return frozenset()
    db = database if isinstance(database, Database) else open_database(database)
    try:

        def secs(func: PrimFunc) -> float | None:
            best = best_record(db, func.structural_hash(), hardware.key, TimingKind.LAYER)
            return best.median_secs if best else None

        out = set()
        for a in convs:
            fast, direct = secs(a.winograd), secs(a.direct)
            if fast is not None and direct is not None and direct < fast:
                out.add(a.conv)
        return frozenset(out)
    finally:
        if not isinstance(database, Database):
            db.close()


def _kernel_reading(module: Module, constant: str) -> PrimFunc | None:
    for node in module.calls():
        if isinstance(node, CallTIR) and any(
            isinstance(a, Constant) and a.name == constant for a in node.args
        ):
            return module.funcs[node.func]
    return None
