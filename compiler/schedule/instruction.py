"""Instructions and their kinds: what a trace knows about each schedule primitive, declared once.

In the spirit of TVM's InstructionKind registry, an `InstructionKind` says what a primitive's
arguments are (random variables or plain JSON, in the order they print and serialize), what it
returns (nothing, one random variable, or a list), whether it records a decision, whether it is pure
(no effect on the program, so a trace may drop it when nothing uses its outputs), and how to apply it
to a Schedule. Traces check, print, decode, replay and simplify instructions through their kind and
nothing else; no code switches on kind names. The kinds are registered in `kinds.py`, which the
package imports, so the registry is complete once `compiler.schedule` is.

To add a primitive:
1. write the transform, a function from PrimFunc to PrimFunc, in the module of its family
   (loop_transform.py, cache.py, inline.py, compute_location.py, reduction.py) or a new one;
2. add a typed method to `Schedule` that checks its handles, calls the transform and records the call
   with `self._record(kinds.YOUR_KIND, {...}, outputs)`;
3. register its kind in `kinds.py`: its arguments, outputs, purity and how to apply it;
4. add an example call to `EXAMPLES` in tests/compiler/test_schedule_instruction.py (the test fails
   until every registered kind has one), which checks it round-trips through JSON, prints as Python
   and replays, and a test of what the transform does in its own tests/compiler/test_schedule_*.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compiler.schedule.errors import TraceError
from compiler.schedule.rv import RV, BlockRV, IntRV, LoopRV

if TYPE_CHECKING:
    from compiler.schedule.schedule import Schedule

Env = Mapping[str, RV]


def is_ref(value: Any) -> bool:
    """Whether a JSON value refers to a random variable, as {"rv": "l3"}."""
    return isinstance(value, dict) and set(value) == {"rv"} and isinstance(value["rv"], str)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or_ref(value: Any) -> bool:
    return is_int(value) or is_ref(value)


def _list_of(valid: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, list) and all(valid(v) for v in value)


@dataclass(frozen=True)
class ArgType:
    """Which JSON values an argument takes, and which random variables it may refer to.

    An argument that refers to none is an attribute (plain JSON); one that may is an input. Wherever a
    primitive takes an int it also takes a sampled int (an IntRV): the Schedule has always recorded a
    sampled int by name, whatever argument it was passed to, and stored traces must keep replaying."""

    expected: str
    valid: Callable[[Any], bool]
    refers_to: tuple[type, ...] = ()
    variadic: bool = False  # taken as *args (fuse, reorder), so printed positionally

    def decode(self, value: Any, env: Env) -> Any:
        """The value the primitive takes: references resolved to the handles they name."""
        if is_ref(value):
            return self._resolve(value["rv"], env)
        if isinstance(value, list):
            return [self.decode(v, env) for v in value]
        return value

    def _resolve(self, name: str, env: Env) -> RV:
        if name not in env:
            raise TraceError(f"random variable {name} is used before it is defined")
        rv = env[name]
        if not isinstance(rv, self.refers_to):
            raise TraceError(f"{name} is a {type(rv).__name__}, expected {self.expected}")
        return rv


BLOCK = ArgType("a block", is_ref, (BlockRV,))
LOOP = ArgType("a loop", is_ref, (LoopRV,))
BLOCK_OR_LOOP = ArgType("a block or a loop", is_ref, (BlockRV, LoopRV))
LOOPS = ArgType("a list of loops", _list_of(is_ref), (LoopRV,), variadic=True)
INT = ArgType("an int", _int_or_ref, (IntRV,))
INTS = ArgType("a list of ints", _list_of(_int_or_ref), (IntRV,))
FACTORS = ArgType("a list of ints and nulls", _list_of(lambda v: v is None or _int_or_ref(v)), (IntRV,))
NUMBERS = ArgType("a list of numbers", _list_of(lambda v: _int_or_ref(v) or isinstance(v, float)), (IntRV,))
SCALAR = ArgType(
    "a number, string or bool", lambda v: isinstance(v, int | float | str) or is_ref(v), (IntRV,)
)
STR = ArgType("a string", lambda v: isinstance(v, str))
BUFFER_REF = ArgType(
    'a buffer: ["read", i], ["write", 0] or its name',
    lambda v: (
        isinstance(v, str)
        or (isinstance(v, list) and len(v) == 2 and v[0] in ("read", "write") and is_int(v[1]))
    ),
)


@dataclass(frozen=True)
class Arg:
    name: str
    type: ArgType


@dataclass(frozen=True)
class Outputs:
    """What a primitive returns: nothing (`rv` None), one random variable of type `rv`, or a list of
    them (`many`), which stays a list even with one element and then prints as `(l1,) = ...`."""

    rv: type[BlockRV] | type[LoopRV] | type[IntRV] | None = None
    many: bool = False

    def of(self, result: Any) -> list[Any]:
        """The primitive's result as a list, one entry per output name."""
        if self.many:
            return list(result)
        return [] if self.rv is None else [result]

    def fits(self, count: int) -> bool:
        """Whether a trace may record `count` outputs (a list's length depends on the program)."""
        return self.many or count == (0 if self.rv is None else 1)


