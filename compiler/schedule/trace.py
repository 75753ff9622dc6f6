"""Traces: the recorded primitive calls of a schedule, with the decisions of its sampling calls.

A trace is plain data. It prints as runnable Python, serializes to versioned JSON, and replays onto
a fresh schedule of the same function, optionally with some decisions replaced (that is how the
search mutates candidates). Random variables are named by definition order: b0 for blocks, l1 for
loops, v2 for sampled integers, so the same trace always names things the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compiler.ir import PrimFunc
    from compiler.schedule.schedule import Schedule

SCHEMA_VERSION = 1
SAMPLING_KINDS = ("sample_perfect_tile", "sample_categorical", "sample_compute_location")
INSTRUCTION_KINDS = SAMPLING_KINDS + (
    "get_block",
    "get_loops",
    "get_child_blocks",
    "split",
    "fuse",
    "reorder",
    "parallel",
    "vectorize",
    "unroll",
    "compute_at",
    "reverse_compute_at",
    "compute_inline",
    "reverse_compute_inline",
    "cache_read",
    "cache_write",
    "decompose_reduction",
    "annotate",
)
# Kinds whose call returns a list, even of one element (which prints as `(l1,) = ...`).
LIST_KINDS = ("get_loops", "get_child_blocks", "split", "sample_perfect_tile")


class TraceError(ValueError):
    """A trace (usually its JSON) is malformed."""


@dataclass(frozen=True)
class Instruction:
    """One primitive call. `args` are JSON values, with random variables encoded as {"rv": "l3"}."""

    kind: str
    args: dict[str, Any]
    outputs: tuple[str, ...]
    decision: Any = None

    def as_python(self) -> str:
        args = [_py(x) for x in self.args.get("loops", [])]  # fuse/reorder take loops as *args
        args += [f"{k}={_py(v)}" for k, v in self.args.items() if k != "loops"]
        if self.kind in SAMPLING_KINDS:
            args.append(f"decision={self.decision!r}")
        call = f"sch.{self.kind}({', '.join(args)})"
        if len(self.outputs) == 1 and self.kind in LIST_KINDS:
            return f"({self.outputs[0]},) = {call}"
        return f"{', '.join(self.outputs)} = {call}" if self.outputs else call


def _py(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"rv"}:
        return str(value["rv"])
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    return repr(value)


@dataclass(frozen=True)
class Trace:
    instructions: tuple[Instruction, ...] = ()

    def __str__(self) -> str:
        return "\n".join(inst.as_python() for inst in self.instructions)

    def append(self, inst: Instruction) -> Trace:
        return Trace(self.instructions + (inst,))

    @property
    def decisions(self) -> dict[int, Any]:
        """Instruction index -> decision, for every sampling instruction."""
        return {i: inst.decision for i, inst in enumerate(self.instructions) if inst.kind in SAMPLING_KINDS}

    def with_decision(self, index: int, decision: Any) -> Trace:
        insts = list(self.instructions)
        if insts[index].kind not in SAMPLING_KINDS:
            raise TraceError(f"instruction {index} ({insts[index].kind}) has no decision")
        insts[index] = replace(insts[index], decision=decision)
        return Trace(tuple(insts))

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

        bad = set(decisions or {}) - set(self.decisions)
        if bad:
            raise TraceError(f"decisions given for instruction(s) {sorted(bad)}, which sample nothing")
        sch = Schedule(func, seed=seed)
        env: dict[str, Any] = {}
        for index, inst in enumerate(self.instructions):
            if inst.kind not in INSTRUCTION_KINDS:  # a Trace built in code skipped from_json's checks
                raise TraceError(f"instruction {index}: unknown kind {inst.kind!r}")
            kwargs = {k: _decode(v, env) for k, v in inst.args.items()}
            if inst.kind in SAMPLING_KINDS:
                kwargs["decision"] = (decisions or {}).get(index, inst.decision)
            positional = kwargs.pop("loops", [])
            try:
                result = getattr(sch, inst.kind)(*positional, **kwargs)
            except TypeError as e:
                raise TraceError(f"instruction {index} ({inst.kind}): {e}") from None
            outs = result if isinstance(result, list) else ([] if result is None else [result])
            if len(outs) != len(inst.outputs):
                raise TraceError(
                    f"instruction {index} ({inst.kind}) gave {len(outs)} outputs, "
                    f"the trace recorded {len(inst.outputs)}"
                )
            env.update(zip(inst.outputs, outs))
        return sch


def _decode(value: Any, env: dict[str, Any]) -> Any:
    if isinstance(value, dict) and set(value) == {"rv"}:
        if value["rv"] not in env:
            raise TraceError(f"random variable {value['rv']} is used before it is defined")
        return env[value["rv"]]
    if isinstance(value, list):
        return [_decode(v, env) for v in value]
    return value


def _instruction(index: int, raw: Any) -> Instruction:
    where = f"trace JSON: instruction {index}"
    if not isinstance(raw, dict) or set(raw) != {"kind", "args", "outputs", "decision"}:
        raise TraceError(f"{where} must have exactly kind, args, outputs, decision")
    if raw["kind"] not in INSTRUCTION_KINDS:
        raise TraceError(f"{where}: unknown kind {raw['kind']!r}")
    if not isinstance(raw["args"], dict) or not all(isinstance(k, str) for k in raw["args"]):
        raise TraceError(f"{where}: args must be an object")
    if not isinstance(raw["outputs"], list) or not all(isinstance(o, str) for o in raw["outputs"]):
        raise TraceError(f"{where}: outputs must be a list of names")
    if raw["decision"] is not None and raw["kind"] not in SAMPLING_KINDS:
        raise TraceError(f"{where}: {raw['kind']} samples nothing, yet has decision {raw['decision']!r}")
    return Instruction(raw["kind"], raw["args"], tuple(raw["outputs"]), raw["decision"])
