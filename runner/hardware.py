"""The hardware a measurement belongs to: records are only comparable on the same kind of machine."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

from compiler import Target


@dataclass(frozen=True)
class Hardware:
    key: str
    cpu: str
    features: str
    cores: int


def host_hardware(target: Target | None = None) -> Hardware:
    """This machine: the LLVM target (CPU name and every feature) and the cores this process may use."""
    target = target or Target.host()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return Hardware(f"{target.key}-{cores}c", _cpu_model(), target.features, cores)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
