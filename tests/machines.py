"""Targets of machines other than this one, for tests of what is specialized for which machine."""

from compiler.target import Target

FEATURES = {"avx512": "+avx,+avx2,+fma,+avx512f", "avx2": "+avx,+avx2,+fma,-avx512f"}


def target(kind: str = "avx512", cores: int = 8) -> Target:
    return Target(
        "x86_64-unknown-linux-gnu", "znver4" if kind == "avx512" else "znver3", FEATURES[kind], cores
    )


AVX512 = target("avx512")
AVX2 = target("avx2")
