"""Our tuner side by side with TVM MetaSchedule on real layer shapes (bench/peer_suite.py):
`make bench-peers [TRIALS="64 256"] [SHAPES="bert.ffn_up mlp.fc1"]`, or
`python -m bench.peers --trials 64 256 --shapes bert.ffn_up mlp.fc1`; with `--target znver3`
(`make bench-peers TARGET=znver3`), both tuners and numpy work as on an AVX2 machine without AVX-512.

For each trial budget and shape, both tuners start from nothing (a fresh SQLite database; a fresh
MetaSchedule work dir) and tune the same computation on this machine's cores, one after the other:
ours through `tuner.tune`, TVM through `tune_tir` in bench/tvm_peer.py, which runs in .venv-tvm
(TVM is a benchmark peer, never a dependency). Tuning wall time is measured around each call
(`tune`, `tune_tir`), so neither side pays for its interpreter or imports. Both compile for the same
CPU and features (`Target.host()`): the LLVM CPU name alone is not enough, since a VM may report
an AVX-512 CPU (znver4) with AVX-512 masked off, and TVM would emit instructions it lacks.

Each best schedule then becomes a shared library (ours: `compile_kernel(..., pic=True)` linked with
cc; TVM's: `export_library`), and bench/peer_timing.py times all of them and numpy in one process by
one method, after checking each against numpy (its docstring says how). Printed: a markdown table per
budget (for bench/results/), geometric means, and, for each shape where TVM wins, both traces.

The whole suite at 256 trials takes about four hours. With `--keep DIR`, each tuned shape's outcome
is saved beside its databases and libraries as soon as both tuners are done, and `--resume` with the
same DIR tunes only the shapes not yet saved: a run that was stopped continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.peak import measure_peak
from bench.peer_suite import SHAPES, SUITE, PeerShape
from compiler import Trace
from compiler.build import compile_kernel
from compiler.target import Hardware, Target, host_hardware
from compiler.workloads import Workload, workload_from_spec
from tuner.baseline import openblas_coretype
from tuner.database import Database
from tuner.search.training_data import evaluate_model, groups_from_records, hardware_records
from tuner.tune import tune

ROOT = Path(__file__).resolve().parent.parent
TVM_PYTHON = ROOT / ".venv-tvm" / "bin" / "python"
TIMING = {"repeat": 7, "min_batch_secs": 0.05, "pause_secs": 0.3}
SIDES = "sides.json"  # a tuned shape's outcome in its work directory (`--resume`)
RANKING_SPLITS = 10


@dataclass
class Side:
    """One tuner's outcome on one shape at one budget."""

    wall_secs: float
    curve: list[float]  # best GFLOPS so far after each trial, as the tuner measured it
    trace: str = ""
    library: Path | None = None
    error: str | None = None
    secs: float | None = None  # per call from Python, from the timing process
    native_secs: float | None = None  # per call from native code
    ranking: dict[str, float] | None = None  # the cost model's top-1/top-5 on held-out records (ours)

    @property
    def trials_to_90(self) -> int | None:
        """Trials the search needed to reach 90% of its final best."""
        final = self.curve[-1] if self.curve else 0.0
        return next((i + 1 for i, g in enumerate(self.curve) if g >= 0.9 * final), None) if final else None


@dataclass
class Entry:
    shape: PeerShape
    workload: Workload
    trials: int
    ours: Side
    tvm: Side
    numpy_secs: float | None = None

    def gflops(self, secs: float | None) -> float | None:
        return self.workload.flops / secs / 1e9 if secs else None


def child_env(target: Target) -> dict[str, str]:
    """Children see the target's cores as TVM threads, and no OPENBLAS_CORETYPE (see peer_timing),
    except for a target without AVX-512: numpy then runs OpenBLAS's AVX2 kernels, as on such a CPU."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env["TVM_NUM_THREADS"] = str(target.cores)
    coretype = openblas_coretype(target)
    if coretype:
        env["PEER_OPENBLAS_CORETYPE"] = coretype
    return env


def tvm_target(hardware: Hardware) -> dict[str, Any]:
    t = hardware.target
    return {"kind": "llvm", "mcpu": t.mcpu, "mattr": t.features.split(","), "num-cores": t.cores}


def link(obj: bytes, work: Path) -> Path:
    """Our object code as a plain shared library, as `compiler.graph.export` links a model's."""
    (work / "ours.o").write_bytes(obj)
    library = work / "ours.so"
    subprocess.run(["cc", "-shared", "-o", library, work / "ours.o", "-lgomp", "-lm"], check=True)
    return library


