"""Traces: the recorded primitive calls of a schedule, with the decisions of its sampling calls.

A trace is plain data. It prints as runnable Python, serializes to versioned JSON, and replays onto
a fresh schedule of the same function, optionally with some decisions replaced (that is how the
search mutates candidates). Random variables are named by definition order: b0 for blocks, l1 for
loops, v2 for sampled integers, so the same trace always names things the same way. Everything a
trace knows about a primitive comes from its registered kind (instruction.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from compiler.schedule.errors import TraceError
from compiler.schedule.instruction import Instruction, InstructionKind, is_ref, lookup
from compiler.schedule.rv import RV

if TYPE_CHECKING:
    from compiler.ir import PrimFunc
    from compiler.schedule.schedule import Schedule

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Trace:
    instructions: tuple[Instruction, ...] = ()

    def __str__(self) -> str:
        return "\n".join(_checked(i, inst).as_python(inst) for i, inst in enumerate(self.instructions))

    def append(self, inst: Instruction) -> Trace:
        return Trace(self.instructions + (inst,))

    @property
    def decisions(self) -> dict[int, Any]:
        """Instruction index -> decision, for every sampling instruction."""
        return {
            i: inst.decision
            for i, inst in enumerate(self.instructions)
            if _kind(i, inst).decision is not None
        }

    def with_decision(self, index: int, decision: Any) -> Trace:
        inst = self.instructions[index]
        if _kind(index, inst).decision is None:
            raise TraceError(f"instruction {index} ({inst.kind}) has no decision")
        changed = replace(inst, decision=decision)
        _checked(index, changed)
        return Trace(self.instructions[:index] + (changed,) + self.instructions[index + 1 :])

    def simplified(self) -> Trace:
        """The trace without the pure instructions (queries, sampling) whose outputs nothing uses.

        Replaying it gives the same program and, for the sampling instructions it keeps, the same
        decisions. Its random variables are renamed in definition order, as its replay names them, so
        it is the trace its own replay records. Uses follow definitions, so walking backwards sees
        every use of an instruction before the instruction: one pass drops whole chains, such as a
        get_child_blocks nothing uses and then the get_block only it used."""
        used: set[str] = set()
        kept: list[tuple[InstructionKind, Instruction]] = []
        for index in reversed(range(len(self.instructions))):
            inst = self.instructions[index]
            kind = _checked(index, inst)
            if kind.pure and used.isdisjoint(inst.outputs):
                continue
            used |= inst.uses()
            kept.append((kind, inst))
        return Trace(_renamed(kept[::-1]))

    def to_json(self) -> dict[str, Any]:
        """A JSON-compatible dict (json.dumps it to store it)."""
        return {
            "version": SCHEMA_VERSION,
            "instructions": [
                {"kind": i.kind, "args": i.args, "outputs": list(i.outputs), "decision": i.decision}
                for i in self.instructions
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> Trace:
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as e:
                raise TraceError(f"trace JSON does not parse: {e}") from None
        if not isinstance(data, dict) or data.get("version") != SCHEMA_VERSION:
            raise TraceError(f"trace JSON must be an object with version {SCHEMA_VERSION}")
        raw = data.get("instructions")
        if not isinstance(raw, list):
            raise TraceError("trace JSON: 'instructions' must be a list")
        return cls(tuple(_instruction(k, r) for k, r in enumerate(raw)))

    def apply(self, func: PrimFunc, decisions: dict[int, Any] | None = None, seed: int = 0) -> Schedule:
        """Replay onto a fresh schedule of `func`. `decisions` replace recorded ones (by instruction
        index); a sampling instruction whose decision is None samples anew from `seed`."""
        from compiler.schedule.schedule import Schedule

        decisions = decisions or {}
        bad = set(decisions) - set(self.decisions)
        if bad:
            raise TraceError(f"decisions given for instruction(s) {sorted(bad)}, which sample nothing")
        sch = Schedule(func, seed=seed)
        env: dict[str, RV] = {}
        for index, inst in enumerate(self.instructions):
            kind = _checked(index, inst)  # a Trace built in code skipped from_json's checks
            try:
                args = kind.decode(inst, env)
            except TraceError as e:
                raise TraceError(f"instruction {index} ({inst.kind}): {e}") from None
            outs = kind.outputs.of(kind.apply(sch, args, decisions.get(index, inst.decision)))
            if len(outs) != len(inst.outputs):
                raise TraceError(
                    f"instruction {index} ({inst.kind}) gave {len(outs)} outputs, "
                    f"the trace recorded {len(inst.outputs)}"
                )
            env.update(zip(inst.outputs, outs))
        return sch


def _kind(index: int, inst: Instruction, where: str = "instruction") -> InstructionKind:
    try:
        return lookup(inst.kind)
    except TraceError as e:
        raise TraceError(f"{where} {index}: {e}") from None


def _checked(index: int, inst: Instruction, where: str = "instruction") -> InstructionKind:
    kind = _kind(index, inst, where)
    try:
        kind.check(inst)
    except TraceError as e:
        raise TraceError(f"{where} {index} ({inst.kind}): {e}") from None
    return kind


def _renamed(insts: list[tuple[InstructionKind, Instruction]]) -> tuple[Instruction, ...]:
    """Outputs renamed by definition order and type, as a Schedule names them, and every use with
    them: the simplified trace is the one its own replay records."""
    names: dict[str, str] = {}
    out: list[Instruction] = []
    defined = 0
    for kind, inst in insts:
        prefix = kind.outputs.rv.PREFIX if kind.outputs.rv else ""
        outputs = tuple(f"{prefix}{defined + k}" for k in range(len(inst.outputs)))
        defined += len(outputs)
        args = {key: _rename(value, names) for key, value in inst.args.items()}
        names.update(zip(inst.outputs, outputs))
        out.append(replace(inst, args=args, outputs=outputs))
    return tuple(out)


def _rename(value: Any, names: dict[str, str]) -> Any:
    if is_ref(value):
        return {"rv": names.get(value["rv"], value["rv"])}
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    return value


def _instruction(index: int, raw: Any) -> Instruction:
    where = f"trace JSON: instruction {index}"
    if not isinstance(raw, dict) or set(raw) != {"kind", "args", "outputs", "decision"}:
        raise TraceError(f"{where} must have exactly kind, args, outputs, decision")
    if not isinstance(raw["args"], dict) or not all(isinstance(k, str) for k in raw["args"]):
        raise TraceError(f"{where}: args must be an object")
    if not isinstance(raw["outputs"], list) or not all(isinstance(o, str) for o in raw["outputs"]):
        raise TraceError(f"{where}: outputs must be a list of names")
    inst = Instruction(raw["kind"], raw["args"], tuple(raw["outputs"]), raw["decision"])
    _checked(index, inst, "trace JSON: instruction")
    return inst
