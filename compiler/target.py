"""The CPU a kernel is compiled for: LLVM triple, CPU name and feature string.

Workers report their Target so a candidate is built for the machine that times it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache

import llvmlite.binding as llvm


@cache
def init_llvm() -> None:
    """LLVM's native target must be initialized once per process before any code generation."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@dataclass(frozen=True)
class Target:
    triple: str
    cpu: str
    features: str

    @classmethod
    def host(cls) -> Target:
        """This machine's CPU with every feature it has (e.g. AVX-512), as LLVM sees it."""
        init_llvm()
        return cls(
            llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        )

    @property
    def feature_set(self) -> frozenset[str]:
        return parse_features(self.features)

    @property
    def vector_bits(self) -> int:
        return vector_bits(self.feature_set)

    @property
    def vector_registers(self) -> int:
        return vector_registers(self.feature_set)

    @property
    def key(self) -> str:
        """A short stable identity: kernels tuned for one key are valid for the same key."""
        digest = hashlib.sha256(f"{self.triple}|{self.cpu}|{self.features}".encode()).hexdigest()
        return f"{self.cpu}-{digest[:12]}"

    def target_machine(self) -> llvm.TargetMachine:
        """A fresh TargetMachine (each JIT engine needs its own)."""
        init_llvm()
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu, features=self.features, opt=3, jit=True
        )


def parse_features(features: str) -> frozenset[str]:
    """The features an LLVM feature string ("+avx2,-avx512f,...") turns on."""
    return frozenset(f[1:] for f in features.split(",") if f.startswith("+"))


def vector_bits(features: frozenset[str]) -> int:
    """Width of the widest vector registers worth using."""
    if "avx512f" in features:
        return 512
    if "avx2" in features or "avx" in features:
        return 256
    return 128


def vector_registers(features: frozenset[str]) -> int:
    """How many vector registers the code generator may fill: AVX-512 doubles x86's 16, and
    AArch64 (NEON) has 32."""
    return 32 if "avx512f" in features or "neon" in features else 16
