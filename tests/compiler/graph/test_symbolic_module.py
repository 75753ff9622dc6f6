"""One module for a range of sequence lengths (`compiler.graph.symbolic`): found by comparing a
family's static modules, built once, it runs every length in range as PyTorch does (the lengths the
comparison used and the others, both ends included), refuses a length outside it at the Python and
the C entry, and falls back to compiling each size where one module cannot describe the family."""

from __future__ import annotations

import subprocess
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from compiler import graph
from compiler.build import ShapeError
from compiler.frontend import from_onnx, from_torch
from compiler.graph import DynamicModel, GraphBuilder, InputSignature, Module, ShapeFamily
from compiler.graph.shape_family import DimRange
from compiler.graph.symbolic import SymbolicError, sample_sizes, symbolic_module
from compiler.ir import Buffer, PrimFunc, SeqStmt, SizeVar
from tests.compiler.frontend.test_transformers import VOCAB, model_of, text_at

LONGEST = 64


def family_of(name: str) -> tuple[torch.nn.Module, ShapeFamily]:
    model = model_of(name)
    length = torch.export.Dim("sequence", min=1, max=LONGEST)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation warnings
        family = from_torch(model, text_at(7, 0), dynamic_shapes=(({1: length}, {1: length}),))
    assert isinstance(family, ShapeFamily)
    return model, family


@pytest.fixture(scope="module")
def gpt2() -> tuple[torch.nn.Module, graph.CompiledModel]:
    model, family = family_of("gpt2")
    compiled = graph.build(family)
    assert isinstance(compiled, graph.CompiledModel)
    return model, compiled


def assert_matches(model: torch.nn.Module, compiled: graph.CompiledModel, lengths: list[int]) -> None:
    """The outputs match PyTorch's at each length; where a length runs a static model of its own
    (`graph.RangeModel`), the range's module's outputs there too."""
    for length in lengths:
        args = text_at(length, seed=length)
        with torch.no_grad():
            want = model(*args)
        runs = [compiled]
        if isinstance(compiled, graph.RangeModel) and compiled.model_at(sequence=length) is not compiled:
            runs.append(compiled.run_range)
        for run in runs:
            got = run(*[a.numpy() for a in args])
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w.numpy(), rtol=2e-5, atol=2e-5)


def test_sizes_compared_are_the_largest_primes_in_range_and_its_end() -> None:
    assert sample_sizes(DimRange("n", 1, 512)) == [499, 503, 509, 512]
    assert sample_sizes(DimRange("n", 1, 16)) == [7, 11, 13, 16]
    assert sample_sizes(DimRange("n", 1, 5)) == [2, 3, 4, 5]  # two primes: every size from 2
    assert sample_sizes(DimRange("n", 90, 96)) == [90, 91, 92, 93, 94, 95, 96]
    with pytest.raises(SymbolicError, match=r"too few sizes"):
        sample_sizes(DimRange("n", 1, 3))


def test_bert_one_module_matches_pytorch_at_every_length() -> None:
    model, family = family_of("bert")
    module = symbolic_module(family)
    (ids, mask) = module.inputs
    assert str(ids.type) == str(mask.type) == "Tensor((1, sequence), 'int64')"
    assert all(f.size_vars for f in module.funcs.values() if "tanh" not in f.name)  # the pooler is static
    compiled = graph.build(module)
    assert_matches(model, compiled, [1, 2, 7, 13, 40, LONGEST])


def test_gpt2_one_module_matches_pytorch_and_refuses_lengths_out_of_range(gpt2) -> None:
    model, compiled = gpt2
    assert_matches(model, compiled, [1, 3, 17, 50, LONGEST])
    ids, mask = (a.numpy() for a in text_at(LONGEST + 1, seed=0))
    with pytest.raises(
        ShapeError, match=r"input 'args_0': dimension 1 \(sequence\) is 65, outside the declared"
    ):
        compiled(ids, mask)
    with pytest.raises(ShapeError, match=r"input 'args_1': dimension 1 \(sequence\) is 4, but sequence is 5"):
        compiled(ids[:, :5], mask[:, :4])


