"""The machine a program is specialized for: what LLVM compiles for (triple, CPU, features) and how
many cores its parallel loops get, with what follows from them (vector width and registers).

One `Target` is passed to every place that specializes a program: the search space sizes register
tiles from it, the cost model's features describe it, the build compiles for it. Only the edges (the
CLI, `tune()`, a worker measuring on its own machine, `compiler.build` for library users) take the
host's; a coordinator uses the target its workers registered.

`mcpu` is LLVM's name of the CPU ("znver4", "skylake-avx512"); the marketing model string
("AMD EPYC 9454") is the `Hardware`'s `cpu_model`, which no code specializes on: it says to a person
what the machine is. Records are comparable only on one kind of hardware, which the target's key names.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import platform
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import llvmlite.binding as llvm

from compiler.dtypes import ITEMSIZE


@cache
def init_llvm() -> None:
    """LLVM's native target must be initialized once per process before any code generation."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@dataclass(frozen=True)
class Target:
    triple: str
    mcpu: str  # LLVM's CPU name
    features: str  # LLVM's feature string: "+avx2,-avx512f,..."
    cores: int  # threads a parallel loop runs on

    @classmethod
    def host(cls, cores: int | None = None) -> Target:
        """This machine's CPU with every feature it has (e.g. AVX-512), as LLVM sees it, and the
        cores this process may run on (its CPU affinity)."""
        init_llvm()
        return cls(
            llvm.get_process_triple(),
            llvm.get_host_cpu_name(),
            llvm.get_host_cpu_features().flatten(),
            cores or len(os.sched_getaffinity(0)),
        )

    @property
    def feature_set(self) -> frozenset[str]:
        return parse_features(self.features)

    @property
    def vector_bits(self) -> int:
        """Width of the widest vector registers worth using."""
        found = self.feature_set
        if "avx512f" in found:
            return 512
        if "avx2" in found or "avx" in found:
            return 256
        return 128

    @property
    def vector_registers(self) -> int:
        """How many vector registers the code generator may fill: AVX-512 doubles x86's 16, and
        AArch64 (NEON) has 32."""
        return 32 if {"avx512f", "neon"} & self.feature_set else 16

    def vector_lanes(self, dtype: str = "float32") -> int:
        """Elements of `dtype` in one vector register."""
        return self.vector_bits // (8 * ITEMSIZE[dtype])

    @property
    def key(self) -> str:
        """A short stable identity of the kind of machine: records measured on one key are
        comparable, and kernels tuned for it are valid on every machine of the key."""
        digest = hashlib.sha256(f"{self.triple}|{self.mcpu}|{self.features}".encode()).hexdigest()
        return f"{self.mcpu}-{digest[:12]}-{self.cores}c"

    def target_machine(self, *, pic: bool = False) -> llvm.TargetMachine:
        """A fresh TargetMachine (each JIT engine needs its own). `pic` makes position-independent code
        in the small code model, which links into a shared library (the JIT's default, the large code
        model, would need text relocations there) and which the JIT loads as well."""
        init_llvm()
        llvm_target = llvm.Target.from_triple(self.triple)
        if pic:
            return llvm_target.create_target_machine(
                cpu=self.mcpu, features=self.features, opt=3, reloc="pic", codemodel="small"
            )
        return llvm_target.create_target_machine(cpu=self.mcpu, features=self.features, opt=3, jit=True)

    def emulated(self, spec: str) -> Target:
        """This target narrowed to another CPU: `spec` is "CPU[,CHANGE...]", where CPU is an LLVM CPU
        name and each change turns a feature on ("+fma", only one this target has) or off ("-avx512f",
        or "-avx512*" for every feature matching the pattern). The features of CPUs listed in
        `NARROWER_CPUS` that this target has and they lack go off by themselves (`znver3`: AVX2, no
        AVX-512). Code for the result runs here, so AVX2 code can be tuned on an AVX-512 machine.

        The feature string stays complete and explicit (every feature + or -), so the CPU name sets
        only the instruction scheduling model: it can never turn on a feature this machine lacks."""
        cpu, *changes = (part.strip() for part in spec.split(","))
        if not cpu:
            raise ValueError(f"target {spec!r}: name a CPU first, e.g. znver3 or x86-64-v3")
        flags = {f[1:]: f[0] == "+" for f in self.features.split(",") if f[:1] in "+-" and len(f) > 1}
        for pattern in NARROWER_CPUS.get(cpu, ()):
            flags.update((f, False) for f in flags if fnmatch.fnmatchcase(f, pattern))
        for change in changes:
            _apply_feature_change(flags, change, spec)
        features = ",".join(("+" if on else "-") + name for name, on in flags.items())
        return Target(self.triple, cpu, features, self.cores)


# CPUs without features that newer hosts have: the patterns of the features to turn off (LLVM turns
# a feature back on when another one that implies it stays on, so the implying ones go off too)
NARROWER_CPUS: dict[str, tuple[str, ...]] = {
    **{
        cpu: ("avx512*", "amx*", "avx10*")
        for cpu in ("x86-64-v3", "haswell", "broadwell", "skylake", "alderlake", "znver1", "znver2", "znver3")
    },
    # and what LLVM would turn AVX back on for: vaes, vpclmulqdq, f16c, xop, sha512, sm3, sm4 imply it
    "x86-64-v2": (
        *("avx*", "amx*", "fma*", "f16c", "bmi", "bmi2", "lzcnt", "movbe"),
        *("vaes", "vpclmulqdq", "xop", "sha512", "sm3", "sm4"),
    ),
}


def _apply_feature_change(flags: dict[str, bool], change: str, spec: str) -> None:
    name = change[1:]
    if change[:1] not in ("+", "-") or not name:
        raise ValueError(f"target {spec!r}: {change!r} is not +FEATURE or -FEATURE")
    if change[0] == "+":
        if not flags.get(name):
            raise ValueError(f"target {spec!r}: this machine has no {name!r} to turn on")
        return
    matching = [f for f in flags if fnmatch.fnmatchcase(f, name)]
    if not matching:
        raise ValueError(f"target {spec!r}: no feature matches {name!r}")
    for f in matching:
        flags[f] = False


def parse_features(features: str) -> frozenset[str]:
    """The features an LLVM feature string ("+avx2,-avx512f,...") turns on."""
    return frozenset(f[1:] for f in features.split(",") if f.startswith("+"))


@dataclass(frozen=True)
class Hardware:
    """A kind of machine: the target programs are specialized for, and the CPU's model name, which
    says to a person what the machine is."""

    target: Target
    cpu_model: str

    @property
    def key(self) -> str:
        return self.target.key


def host_hardware(emulate: str | None = None) -> Hardware:
    """This machine, with the cores this process may use (pin it first to measure on fewer); with
    `emulate` ("znver3", "x86-64-v3,-fma": see `Target.emulated`), this machine narrowed to another
    CPU's features: another kind of hardware, whose records are kept apart."""
    if emulate is None:
        return Hardware(Target.host(), cpu_model())
    return Hardware(Target.host().emulated(emulate), f"{cpu_model()} as {emulate}")


def cpu_model() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