def tune_ours(wl: Workload, trials: int, work: Path, hardware: Hardware) -> Side:
    """Our tuner on a fresh database, then its best schedule as a shared library. A failure is the
    shape's result, not the end of a run that takes hours."""
    try:
        return _tune_ours(wl, trials, work, hardware)
    except Exception as e:
        return Side(0.0, [], error=f"{type(e).__name__}: {e}")


def _tune_ours(wl: Workload, trials: int, work: Path, hardware: Hardware) -> Side:
    start = time.perf_counter()
    result = tune(wl, trials=trials, database=f"sqlite:///{work / 'ours.db'}", hardware=hardware)
    side = Side(time.perf_counter() - start, result.curve)
    if result.best is None:
        side.error = f"no correct schedule in {result.trials} trials"
        return side
    sch = Trace.from_json(result.best.trace).apply(wl.func)
    side.trace = str(sch.trace)
    side.ranking = cost_model_ranking(work / "ours.db", hardware)
    side.library = link(compile_kernel(sch.func, hardware.target, pic=True).obj, work)
    return side


def cost_model_ranking(database: Path, hardware: Hardware) -> dict[str, float] | None:
    """How well our cost model ranks this shape's measured candidates: trained on 75% of the tuning
    run's records, scored on the held-out rest (`evaluate_model`), over `RANKING_SPLITS` splits, next
    to what a random ranking of the same candidates scores. The records are the search's own picks,
    not random schedules, so the held-out ones are close to each other: the random ranking is the bar."""
    with Database.open(f"sqlite:///{database}") as db:
        records = hardware_records(db, hardware.key)
    groups = groups_from_records(records, hardware.target)
    if not groups or len(groups[0][1]) < 8:
        return None
    scores = evaluate_model(groups, splits=RANKING_SPLITS)
    return {key: scores[key] for key in ("top1", "top5", "random_top1", "random_top5")}


