"""The hardware a measurement belongs to: records are only comparable on the same kind of machine,
which the target's key names."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

from compiler import Target


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