@dataclass(frozen=True)
class Decision:
    """What a sampling kind records. `valid(decision, args)` checks its shape against the
    instruction's JSON args; a decision of the right shape may still be stale (a tile that no longer
    divides its loop), which the primitive repairs on replay (see compiler.schedule.sampling)."""

    expected: str
    valid: Callable[[Any, Mapping[str, Any]], bool]


@dataclass(frozen=True)
class InstructionKind:
    """One primitive as traces see it. `apply(sch, args, decision)` calls the Schedule method with
    the decoded `args` (by name) and returns what it returns."""

    name: str
    args: tuple[Arg, ...]
    outputs: Outputs
    apply: Callable[[Schedule, dict[str, Any], Any], Any]
    pure: bool = False
    decision: Decision | None = None

    def instruction(
        self, args: Mapping[str, Any], outputs: Sequence[RV] = (), decision: Any = None
    ) -> Instruction:
        """The record of one call: handles become references, arguments keep the declared order."""
        return Instruction(
            self.name,
            {a.name: encode(args[a.name]) for a in self.args},
            tuple(o.rv for o in outputs),
            decision,
        )

    def check(self, inst: Instruction) -> None:
        """Raise TraceError naming the first way `inst` does not fit this kind."""
        names = [a.name for a in self.args]
        for key in inst.args:
            if key not in names:
                raise TraceError(f"unknown arg {key!r}; {self.name} takes {names}")
        for a in self.args:
            if a.name not in inst.args:
                raise TraceError(f"missing arg {a.name!r}")
            if not a.type.valid(inst.args[a.name]):
                raise TraceError(f"arg {a.name!r} must be {a.type.expected}, got {inst.args[a.name]!r}")
        if not self.outputs.fits(len(inst.outputs)):
            outs = list(inst.outputs)
            raise TraceError(f"{len(outs)} outputs {outs}, where {self.name} returns {self._returns()}")
        self._check_decision(inst)

    def _returns(self) -> str:
        if self.outputs.rv is None:
            return "nothing"
        return f"{'a list of ' if self.outputs.many else 'one '}{self.outputs.rv.__name__}"

    def _check_decision(self, inst: Instruction) -> None:
        if inst.decision is None:
            return
        if self.decision is None:
            raise TraceError(f"{self.name} samples nothing, yet has decision {inst.decision!r}")
        if not self.decision.valid(inst.decision, inst.args):
            raise TraceError(f"decision {inst.decision!r} is not {self.decision.expected}")

    def decode(self, inst: Instruction, env: Env) -> dict[str, Any]:
        """The arguments as the Schedule method takes them; TraceError names the arg that fails."""
        out = {}
        for a in self.args:
            try:
                out[a.name] = a.type.decode(inst.args[a.name], env)
            except TraceError as e:
                raise TraceError(f"arg {a.name!r}: {e}") from None
        return out

    def as_python(self, inst: Instruction) -> str:
        positional = [_py(v) for a in self.args if a.type.variadic for v in inst.args[a.name]]
        keywords = [f"{a.name}={_py(inst.args[a.name])}" for a in self.args if not a.type.variadic]
        if self.decision is not None:
            keywords.append(f"decision={inst.decision!r}")
        call = f"sch.{self.name}({', '.join(positional + keywords)})"
        if self.outputs.many and len(inst.outputs) == 1:
            return f"({inst.outputs[0]},) = {call}"
        return f"{', '.join(inst.outputs)} = {call}" if inst.outputs else call


@dataclass(frozen=True)
class Instruction:
    """One primitive call. `args` are JSON values, with random variables encoded as {"rv": "l3"}."""

    kind: str
    args: dict[str, Any]
    outputs: tuple[str, ...]
    decision: Any = None

    def as_python(self) -> str:
        kind = lookup(self.kind)
        kind.check(self)
        return kind.as_python(self)

    def uses(self) -> set[str]:
        """The names of the random variables this call takes."""
        return {name for value in self.args.values() for name in _refs(value)}


def encode(value: Any) -> Any:
    """A primitive's argument as JSON: handles, sampled ints included, by name."""
    if isinstance(value, BlockRV | LoopRV | IntRV):
        return {"rv": value.rv}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


def _refs(value: Any) -> list[str]:
    if is_ref(value):
        return [value["rv"]]
    if isinstance(value, list):
        return [name for v in value for name in _refs(v)]
    return []


def _py(value: Any) -> str:
    if is_ref(value):
        return str(value["rv"])
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    return repr(value)


_KINDS: dict[str, InstructionKind] = {}


def register(kind: InstructionKind) -> InstructionKind:
    """Add a kind to the registry. The errors are programming errors, raised at import."""
    names = [a.name for a in kind.args]
    if kind.name in _KINDS:
        raise ValueError(f"instruction kind {kind.name!r} is registered twice")
    if len(set(names)) != len(names):
        raise ValueError(f"instruction kind {kind.name!r} declares an argument twice: {names}")
    if kind.outputs.many and kind.outputs.rv is None:
        raise ValueError(f"instruction kind {kind.name!r} returns a list of nothing")
    _KINDS[kind.name] = kind
    return kind


def lookup(name: str) -> InstructionKind:
    kind = _KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise TraceError(f"unknown kind {name!r}")
    return kind


def registered() -> tuple[InstructionKind, ...]:
    return tuple(_KINDS.values())