def c_program() -> str:
    """Runs the model at the length in argv[1] on the token ids and mask in argv[2] and argv[3],
    writes the output to argv[4]; prints the shape macros at that length and what an out-of-range
    length returns."""
    return "\n".join(
        [
            "#include <stdio.h>",
            "#include <stdlib.h>",
            '#include "model.h"',
            "int main(int argc, char **argv) {",
            "  if (argc != 5) return 3;",
            "  int64_t sizes[TENSOR_TUNER_NUM_SIZES] = {atol(argv[1])};",
            "  int64_t sequence = sizes[0];",
            "  const void *inputs[2]; void *outputs[1];",
            "  for (int k = 0; k < 2; k++) {",
            "    inputs[k] = malloc(TENSOR_TUNER_INPUT0_SIZE(sequence) * sizeof(TENSOR_TUNER_INPUT0_TYPE));",
            '    FILE *f = fopen(argv[2 + k], "rb");',
            "    if (fread((void *)inputs[k], 8, sequence, f) != (size_t)sequence) return 2;",
            "    fclose(f);",
            "  }",
            "  size_t bytes = TENSOR_TUNER_OUTPUT0_SIZE(sequence) * sizeof(TENSOR_TUNER_OUTPUT0_TYPE);",
            "  outputs[0] = malloc(bytes);",
            "  long shape[] = TENSOR_TUNER_OUTPUT0_SHAPE(sequence);",
            '  printf("%s %d..%d", TENSOR_TUNER_SIZE0_NAME, TENSOR_TUNER_SIZE0_MIN, TENSOR_TUNER_SIZE0_MAX);',
            '  for (int d = 0; d < TENSOR_TUNER_OUTPUT0_NDIM; d++) printf(" %ld", shape[d]);',
            "  if (tensor_tuner_run_sized(sizes, inputs, outputs) != 0) return 4;",
            "  int64_t beyond[1] = {TENSOR_TUNER_SIZE0_MAX + 1}, none[1] = {0};",
            '  printf(" %d", tensor_tuner_run_sized(beyond, inputs, outputs));',
            '  printf(" %d", tensor_tuner_run_sized(none, inputs, outputs));',
            '  printf(" %d\\n", tensor_tuner_run_sized(NULL, inputs, outputs));',
            '  FILE *f = fopen(argv[4], "wb"); fwrite(outputs[0], 1, bytes, f); fclose(f);',
            "  return 0;",
            "}",
            "",
        ]
    )


def test_a_c_program_runs_the_exported_library_at_three_lengths(gpt2, tmp_path: Path) -> None:
    model, compiled = gpt2
    library, header = compiled.export(tmp_path / "model.so")
    text = header.read_text()
    assert "#define TENSOR_TUNER_SIZE0_MAX 64" in text
    assert "#define TENSOR_TUNER_INPUT0_SHAPE(sequence) {1, (sequence)}" in text
    (tmp_path / "main.c").write_text(c_program())
    main = tmp_path / "main"
    subprocess.run(
        ["cc", "-O2", "-Wall", "-Werror", "-o", str(main), str(tmp_path / "main.c"), str(library)]
        + [f"-Wl,-rpath,{tmp_path}"],
        check=True,
    )
    for length in (1, 9, LONGEST):
        args = text_at(length, seed=length)
        paths = [tmp_path / "ids.bin", tmp_path / "mask.bin", tmp_path / "out.bin"]
        for path, a in zip(paths, args):
            a.numpy().tofile(path)
        done = subprocess.run(
            [str(main), str(length), *map(str, paths)], capture_output=True, text=True, check=True
        )
        assert done.stdout == f"sequence 1..64 1 {length} 32 2 2 1\n"
        with torch.no_grad():
            (want,) = model(*args)
        got = np.fromfile(paths[2], np.float32).reshape(1, length, 32)
        np.testing.assert_allclose(got, want.numpy(), rtol=2e-5, atol=2e-5)
    loaded = graph.load_library(library)
    assert_matches(model, loaded, [5])  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="outside the declared range sequence in"):
        loaded(*[a.numpy() for a in text_at(LONGEST + 1, seed=0)])


