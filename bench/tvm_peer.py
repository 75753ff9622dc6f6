"""TVM MetaSchedule, the peer of `make bench-peers`: tune one workload spec with `tune_tir`, export the
best schedule as a shared library, and report its wall time, curve and trace.

Runs in .venv-tvm (made by `make bench-peers`), never in the project's environment: it imports only
TVM, numpy and the standard library, and writes the same computation our workload spec describes in
TVM's tensor expressions (the convolutions through TVM's own topi, which our compiler.topi mirrors:
a zero-padding block, then the reduction over channels and the window).

    python bench/tvm_peer.py '<spec JSON>' --trials 64 --target '<TVM target JSON>' --out DIR

writes DIR/tvm.so (function "main", the spec's buffers in order) and DIR/tvm.json.

TVM as a new user gets it, with one exception: its LocalBuilder starts a fresh pool of workers for
every batch, and each worker's first build imports `tvm.s_tir.tensor_intrin`, which parses hundreds
of TVMScript intrinsics (~30 s of CPU on these hosts), past the builder's 30 s timeout: every
candidate would fail. The builder's `initializer` does that import outside the timeout; the time
still counts in TVM's wall time, as it does for any user who gets builds to work.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tvm
import tvm.s_tir.meta_schedule as ms
from tvm import te, topi

FAILED_SECS = 1e9  # MetaSchedule stores a failed build or run as run_secs [1e10]

Tensors = list[te.Tensor]


def matmul(M: int, N: int, K: int) -> Tensors:
    a, b = te.placeholder((M, K), "float32", "A"), te.placeholder((K, N), "float32", "B")
    k = te.reduce_axis((0, K), "k")
    return [a, b, te.compute((M, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")]


def batch_matmul(B: int, M: int, N: int, K: int) -> Tensors:
    a, b = te.placeholder((B, M, K), "float32", "A"), te.placeholder((B, K, N), "float32", "B")
    k = te.reduce_axis((0, K), "k")
    c = te.compute((B, M, N), lambda n, i, j: te.sum(a[n, i, k] * b[n, k, j], axis=k), name="C")
    return [a, b, c]


def conv2d_nchw(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int, padding: int, dilation: int
) -> Tensors:
    data = te.placeholder((N, C, H, W), "float32", "data")
    weight = te.placeholder((K, C, R, S), "float32", "weight")
    return [data, weight, topi.nn.conv2d_nchw(data, weight, stride, padding, dilation, "float32")]


def conv2d_nchw_kblock(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int, padding: int, dilation: int, kb: int
) -> Tensors:
    """Ours (compiler.topi.conv2d_nchw_kblock): weights [K/kb, C, R, S, kb] -> [N, K/kb, OH, OW, kb]."""
    data = te.placeholder((N, C, H, W), "float32", "data")
    weight = te.placeholder((K // kb, C, R, S, kb), "float32", "weight")
    padded = topi.nn.pad(data, (0, 0, padding, padding), name="pad_temp")
    oh = (H + 2 * padding - dilation * (R - 1) - 1) // stride + 1
    ow = (W + 2 * padding - dilation * (S - 1) - 1) // stride + 1
    rc, ry, rx = te.reduce_axis((0, C), "rc"), te.reduce_axis((0, R), "ry"), te.reduce_axis((0, S), "rx")
    out = te.compute(
        (N, K // kb, oh, ow, kb),
        lambda n, fo, y, x, fi: te.sum(
            padded[n, rc, y * stride + ry * dilation, x * stride + rx * dilation]
            * weight[fo, rc, ry, rx, fi],
            axis=[rc, ry, rx],
        ),
        name="conv2d_nchw_kblock",
    )
    return [data, weight, out]


def depthwise_conv2d_nchw(
    N: int, C: int, H: int, W: int, R: int, S: int, stride: int, padding: int, dilation: int
) -> Tensors:
    data = te.placeholder((N, C, H, W), "float32", "data")
    weight = te.placeholder((C, 1, R, S), "float32", "weight")
    out = topi.nn.depthwise_conv2d_nchw(data, weight, stride, padding, dilation, "float32")
    return [data, weight, out]


TVM_WORKLOADS: dict[str, Callable[..., Tensors]] = {
    "matmul": matmul,
    "batch_matmul": batch_matmul,
    "conv2d_nchw": conv2d_nchw,
    "conv2d_nchw_kblock": conv2d_nchw_kblock,
    "depthwise_conv2d_nchw": depthwise_conv2d_nchw,
}


def prim_func(spec: dict[str, Any]) -> tvm.tirx.PrimFunc:
    if spec.get("dtype", "float32") != "float32":
        raise SystemExit(f"tvm_peer: the TVM versions are float32, not {spec['dtype']}")
    if spec["op"] not in TVM_WORKLOADS:
        raise SystemExit(f"tvm_peer: no TVM version of {spec['op']!r}; add one to TVM_WORKLOADS")
    return te.create_prim_func(TVM_WORKLOADS[spec["op"]](**spec["params"]))


def _import_intrinsics() -> None:
    import tvm.s_tir.tensor_intrin  # noqa: F401 (importing is the point)


def tune(func: tvm.tirx.PrimFunc, target: dict[str, Any], trials: int, work_dir: str) -> ms.Database:
    """`tune_tir` with its defaults (evolutionary search, XGBoost model, batches of 64, local builder
    and runner) on the target's cores."""
    cores = target["num-cores"]
    builder = ms.builder.LocalBuilder(max_workers=cores, initializer=_import_intrinsics)
    return ms.tune_tir(
        func, tvm.target.Target(target), work_dir, trials, builder=builder, num_tuning_cores=cores
    )


def curve(work_dir: str, flops: int) -> list[float]:
    """Best GFLOPS so far after each measured candidate, in measurement order (the record file is
    appended batch by batch)."""
    best, out = 0.0, []
    with open(os.path.join(work_dir, "database_tuning_record.json")) as records:
        for line in records:
            run_secs = json.loads(line)[1][1] or []
            secs = sum(run_secs) / len(run_secs) if run_secs else FAILED_SECS
            if secs < FAILED_SECS:
                best = max(best, flops / secs / 1e9)
            out.append(best)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", type=json.loads)
    parser.add_argument("--trials", type=int, required=True)
    parser.add_argument("--target", type=json.loads, required=True, help="TVM target as JSON")
    parser.add_argument("--flops", type=int, required=True, help="for the curve's GFLOPS")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    func = prim_func(args.spec)
    target = tvm.target.Target(args.target)
    with tempfile.TemporaryDirectory(prefix="tvm-peer-") as work_dir:
        start = time.perf_counter()
        database = tune(func, args.target, args.trials, work_dir)
        wall = time.perf_counter() - start
        sch = ms.tir_integration.compile_tir(database, func, target)
        gflops = curve(work_dir, args.flops)
    result: dict[str, Any] = {"wall_secs": wall, "curve": gflops, "trace": None, "error": None}
    if sch is None:
        result["error"] = f"no valid schedule in {len(gflops)} trials"
    else:
        result["trace"] = str(sch.trace)
        tvm.compile(sch.mod, target=target).export_library(str(args.out / "tvm.so"))
    (args.out / "tvm.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
