"""LocalRunner: build candidates in parallel worker processes, then verify and time them one at a
time in a separate measurement process, so a candidate that crashes, hangs or eats memory takes
down only a child, and measurements do not disturb each other.

Processes are started with `spawn` (libgomp's thread pool does not survive fork; `runner.spawn`:
without re-running the caller's script) and recycled:
build workers after `build_tasks_per_worker` candidates (LLVM's optimizer leaks inside llvmlite),
the measurement process after `measure_tasks_per_process`.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import statistics
import time
import traceback
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from math import inf
from multiprocessing.connection import Connection
from multiprocessing.pool import AsyncResult, Pool
from typing import Any

from compiler.target import Target
from runner.results import BuildResult, Candidate, RunResult, Status, TimingConfig, cutoff_above
from runner.spawn import runner_context

_CTX = runner_context()
# How long one measurement (the check against the reference and every timed run) may take before it
# counts as a timeout: the coordinator refuses workloads whose candidates could not finish within it.
RUN_TIMEOUT_S = 60.0
# A fresh measurement process timed its first candidate slow until the kernel had run for a few ms:
# every tune's first candidate (the default schedule) read 2-40x its true time (a depthwise conv:
# 610 us, then 41 us when timed again) and was ranked by it. Which part of the start is slow (the
# thread team, the idle second core, numpy's threads after the reference) was not isolated; 50 ms
# of untimed calls first made it read 39-43 us, where sleeping 1 s after the reference left the
# first repeats at 614 and 106 us (bench/results/2026-11-25-a.md). The warm-up runs whenever the workload
# changes (and the reference with it), which covers a process's first candidate; whether a warm process
# also slows on a new workload was not measured.
WARM_UP_MS = 50.0
RECENT_BUILDS = 4


@dataclass(frozen=True)
class LocalRunnerConfig:
    timing: TimingConfig = field(default_factory=TimingConfig)
    build_workers: int = 2
    build_timeout_s: float = 30.0
    run_timeout_s: float = RUN_TIMEOUT_S
    memory_limit_bytes: int = 8 << 30
    build_tasks_per_worker: int = 64
    measure_tasks_per_process: int = 256
    seed: int = 0


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def build_candidate(candidate: Candidate, target: Target) -> BuildResult:
    """Replay the trace on the workload and compile it (runs in a build worker)."""
    from compiler.build import compile_kernel
    from compiler.schedule import Trace
    from compiler.workloads import workload_from_spec

    start = time.perf_counter()
    try:
        workload = workload_from_spec(candidate.spec)
        func = Trace.from_json(candidate.trace).apply(workload.func).func
        compiled = compile_kernel(func, target)
    except Exception as e:  # every failure of a candidate is a result, never a crash
        return BuildResult(Status.BUILD_ERROR, None, f"{type(e).__name__}: {e}", time.perf_counter() - start)
    return BuildResult(Status.OK, compiled, "", time.perf_counter() - start)


class LocalRunner:
    """Runs candidates on this machine, built for `target` (this machine's, or one it can run: a
    benchmark compiles for AVX2 on an AVX-512 host). Use as a context manager, or call close()."""

    def __init__(self, config: LocalRunnerConfig, target: Target) -> None:
        self.config = config
        self.target = target
        self._pool: Pool | None = None
        self._measurer = _Measurer(self.config)
        # The last programs built, by candidate: a would-be best is timed again beside the best
        # (`run_side_by_side`) right after its first run, and the best beside each would-be best.
        self._recent: OrderedDict[str, BuildResult] = OrderedDict()

    @property
    def timing(self) -> TimingConfig:
        return self.config.timing

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
        self._measurer.stop()

    def run(self, candidates: Sequence[Candidate]) -> list[RunResult]:
        return list(self.iter_run(candidates))

    def iter_run(self, candidates: Sequence[Candidate]) -> Iterator[RunResult]:
        """Build every candidate (in parallel), then measure them one at a time, yielding each result
        as it comes: a caller that stops early (a worker shutting down) leaves the rest unmeasured."""
        for candidate, built in zip(candidates, self.build(candidates)):
            if built.compiled is None:
                yield RunResult(built.status, [], built.message, built.build_secs)
                continue
            (result,) = self._measurer.measure([candidate], [built], candidate.cutoff_secs)
            yield result

    def run_side_by_side(self, candidates: Sequence[Candidate]) -> list[RunResult]:
        """Candidates of one workload (and one timing) timed alternated, repeat by repeat, in one
        measurement process (`evaluate.evaluate_side_by_side`): times that compare on a host whose
        speed drifts. Each is verified first; a failed build or check is its own result."""
        if len({_workload_key(c.spec) for c in candidates}) > 1 or len({c.timing for c in candidates}) > 1:
            raise ValueError("candidates timed side by side must share one workload and one timing")
        builds = self.build(candidates)
        ok = [i for i, b in enumerate(builds) if b.compiled is not None]
        out = [RunResult(b.status, [], b.message, b.build_secs) for b in builds]
        if ok:
            measured = self._measurer.measure([candidates[i] for i in ok], [builds[i] for i in ok])
            for i, result in zip(ok, measured):
                out[i] = result
        return out

    def _get_pool(self) -> Pool:
        if self._pool is None:
            self._pool = _CTX.Pool(
                self.config.build_workers,
                initializer=_ignore_sigint,
                maxtasksperchild=self.config.build_tasks_per_worker,
            )
        return self._pool

    def build(self, candidates: Sequence[Candidate]) -> list[BuildResult]:
        """Build all candidates in parallel; a build that exceeds its time is reported as a timeout
        and the pool is replaced (a stuck worker cannot be interrupted otherwise). A program among
        the last `RECENT_BUILDS` built is not built again."""
        out: dict[int, BuildResult] = {}
        for i, c in enumerate(candidates):
            if (recent := self._recent.get(c.key)) is not None:
                out[i] = recent
                self._recent.move_to_end(c.key)
        pending = [i for i in range(len(candidates)) if i not in out]
        while pending:
            pool = self._get_pool()
            jobs: dict[int, AsyncResult[BuildResult]] = {
                i: pool.apply_async(build_candidate, (candidates[i], self.target)) for i in pending
            }
            pending = self._collect(pool, jobs, out)
        for c, built in zip(candidates, (out[i] for i in range(len(candidates)))):
            if built.compiled is not None:
                self._recent[c.key] = built
                self._recent.move_to_end(c.key)
        while len(self._recent) > RECENT_BUILDS:
            self._recent.popitem(last=False)
        return [out[i] for i in range(len(candidates))]

    def _collect(
        self, pool: Pool, jobs: dict[int, AsyncResult[BuildResult]], out: dict[int, BuildResult]
    ) -> list[int]:
        """Wait for the pool's jobs in order; on a timeout, record it, drop the pool and return the
        jobs still to redo."""
        timeout = self.config.build_timeout_s
        for i, job in jobs.items():
            try:
                out[i] = job.get(timeout=timeout)
            except mp.TimeoutError:
                out[i] = BuildResult(Status.TIMEOUT, None, f"build timed out after {timeout:.0f} s", timeout)
                for k, other in jobs.items():
                    if k not in out and other.ready():
                        out[k] = other.get()
                pool.terminate()
                self._pool = None
                return [k for k in jobs if k not in out]
        return []


class _Measurer:
    """Owns the measurement process: one candidate at a time over a pipe, restarted when it dies."""

    def __init__(self, config: LocalRunnerConfig) -> None:
        self.config = config
        self.process: mp.process.BaseProcess | None = None
        self.conn: Connection | None = None
        self.served = 0

    def start(self) -> None:
        parent, child = _CTX.Pipe()
        self.process = _CTX.Process(
            target=measure_loop,
            args=(child, self.config.memory_limit_bytes, self.config.seed),
        )
        self.process.daemon = True
        self.process.start()
        child.close()
        self.conn = parent
        self.served = 0

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()
            self.process = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def measure(
        self, candidates: Sequence[Candidate], built: Sequence[BuildResult], cutoff_secs: float | None = None
    ) -> list[RunResult]:
        """Candidates of one workload, built, timed side by side (one alone: as it is, for one repeat
        if its first call takes longer than `cutoff_secs`)."""
        # A process that died between candidates (killed from outside) is replaced before it is used.
        alive = self.process is not None and self.process.is_alive()
        if not alive or self.served >= self.config.measure_tasks_per_process:
            self.stop()
            self.start()
        assert self.conn is not None and self.process is not None
        self.served += len(candidates)
        timeout = self.config.run_timeout_s * len(candidates)
        timing = candidates[0].timing or self.config.timing
        replies: list[tuple[Status, list[float], str]]
        try:
            self.conn.send((candidates[0].spec, [b.compiled for b in built], timing, cutoff_secs))
            if not self.conn.poll(timeout):
                self.stop()
                replies = [(Status.TIMEOUT, [], f"run timed out after {timeout:.0f} s")] * len(built)
            else:
                replies = self.conn.recv()
        except (EOFError, OSError):  # the process died while it had the candidate (OSError: broken pipe)
            self.process.join(5)
            code = self.process.exitcode
            self.stop()
            replies = [(Status.RUNTIME_ERROR, [], _death_message(code))] * len(built)
        return [
            RunResult(status, secs, message, b.build_secs)
            for (status, secs, message), b in zip(replies, built)
        ]


def _cutoff(given: float | None, fastest: float | None) -> float:
    """The first-call time beyond which a candidate alone is timed for one repeat: the candidate's
    own cutoff (its caller's best), or `cutoff_above` the quickest this process has timed of its
    workload, whichever is lower. A task's first batch has no best yet: tuning GPT-2's family, every
    candidate over ten times its workload's best came in its workload's first 16 (30 of 30)."""
    bounds = [c for c in (given, cutoff_above(fastest)) if c is not None]
    return min(bounds, default=inf)


def _workload_key(spec: dict[str, Any]) -> str:
    """What identifies a candidate's workload (its arrays and reference) in the measurement process."""
    return repr(sorted(spec.items()))


def _death_message(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if name == "SIGABRT":
            return "the kernel aborted (SIGABRT): an allocation failed, out of memory"
        return f"the kernel crashed the measurement process ({name})"
    return f"the measurement process exited with code {code}"


def measure_loop(conn: Connection, memory_limit: int, seed: int) -> None:
    """The measurement process: load, verify against numpy, time; forever, one request at a time. A
    request is one workload's kernels (one candidate, or several to time side by side) and a cutoff
    (a candidate alone whose verifying call takes longer, or ten times the quickest this process
    has timed of its workload, is timed for one repeat: `_cutoff`); the reply is one
    (status, seconds, message) per kernel, or one failure for them all when the workload itself
    cannot be set up."""
    import resource

    import numpy as np

    from compiler.build import load
    from compiler.runtime import in_huge_pages
    from compiler.workloads import workload_from_spec
    from runner.evaluate import evaluate_side_by_side
    from runner.verify import compare, poison

    _ignore_sigint()
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    cache: dict[str, Any] = {}
    fastest: dict[tuple[str, TimingConfig], float] = {}  # the quickest median timed per workload and timing
    while True:
        try:
            spec, compiled, timing, cutoff = conn.recv()
        except EOFError:
            return
        try:
            key = _workload_key(spec)
            warm_up = key not in cache
            if warm_up:
                # One huge-page region per workload, as a compiled model keeps its memory: every
                # candidate runs on the same placement (compiler/runtime.py), its outputs poisoned.
                workload = workload_from_spec(spec)
                inputs = workload.random_inputs(np.random.default_rng(seed))
                arrays = in_huge_pages([*inputs, *workload.empty_outputs()])
                cache.clear()
                expected = workload.reference(*inputs)
                cache[key] = (workload, arrays[: len(inputs)], arrays[len(inputs) :], expected)
            workload, inputs, outputs, expected = cache[key]
            names = [b.name for b in workload.func.params[workload.num_inputs :]]
            kernels: list[Any] = []
            replies: list[tuple[Status, list[float], str] | None] = []  # None: timed below
            first_secs = 0.0
            for one in compiled:
                kernel = load(one)
                poison(outputs)
                start = time.perf_counter()
                kernel(*inputs, *outputs)
                first_secs = time.perf_counter() - start
                mismatch = compare(outputs, expected, names)
                replies.append((Status.WRONG_RESULT, [], mismatch) if mismatch is not None else None)
                if mismatch is None:
                    kernels.append(kernel)
            args = [*inputs, *outputs]
            if kernels and warm_up:
                evaluate_side_by_side(kernels, args, repeat=1, min_repeat_ms=WARM_UP_MS)
            cut_off = len(kernels) == 1 and first_secs > _cutoff(cutoff, fastest.get((key, timing)))
            timed = (
                evaluate_side_by_side(
                    kernels,
                    args,
                    timing.number,
                    1 if cut_off else timing.repeat,
                    timing.min_repeat_ms,
                    timing.flush_cache,
                    timing.keep_first_warm,
                )
                if kernels
                else []
            )
            for secs in timed:
                fastest[key, timing] = min(fastest.get((key, timing), inf), statistics.median(secs))
            times = iter(timed)
            conn.send([r if r is not None else (Status.OK, next(times), "") for r in replies])
        except MemoryError:
            conn.send([(Status.RUNTIME_ERROR, [], "out of memory")] * len(compiled))
        except Exception as e:
            failed = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
            conn.send([(Status.RUNTIME_ERROR, [], failed)] * len(compiled))