class MeanPool(torch.nn.Module):
    """A mean over the sequence: its divisor is a float that changes with the length."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x).mean(dim=1)


def test_a_family_one_module_cannot_describe_compiles_per_size_and_says_why() -> None:
    model = MeanPool().eval()
    length = torch.export.Dim("sequence", min=1, max=32)
    family = from_torch(model, (torch.randn(2, 5, 8),), dynamic_shapes=({1: length},))
    assert isinstance(family, ShapeFamily)
    with pytest.raises(SymbolicError, match=r"float32 constant .* at sequence = 29"):
        symbolic_module(family)
    with pytest.warns(UserWarning, match="each size compiles on its first call"):
        compiled = graph.build(family)
    assert isinstance(compiled, DynamicModel)
    x = np.random.default_rng(0).standard_normal((2, 9, 8)).astype(np.float32)
    np.testing.assert_allclose(compiled(x)[0], np.tanh(x).mean(axis=1), rtol=1e-5, atol=1e-6)


def test_size_vars_inside_a_dimension_are_the_kernels_arguments() -> None:
    """A kernel of the module may have a dimension `n + 1` and none that is `n` itself."""
    n = SizeVar("n", "int64", 1, 8)
    func = PrimFunc(
        "f", (Buffer("A", (n + 1, 4), "float32"), Buffer("B", (4, n * 2), "float32")), SeqStmt(())
    )
    assert func.size_vars == (n,)


def first_rows_model() -> onnx.ModelProto:
    """y = tanh(x[:, :8]): ONNX clamps the slice's end to the length, min(8, seq), which is 8 at
    every large length and the length itself below 8."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "out", 4])
    inits = [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("s", 0), ("e", 8), ("a", 1))]
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a"], ["t"]), helper.make_node("Tanh", ["t"], ["y"])]
    proto = helper.make_graph(nodes, "first8", [x], [y], inits)
    return helper.make_model(proto, opset_imports=[helper.make_opsetid("", 17)])


def test_a_number_that_is_min_of_the_size_is_caught_at_the_small_sizes() -> None:
    family = from_onnx(first_rows_model(), dims={"seq": (1, 32)})
    assert isinstance(family, ShapeFamily)
    with pytest.raises(
        SymbolicError, match=r"'fused_slice_tanh' at seq = 1 indexes p0 from 0 to 7 along axis 1"
    ):
        symbolic_module(family)
    with pytest.warns(UserWarning, match="each size compiles on its first call"):
        model = graph.build(family)
    for length in (3, 20):
        x = np.random.default_rng(length).standard_normal((1, length, 4)).astype(np.float32)
        np.testing.assert_allclose(model(x)[0], np.tanh(x[:, :8]), rtol=1e-6, atol=1e-6)


def dense_named(name: str) -> ShapeFamily:
    """x @ w then relu, its rows the ranged dimension `name`."""
    weight = np.random.default_rng(0).standard_normal((4, 6)).astype("float32")

    def at(values: Mapping[str, int]) -> Module:
        b = GraphBuilder()
        x = b.input("x", [values[name], 4], "float32")
        return b.module([b.call("relu", [b.call("matmul", [x, b.constant("w", weight)])])])

    return ShapeFamily((InputSignature("x", (name, 4), "float32"),), (DimRange(name, 1, 32),), at)


@pytest.mark.parametrize("name", ["k", "i0", "rows"])
def test_a_dimension_named_as_a_kernel_loop_is_not_that_loop(name: str) -> None:
    family = dense_named(name)
    model = graph.build(family)
    assert isinstance(model, graph.CompiledModel)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype("float32")
    weight = family.specialize({name: 1}).constants()[0].data
    np.testing.assert_allclose(model(x)[0], np.maximum(x @ weight, 0), rtol=1e-5, atol=1e-5)