def tune_tvm(wl: Workload, trials: int, work: Path, hardware: Hardware) -> Side:
    command = [str(TVM_PYTHON), str(ROOT / "bench" / "tvm_peer.py"), json.dumps(wl.spec)]
    command += ["--trials", str(trials), "--flops", str(wl.flops), "--out", str(work)]
    command += ["--target", json.dumps(tvm_target(hardware))]
    done = subprocess.run(
        command, env=child_env(hardware.target), capture_output=True, text=True, check=False
    )
    (work / "tvm.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        return Side(0.0, [], error=f"tvm_peer.py exited {done.returncode}: {tail[0]} (see {work}/tvm.log)")
    result = json.loads((work / "tvm.json").read_text())
    library = work / "tvm.so" if result["error"] is None else None
    return Side(result["wall_secs"], result["curve"], result["trace"] or "", library, result["error"])


def save_sides(work: Path, hardware: Hardware, ours: Side, tvm: Side) -> None:
    """Both tuners' outcomes on one shape, written once both are done, so `--resume` skips it."""
    sides = {"hardware": hardware.key, "ours": asdict(ours), "tvm": asdict(tvm)}
    (work / SIDES).write_text(json.dumps(sides, default=str))


def load_sides(work: Path, hardware: Hardware) -> tuple[Side, Side] | None:
    """What `save_sides` wrote in `work`, or None where the shape was not tuned to the end, or was
    tuned for other hardware (another host, another --target): its numbers would not compare."""
    try:
        sides = json.loads((work / SIDES).read_text())
    except FileNotFoundError:
        return None
    if sides["hardware"] != hardware.key:
        return None
    ours, tvm = (
        Side(**(sides[n] | {"library": sides[n]["library"] and Path(sides[n]["library"])}))
        for n in ("ours", "tvm")
    )
    return ours, tvm


def tuned_entry(shape: PeerShape, trials: int, work: Path, hardware: Hardware, resume: bool) -> Entry:
    """Both tuners on one shape from nothing, or, resuming, what an earlier run saved of it on this
    hardware. A shape the earlier run left half done starts again from empty databases."""
    wl = workload_from_spec(shape.spec)
    saved = load_sides(work, hardware) if resume else None
    if saved:
        return Entry(shape, wl, trials, *saved)
    shutil.rmtree(work, ignore_errors=True)
    (work / "ours").mkdir(parents=True)
    (work / "tvm").mkdir()
    ours = tune_ours(wl, trials, work / "ours", hardware)
    theirs = tune_tvm(wl, trials, work / "tvm", hardware)
    save_sides(work, hardware, ours, theirs)
    print(
        f"tuned {shape.name} @{trials}: ours {ours.curve[-1] if ours.curve else 0:.0f} GFLOPS in "
        f"{ours.wall_secs:.0f} s, TVM {theirs.curve[-1] if theirs.curve else 0:.0f} GFLOPS in "
        f"{theirs.wall_secs:.0f} s (as each measured them)",
        file=sys.stderr,
        flush=True,
    )
    return Entry(shape, wl, trials, ours, theirs)


def manifest(entries: list[Entry]) -> dict[str, Any]:
    """What the timing process needs: per shape, the inputs' and output's shapes and every library."""
    shapes: dict[str, dict[str, Any]] = {}
    for e in entries:
        wl = e.workload
        shape = shapes.setdefault(
            e.shape.name,
            {
                "name": e.shape.name,
                "op": wl.spec["op"],
                "params": wl.spec["params"],
                "inputs": [list(b.shape) for b in wl.inputs],
                "output": list(wl.outputs[0].shape),
                "kernels": {},
            },
        )
        if e.ours.library:
            shape["kernels"][f"ours@{e.trials}"] = {
                "kind": "ours",
                "path": str(e.ours.library),
                "symbol": wl.func.name,
            }
        if e.tvm.library:
            shape["kernels"][f"tvm@{e.trials}"] = {"kind": "tvm", "path": str(e.tvm.library)}
    return {"method": TIMING, "shapes": list(shapes.values())}


def time_all(entries: list[Entry], work: Path, target: Target) -> None:
    """Time every library and numpy in one process (in .venv-tvm) and fill the entries in."""
    (work / "manifest.json").write_text(json.dumps(manifest(entries)))
    script = ROOT / "bench" / "peer_timing.py"
    subprocess.run(
        [str(TVM_PYTHON), str(script), str(work / "manifest.json"), str(work / "timing.json")],
        env=child_env(target),
        check=True,
    )
    timing = json.loads((work / "timing.json").read_text())
    for e in entries:
        result = timing[e.shape.name]
        e.numpy_secs = result["secs"].get("numpy")
        for name, side in (("ours", e.ours), ("tvm", e.tvm)):
            label = f"{name}@{e.trials}"
            side.secs = result["secs"].get(label)
            side.native_secs = result["secs"].get(f"{label} native")
            side.error = side.error or result["errors"].get(label)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def geomean(values: list[float | None]) -> str:
    known = [v for v in values if v]
    if not known:
        return "n/a"
    mean = math.exp(sum(map(math.log, known)) / len(known))
    return f"**{mean:.2f}**" + ("" if len(known) == len(values) else f" (of {len(known)})")


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "n/a" if value is None else f"{value:{spec}}"


def per_call(side: Side) -> str:
    """Microseconds per call from Python and from native code: for a small kernel, the difference is
    the cost of calling it from Python."""
    if side.secs is None or side.native_secs is None:
        return "n/a"
    return " / ".join(
        f"{s * 1e6:.1f}" if s < 1e-4 else f"{s * 1e6:.0f}" for s in (side.secs, side.native_secs)
    )


def ranking(scores: dict[str, float] | None) -> str:
    if scores is None:
        return "n/a"
    return (
        f"{scores['top1']:.2f} / {scores['top5']:.2f} "
        f"({scores['random_top1']:.2f} / {scores['random_top5']:.2f})"
    )


COLUMNS = (
    "shape",
    "ours GFLOPS",
    "TVM GFLOPS",
    "ours / TVM",
    "ours / numpy",
    "% of peak (ours / TVM)",
    "90% of best at trial (ours / TVM)",
    "cost model top-1 / top-5 (random)",
    "tuning wall s (ours / TVM)",
    "wall ours / TVM",
    "us per call, Python / native (ours; TVM)",
)


def table(entries: list[Entry], peak: float) -> list[str]:
    """The markdown table of one budget, its geometric means last."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    vs_tvm, vs_numpy, walls = [], [], []
    for e in entries:
        ours, tvm = e.gflops(e.ours.secs), e.gflops(e.tvm.secs)
        numpy = e.gflops(e.numpy_secs)
        vs_tvm.append(ratio(ours, tvm) if not (e.ours.error or e.tvm.error) else None)
        vs_numpy.append(ratio(ours, numpy) if not e.ours.error else None)
        walls.append(ratio(e.ours.wall_secs, e.tvm.wall_secs))
        cells = [
            f"{e.shape.name}: {e.shape.source}",
            "n/a" if e.ours.error else fmt(ours, ".0f"),
            "n/a" if e.tvm.error else fmt(tvm, ".0f"),
            fmt(vs_tvm[-1]),
            fmt(vs_numpy[-1]),
            f"{fmt(ratio(ours, peak), '.0%')} / {fmt(ratio(tvm, peak), '.0%')}",
            f"{e.ours.trials_to_90 or 'n/a'} / {e.tvm.trials_to_90 or 'n/a'}",
            ranking(e.ours.ranking),
            f"{e.ours.wall_secs:.0f} / {e.tvm.wall_secs:.0f}",
            fmt(walls[-1]),
            f"{per_call(e.ours)}; {per_call(e.tvm)}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    means = ["geometric mean", "", "", geomean(vs_tvm), geomean(vs_numpy), "", "", "", "", geomean(walls), ""]
    lines.append("| " + " | ".join(means) + " |")
    return lines


def problems(entries: list[Entry]) -> list[str]:
    return [
        f"- {e.shape.name}: {name}: {side.error}"
        for e in entries
        for name, side in (("ours", e.ours), ("TVM", e.tvm))
        if side.error
    ]


def lost(entries: list[Entry]) -> list[str]:
    """Both traces of every shape TVM wins: which loop structure beats ours."""
    lines = []
    for e in entries:
        r = ratio(e.gflops(e.ours.secs), e.gflops(e.tvm.secs))
        if r is None or r >= 1 or e.ours.error or e.tvm.error:
            continue
        lines += [f"### {e.shape.name} at {e.trials} trials: ours / TVM = {r:.2f}", ""]
        lines += ["TVM's best trace:", "```python", e.tvm.trace, "```", ""]
        lines += ["Our best trace:", "```python", e.ours.trace, "```", ""]
    return lines


def report(entries: list[Entry], budgets: list[int], hardware: Hardware, peak: float) -> None:
    t = hardware.target
    isa = "AVX-512" if "avx512f" in t.feature_set else "AVX2" if "avx2" in t.feature_set else "SSE"
    print(f"\n# {hardware.cpu_model} ({t.mcpu}, {isa}), {t.cores} cores, FMA peak {peak:.0f} GFLOPS")
    print("command: " + " ".join(["python -m bench.peers", *sys.argv[1:]]))
    for trials in budgets:
        chosen = [e for e in entries if e.trials == trials]
        print(f"\n## {trials} trials\n")
        print("\n".join(table(chosen, peak)))
        issues = problems(chosen)
        if issues:
            print("\nLeft out of the means:\n" + "\n".join(issues))
    losses = lost(entries)
    if losses:
        print("\n## Shapes TVM wins\n")
        print("\n".join(losses))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[64, 256], help="trial budgets")
    parser.add_argument("--shapes", nargs="+", default=[s.name for s in SUITE], help="suite names")
    parser.add_argument("--list", action="store_true", help="list the suite and exit")
    parser.add_argument("--keep", type=Path, help="keep databases, libraries and logs in this directory")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue a stopped run in --keep DIR: tune only what it did not",
    )
    parser.add_argument(
        "--target",
        help="tune and time for a subset of this machine's features, as `tuner tune --target`: znver3 (AVX2)",
    )
    args = parser.parse_args(argv)
    if args.resume and not args.keep:
        parser.error("--resume needs --keep DIR: the directory of the run to continue")
    if args.keep and not args.resume and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(
            f"--keep {args.keep}: not empty (each run starts from fresh databases; --resume continues it)"
        )
    unknown = [name for name in args.shapes if name not in SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown}; the suite: {', '.join(SHAPES)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        for s in SUITE:
            print(f"{s.name:26} {s.source}")
        return
    if not TVM_PYTHON.exists():
        raise SystemExit(f"{TVM_PYTHON} is missing: `make bench-peers` creates it")
    hardware = host_hardware(args.target)
    _, peak, _ = measure_peak(target=hardware.target)
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        root = args.keep or Path(tmp)
        entries = [
            tuned_entry(SHAPES[name], trials, root / f"{name}@{trials}", hardware, args.resume)
            for trials in args.trials
            for name in args.shapes
        ]
        time_all(entries, root, hardware.target)
    report(entries, args.trials, hardware, peak)


if __name__ == "__main__":
    main()
