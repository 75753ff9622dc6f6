"""Issue 41's buffer and intrinsic primitives, measured where each is meant to help, side by side in
this process on all cores:

- tensorize (`dot_16x4_vnni`, the TensorizeVNNI rule): uint8 x int8 GEMMs with int32 sums, the
  default schedule with the rule against the same rules without it (MultiLevelTiling), and ONNX
  Runtime's MatMulInteger on the same arrays (its MLAS kernels use VNNI too);
- tensorize (`fma_4x16_f32`, the hand-written micro-kernel) against the default float32 schedule;
- transform_layout and storage_align of the default schedule's packed weight panel of a float32
  matmul: the panel as it is, packed [j // 16, k, j % 16], and its rows padded by 16 floats;
- a BERT-base encoder layer (bench.zoo, 128 tokens) quantized by onnxruntime.quantization's
  quantize_dynamic (int8 weights, uint8 activations: MatMulInteger), ours against ONNX Runtime on
  the same quantized file, and both on the float32 file it came from.

    python -m bench tensorize
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from bench.common import best_seconds, set_kernel_threads
from compiler import Schedule, build, te
from compiler.ir import PrimFunc
from compiler.schedule_rules import DEFAULT_RULES, RuleConfig, RuleContext, apply_rules, default_schedule
from compiler.schedule_rules.heuristic import Heuristic
from compiler.schedule_rules.tensorize_vnni import FEATURE, TensorizeVNNI
from compiler.target import Target, host_hardware

# (rows, columns, reduction, weights as [N, K]): a 512^3 GEMM, BERT-base's FFN and attention
# projections at 128 tokens (dense layers: W[j, k]), and one token through the FFN.
INT8_CASES = [(512, 512, 512, False), (128, 768, 768, True), (128, 3072, 768, True), (1, 3072, 768, True)]
FLOAT_CASES = [(512, 512, 512), (128, 1024, 1024)]


def int8_gemm(m: int, n: int, k: int, dense: bool) -> PrimFunc:
    A = te.placeholder((m, k), "uint8", "A")
    B = te.placeholder((n, k) if dense else (k, n), "int8", "W" if dense else "B")
    r = te.reduce_axis((0, k), "k")

    def weight(j: object) -> object:
        return B[j, r] if dense else B[r, j]

    C = te.compute(
        (m, n), lambda i, j: te.sum(te.cast("int32", A[i, r]) * te.cast("int32", weight(j)), axis=r), name="C"
    )
    return te.create_prim_func([A, B, C], name="int8_gemm")


def float_matmul(m: int, n: int, k: int) -> PrimFunc:
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C], name="matmul")


def with_rules(func: PrimFunc, target: Target, vnni: bool) -> PrimFunc:
    cfg = RuleConfig.for_target(target)
    rules = [r for r in DEFAULT_RULES if vnni or not isinstance(r, TensorizeVNNI)]
    sch = Schedule(func, seed=0)
    apply_rules(sch, rules, RuleContext(cfg, Heuristic(cfg, target.cores)))
    return sch.func


def fma_micro_kernel(func: PrimFunc) -> PrimFunc:
    """4 x 16 tiles of accumulators updated by the FMA intrinsic, rows in parallel."""
    sch = Schedule(func, seed=0)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, k, ii, ji)
    acc = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(acc, jo)
    sch.decompose_reduction(c, k)
    sch.tensorize(ii, "fma_4x16_f32")
    sch.parallel(io)
    return sch.func


def panel_variant(func: PrimFunc, target: Target, variant: str) -> PrimFunc:
    """The default schedule, its packed B panel as it is, packed 16 columns at a time, or padded."""
    sch = default_schedule(func, target)
    if variant == "packed [j//16, k, j%16]":
        sch.transform_layout(sch.get_block("B_global"), ("write", 0), "lambda k, j: (j // 16, k, j % 16)")
    elif variant == "rows padded by 16":
        sch.storage_align(sch.get_block("B_global"), 0, 0, 64, 16)
    return sch.func


def main() -> None:
    target = host_hardware().target
    set_kernel_threads(target.cores)
    rng = np.random.default_rng(0)
    print(f"{target.mcpu}, {target.cores} threads")
    if FEATURE in target.feature_set:
        print("uint8 x int8 -> int32 GEMM: default rules with TensorizeVNNI, without it, ONNX Runtime")
        for m, n, k, dense in INT8_CASES:
            _int8_case(target, rng, m, n, k, dense)
    else:
        print(f"uint8 x int8 GEMM: skipped, {target.mcpu} has no {FEATURE}")
    print("float32 matmul: the default schedule, the FMA micro-kernel, the panel's layouts")
    for m, n, k in FLOAT_CASES:
        _float_case(target, rng, m, n, k)
    print("BERT-base encoder layer, 128 tokens, quantize_dynamic (int8) and float32: ours, ONNX Runtime")
    _quantized_layer()


def _quantized_layer() -> None:
    import tempfile
    from pathlib import Path

    import onnx
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from bench.zoo import transformer_encoder_layer, transformer_inputs
    from compiler import graph
    from compiler.frontend import from_onnx

    layer = transformer_encoder_layer().eval()
    (x,) = transformer_inputs()
    with tempfile.TemporaryDirectory() as tmp:
        fp32, int8 = Path(tmp, "layer.onnx"), Path(tmp, "layer_int8.onnx")
        torch.onnx.export(layer, (x,), fp32, opset_version=17, dynamo=False)
        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
        files = {"int8": onnx.load(int8), "float32": onnx.load(fp32)}
    data = x.numpy()
    options = ort.SessionOptions()
    options.intra_op_num_threads = host_hardware().target.cores
    for label, model in files.items():
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        feed = {session.get_inputs()[0].name: data}
        compiled = graph.build(from_onnx(model))
        (ours,) = compiled(data)
        (theirs,) = session.run(None, feed)
        error = float(np.abs(ours - theirs).max())
        time.sleep(0.3)
        ours_ms = best_seconds(lambda c=compiled: c(data)) * 1e3
        time.sleep(0.3)
        theirs_ms = best_seconds(lambda s=session, f=feed: s.run(None, f)) * 1e3
        time.sleep(0.3)
        print(
            f"    {label:8s} ours {ours_ms:7.2f} ms   onnxruntime {theirs_ms:7.2f} ms   "
            f"ratio {theirs_ms / ours_ms:5.2f}x   max |ours - onnxruntime| {error:.4f}"
        )


def _int8_case(target: Target, rng: np.random.Generator, m: int, n: int, k: int, dense: bool) -> None:
    func = int8_gemm(m, n, k, dense)
    a = rng.integers(0, 256, (m, k)).astype("uint8")
    w = rng.integers(-128, 128, tuple(int(d) for d in func.params[1].shape)).astype("int8")
    want = a.astype(np.int32) @ (w.astype(np.int32).T if dense else w.astype(np.int32))
    times = {
        label: _kernel_micros(with_rules(func, target, vnni), [a, w], want)
        for label, vnni in (("vnni", True), ("tiled", False))
    }
    times["onnxruntime"] = _ort_micros(a, w.T.copy() if dense else w, want)
    gops = 2 * m * n * k / 1e3
    shape = f"{m}x{n}x{k}{' (dense)' if dense else ''}"
    print(
        f"    {shape}: vnni {times['vnni']:8.1f} us ({gops / times['vnni']:5.0f} GOPS)"
        f"   without {times['tiled']:8.1f} us   gain {times['tiled'] / times['vnni']:5.2f}x"
        f"   onnxruntime {times['onnxruntime']:8.1f} us   ratio {times['onnxruntime'] / times['vnni']:5.2f}x"
    )


def _float_case(target: Target, rng: np.random.Generator, m: int, n: int, k: int) -> None:
    func = float_matmul(m, n, k)
    a, b = rng.standard_normal((m, k)).astype("float32"), rng.standard_normal((k, n)).astype("float32")
    want = a @ b
    variants: dict[str, PrimFunc] = {
        name: panel_variant(func, target, name)
        for name in ("default", "packed [j//16, k, j%16]", "rows padded by 16")
    }
    variants["fma micro-kernel"] = fma_micro_kernel(func)
    times = {name: _kernel_micros(f, [a, b], want) for name, f in variants.items()}
    base = times["default"]
    cells = "   ".join(f"{name} {us:8.1f} us ({base / us:4.2f}x)" for name, us in times.items())
    print(f"    {m}x{n}x{k}: {cells}")


def _kernel_micros(func: PrimFunc, inputs: list[np.ndarray], want: np.ndarray) -> float:
    kernel = build(func, listings=False)
    out = np.zeros(want.shape, want.dtype)
    kernel(*inputs, out)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)
    time.sleep(0.3)
    return best_seconds(lambda: kernel(*inputs, out)) * 1e6


def _ort_micros(a: np.ndarray, b: np.ndarray, want: np.ndarray) -> float:
    run = _matmul_integer(a.shape, b.shape)
    np.testing.assert_array_equal(run(a, b), want)
    time.sleep(0.3)
    seconds = best_seconds(lambda: run(a, b)) * 1e6
    time.sleep(0.3)
    return seconds


def _matmul_integer(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> Callable[..., np.ndarray]:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B"], ["C"])],
        "matmul_integer",
        [
            helper.make_tensor_value_info("A", TensorProto.UINT8, list(a_shape)),
            helper.make_tensor_value_info("B", TensorProto.INT8, list(b_shape)),
        ],
        [helper.make_tensor_value_info("C", TensorProto.INT32, [a_shape[0], b_shape[1]])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = host_hardware().target.cores
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda a, b: session.run(None, {"A": a, "B": b})[0]


__all__ = ["main"]