def test_a_family_that_does_not_import_at_a_size_compared_compiles_per_size() -> None:
    def pairs(values: Mapping[str, int]) -> Module:  # valid at even sizes only
        b = GraphBuilder()
        x = b.input("x", [values["n"], 4], "float32")
        return b.module([b.call("tanh", [b.call("reshape", [x], shape=[values["n"] // 2, 8])])])

    family = ShapeFamily((InputSignature("x", ("n", 4), "float32"),), (DimRange("n", 1, 32),), pairs)
    with pytest.warns(UserWarning, match=r"at n = 23: .*cannot reshape"):
        model = graph.build(family)
    assert model(np.ones((6, 4), np.float32))[0].shape == (3, 8)


def batch_and_sequence_model() -> onnx.ModelProto:
    """x (batch, seq, 8) flattened to (batch * seq, 8) rows, a dense layer with bias and ReLU, back to
    (batch, seq, 6), a softmax over the sequence and the two first axes swapped: numbers a * b + c,
    a * s and b * s appear in the kernels."""
    rng = np.random.default_rng(3)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["seq", "batch", 6])
    inits = [
        helper.make_tensor("w", TensorProto.FLOAT, [8, 6], rng.standard_normal(48).astype(np.float32)),
        helper.make_tensor("bias", TensorProto.FLOAT, [6], rng.standard_normal(6).astype(np.float32)),
        helper.make_tensor("rows", TensorProto.INT64, [2], [-1, 8]),
        helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
        helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        helper.make_tensor("six", TensorProto.INT64, [1], [6]),
    ]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
        helper.make_node("Concat", ["b", "s", "six"], ["back"], axis=0),
        helper.make_node("Reshape", ["x", "rows"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "bias"], ["biased"]),
        helper.make_node("Relu", ["biased"], ["r"]),
        helper.make_node("Reshape", ["r", "back"], ["r3"]),
        helper.make_node("Softmax", ["r3"], ["p"], axis=1),
        helper.make_node("Transpose", ["p"], ["y"], perm=[1, 0, 2]),
    ]
    proto = helper.make_graph(nodes, "batch_seq", [x], [y], inits)
    return helper.make_model(proto, opset_imports=[helper.make_opsetid("", 17)])


def test_two_ranged_dimensions_are_one_module_for_every_batch_and_length() -> None:
    """Batch 1..8 and sequence 1..40 open together: one module whose kernels take both sizes (their
    products too), matching ONNX Runtime at both ends, between and at sizes no comparison used, and
    refusing each dimension out of its range by name."""
    import onnxruntime as ort

    proto = batch_and_sequence_model()
    family = from_onnx(proto, dims={"batch": (1, 8), "seq": (1, 40)})
    assert isinstance(family, ShapeFamily)
    module = symbolic_module(family)
    assert str(module.inputs[0].type) == "Tensor((batch, seq, 8), 'float32')"
    assert any(len(f.size_vars) == 2 for f in module.funcs.values())
    compiled = graph.build(family)
    assert isinstance(compiled, graph.CompiledModel)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch, length in [(1, 1), (8, 40), (3, 7), (2, 40), (8, 1), (5, 33), (7, 19)]:
        x = np.random.default_rng(batch * 100 + length).standard_normal((batch, length, 8)).astype(np.float32)
        (want,) = session.run(None, {"x": x})
        (got,) = compiled(x)
        assert got.shape == (length, batch, 6)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match=r"batch.*outside the declared range batch in \[1, 8\]"):
        compiled(np.zeros((9, 4, 8), np.float32))
    with pytest.raises(ShapeError, match=r"seq.*outside the declared range seq in \[1, 40\]"):
        compiled(np.zeros((2, 41, 8), np.float32))


@pytest.mark.slow  # 25-35 s: two dozen imports of the model compared
def test_bert_with_batch_and_sequence_open_is_one_module_matching_pytorch() -> None:
    """torch.export's Dims for both the batch (1..8) and the sequence (1..64): one module, as eager
    at both ends, between, and batch and length at opposite ends."""
    model = model_of("bert")
    batch, length = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("sequence", min=1, max=LONGEST)
    generator = torch.Generator().manual_seed(0)
    example = torch.randint(0, VOCAB, (2, 7), generator=generator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation warnings
        family = from_torch(
            model,
            (example, torch.ones_like(example)),
            dynamic_shapes=(({0: batch, 1: length}, {0: batch, 1: length}),),
        )
    assert isinstance(family, ShapeFamily) and len(family.dims) == 2
    compiled = graph.build(family)
    assert isinstance(compiled, graph.CompiledModel)
    for rows, columns in [(1, 1), (8, LONGEST), (2, 13), (8, 1), (1, LONGEST), (3, 40)]:
        ids = torch.randint(0, VOCAB, (rows, columns), generator=generator)
        mask = torch.ones(rows, columns, dtype=torch.int64)
        mask[0, columns - columns // 3 :] = 0
        with torch.no_grad():
            want = model(ids, mask)
        got = compiled(ids.numpy(), mask.numpy())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=3e-5, atol=3e-5)
