"""Where to compute a conv2d's padding: for random tilings of the conv from the rule space, the
padding placed at every loop above the conv where compute_at is legal, measured. Loops below
MetaSchedule's cut (a spatial loop after a reduction loop, or trailing reduction loops) are no longer
compute-location candidates; this shows what the cut gives up."""

from __future__ import annotations

import statistics

from compiler import Schedule, Target, Trace
from compiler.auto_unroll import AUTO_UNROLL_MAX_STEP
from compiler.ir import PrimFunc
from compiler.schedule.compute_location import can_compute_at
from compiler.schedule.kinds import SAMPLE_CATEGORICAL, SAMPLE_COMPUTE_LOCATION
from compiler.schedule.tree import find_loop
from compiler.schedule_rules import UNROLL_STEPS, RuleConfig
from compiler.workloads import workload_from_spec
from runner import Candidate, LocalRunner, LocalRunnerConfig
from tuner.search.space import rule_space

SPEC = {
    "op": "conv2d_nchw",
    "params": {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "padding": 1},
}


def placements(func: PrimFunc, trace: Trace) -> tuple[list[str], list[dict]]:
    """For the tiling in `trace`: each legal loop for the padding ("kept" if a candidate, "cut" if
    not) and the trace of the program with the padding there (same unroll budget)."""
    index = next(i for i, inst in enumerate(trace.instructions) if inst.kind == SAMPLE_COMPUTE_LOCATION.name)
    unroll = next(i.decision for i in trace.instructions if i.kind == SAMPLE_CATEGORICAL.name)
    base = Trace(trace.instructions[:index]).apply(func)
    pad = base.get_block("pad_temp")
    kept = set(base.compute_location_candidates(pad))
    labels, traces = [], []
    for loop in base.get_loops(base.get_block("conv2d_nchw")):
        if find_loop(base.func.body, loop.name)[1].extent == 1 or not can_compute_at(
            base.func, "pad_temp", loop.name
        ):
            continue
        sch = base.copy()
        sch.compute_at(pad, loop)
        steps = sch.sample_categorical(list(UNROLL_STEPS), [1.0] * len(UNROLL_STEPS), decision=unroll)
        sch.annotate(sch.get_block("root"), AUTO_UNROLL_MAX_STEP, steps)
        labels.append(f"{loop.name}:{'kept' if loop.name in kept else 'cut'}")
        traces.append(sch.trace.to_json())
    return labels, traces


def main(programs: int = 8) -> None:
    func = workload_from_spec(SPEC).func
    target = Target.host()
    space = rule_space(RuleConfig.for_target(target))
    ratios, best_kept = [], 0
    with LocalRunner(LocalRunnerConfig(), target) as runner:
        seed, done = 0, 0
        while done < programs:
            sch = Schedule(func, seed=seed)
            seed += 1
            space(sch)
            labels, traces = placements(func, sch.trace)
            if not any(label.endswith(":cut") for label in labels):
                continue
            results = runner.run([Candidate(SPEC, t) for t in traces])
            ms = {label: r.median_secs * 1e3 for label, r in zip(labels, results) if r.ok}
            kept = min((v for k, v in ms.items() if k.endswith(":kept")), default=float("inf"))
            cut = min((v for k, v in ms.items() if k.endswith(":cut")), default=float("inf"))
            best_kept += kept <= cut
            ratios.append(cut / kept)
            done += 1
            print(f"program {done} (seed {seed - 1}): " + ", ".join(f"{k} {v:.2f} ms" for k, v in ms.items()))
    print(
        f"conv2d padding placement, {programs} random tilings: the fastest legal loop is a candidate in "
        f"{best_kept} of {programs}; fastest cut loop / fastest candidate: median "
        f"{statistics.median(ratios):.2f}x, min {min(ratios):.2f}x"
    )
