"""An exported model library: a C program built against its header with the system compiler runs
the model and matches Python; loaded back into Python, it is the same callable as graph.build."""

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

from compiler import graph
from compiler.graph import GraphBuilder, LibraryError, Module
from compiler.target import Target
from tests.compiler.graph.test_graph_passes import conv, random_inputs, residual_block, weights


def odd_outputs() -> Module:
    """Outputs that no kernel writes in place: the input itself, a weight, one tensor twice; and an
    output that a later kernel reads."""
    b = GraphBuilder()
    x = b.input("x", (3, 5), "float32")
    w = b.constant("w", weights(5, 4))
    h = b.call("tanh", [b.call("matmul", [x, w])])
    y = b.call("exp", [b.call("softmax", [h], axis=1)])
    return b.module([y, x, h, w, y])


def typed_io() -> Module:
    """Inputs and outputs of every kind of element: int64 ids, a bool mask, floats, int32 counts."""
    b = GraphBuilder()
    ids, keep, x = (
        b.input("ids", (2, 5), "int64"),
        b.input("keep", (2, 5), "bool"),
        b.input("x", (2, 5), "float32"),
    )
    hit = b.call("logical_and", [keep, b.call("greater", [ids, b.constant("zero", np.array([0]))])])
    y = b.call("where", [hit, x, b.constant("fill", np.array([-1.0], np.float32))])
    count = b.call("sum", [b.call("cast", [hit], dtype="int32")], axes=(1,), keepdims=False)
    return b.module([y, count, hit])


def winograd_layer() -> Module:
    """A 3x3 conv of 32 channels at 28x28, computed by Winograd: its transforms (400 KB each) are
    workspaces the kernel mallocs on each call, which the library keeps for the next call."""
    b = GraphBuilder()
    x = b.input("x", (1, 32, 28, 28), "float32")
    out = conv(b, x, 32, 32)
    return b.module([b.call("relu", [out])])


def c_program(model: graph.CompiledModel) -> str:
    """Reads each input from argv's files, runs the model, writes each output to a file; prints the
    header's shape macros first, so the test checks them too."""
    n_in, n_out = len(model.module.inputs), len(model.module.outputs)
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        '#include "model.h"',
        "static void *load(const char *path, long n, size_t size) {",
        '  void *p = malloc(n * size); FILE *f = fopen(path, "rb");',
        "  if (!f || fread(p, size, n, f) != (size_t)n) exit(2);",
        "  fclose(f); return p;",
        "}",
        "int main(int argc, char **argv) {",
        f"  if (argc != {n_in + n_out + 1}) return 3;",
        "  const void *inputs[TENSOR_TUNER_NUM_INPUTS]; void *outputs[TENSOR_TUNER_NUM_OUTPUTS];",
        "  size_t bytes[TENSOR_TUNER_NUM_OUTPUTS];",
    ]
    for k in range(n_in):
        lines += [
            f"  long in{k}[] = TENSOR_TUNER_INPUT{k}_SHAPE;",
            f'  printf("input {k}");',
            f'  for (int d = 0; d < TENSOR_TUNER_INPUT{k}_NDIM; d++) printf(" %ld", in{k}[d]);',
            '  printf("\\n");',
            f"  inputs[{k}] = load(argv[{k + 1}], TENSOR_TUNER_INPUT{k}_SIZE,",
            f"                     sizeof(TENSOR_TUNER_INPUT{k}_TYPE));",
        ]
    for k in range(n_out):
        lines += [
            f"  long out{k}[] = TENSOR_TUNER_OUTPUT{k}_SHAPE;",
            f'  printf("output {k}");',
            f'  for (int d = 0; d < TENSOR_TUNER_OUTPUT{k}_NDIM; d++) printf(" %ld", out{k}[d]);',
            '  printf("\\n");',
            f"  bytes[{k}] = TENSOR_TUNER_OUTPUT{k}_SIZE * sizeof(TENSOR_TUNER_OUTPUT{k}_TYPE);",
            f"  outputs[{k}] = malloc(bytes[{k}]);",
        ]
    lines += [
        "  for (int run = 0; run < 2; run++)",
        "    if (tensor_tuner_run(inputs, outputs) != 0) return 4;",
        "  if (tensor_tuner_run(NULL, outputs) != 1) return 5;",
        "  for (int k = 0; k < TENSOR_TUNER_NUM_OUTPUTS; k++) {",
        f'    FILE *f = fopen(argv[{n_in + 1} + k], "wb");',
        "    fwrite(outputs[k], 1, bytes[k], f); fclose(f);",
        "  }",
        "  return 0;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def run_c_program(model: graph.CompiledModel, inputs: list[np.ndarray], work: Path) -> list[np.ndarray]:
    library, header = model.export(work / "model.so")
    assert header == work / "model.h" and header.exists()
    (work / "main.c").write_text(c_program(model))
    subprocess.run(
        ["cc", "-O2", "-Wall", "-Werror", "-o", str(work / "main"), str(work / "main.c"), str(library)]
        + [f"-Wl,-rpath,{work}"],
        check=True,
    )
    in_paths, out_paths = [], []
    for k, array in enumerate(inputs):
        in_paths.append(work / f"in{k}.bin")
        array.astype(model.module.inputs[k].type.dtype).tofile(in_paths[-1])
    out_paths = [work / f"out{k}.bin" for k in range(len(model.module.outputs))]
    done = subprocess.run(
        [str(work / "main"), *map(str, in_paths), *map(str, out_paths)],
        capture_output=True,
        text=True,
        check=True,
    )
    shapes = [" ".join(map(str, t.type.shape)) for t in (*model.module.inputs, *model.module.outputs)]
    kinds = ["input"] * len(model.module.inputs) + ["output"] * len(model.module.outputs)
    counters: dict[str, int] = {"input": 0, "output": 0}
    expected = []
    for kind, shape in zip(kinds, shapes):
        expected.append(f"{kind} {counters[kind]} {shape}")
        counters[kind] += 1
    assert done.stdout.splitlines() == expected
    return [
        np.fromfile(p, dtype=o.type.dtype).reshape(o.type.shape)
        for p, o in zip(out_paths, model.module.outputs)
    ]


@pytest.mark.parametrize("make", [residual_block, odd_outputs, typed_io, winograd_layer])
def test_a_c_program_runs_the_exported_model_and_matches_python(make, tmp_path: Path) -> None:
    module = make()
    inputs = random_inputs(module)
    model = graph.build(graph.optimize(module))
    want = model(*inputs)
    for got, expected in zip(run_c_program(model, inputs, tmp_path), want):
        np.testing.assert_array_equal(got, expected)
    for got, expected in zip(want, graph.run_reference(module, inputs)):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_the_loaded_library_is_the_same_callable_as_build(tmp_path: Path) -> None:
    module = residual_block()
    inputs = random_inputs(module)
    model = graph.build(graph.optimize(module))
    model.export(tmp_path / "block.so")
    loaded = graph.load_library(tmp_path / "block.so")
    np.testing.assert_array_equal(loaded(*inputs)[0], model(*inputs)[0])
    assert loaded.inputs[0].shape == (1, 8, 9, 7) and loaded.metadata["target"]["key"] == model.target.key
    with pytest.raises(ValueError, match="expected shape"):
        loaded(np.zeros((1, 8, 7, 9), "float32"))
    with pytest.raises(TypeError, match="takes 1 inputs"):
        loaded()


def test_two_libraries_load_side_by_side(tmp_path: Path) -> None:
    """Kernel symbols are local to each library, so two models with same-named kernels coexist."""
    first, second = residual_block(), residual_block()
    inputs = random_inputs(first)
    models = [graph.build(graph.optimize(m)) for m in (first, second)]
    for k, model in enumerate(models):
        model.export(tmp_path / f"m{k}.so")
    loaded = [graph.load_library(tmp_path / f"m{k}.so") for k in range(2)]
    for model, lib in zip(models, loaded):
        np.testing.assert_array_equal(lib(*inputs)[0], model(*inputs)[0])
    exported = subprocess.run(
        ["nm", "-D", "--defined-only", str(tmp_path / "m0.so")], capture_output=True, text=True
    )
    assert sorted(line.split()[-1] for line in exported.stdout.splitlines()) == [
        "tensor_tuner_metadata",
        "tensor_tuner_run",
    ]


def test_a_renamed_header_is_the_header_export_writes_under_the_new_name(tmp_path: Path) -> None:
    """A library saved under another name (a downloaded artifact) gets its header renamed, include
    guard and all, so two models' headers can be included in one program."""
    model = graph.build(graph.optimize(residual_block()))
    _, header = model.export(tmp_path / "model.so")
    _, direct = model.export(tmp_path / "resnet-18.so")
    renamed = graph.rename_header(header.read_text(), "model.so", "resnet-18.so")
    assert renamed == direct.read_text() and "#ifndef TENSOR_TUNER_RESNET_18_H" in renamed
    with pytest.raises(ValueError, match=r"not a header written for other\.so"):
        graph.rename_header(header.read_text(), "other.so", "x.so")


def test_null_arrays_are_an_error_code_not_a_crash(tmp_path: Path) -> None:
    model = graph.build(graph.optimize(residual_block()))
    path, _ = model.export(tmp_path / "block.so")
    run = ctypes.CDLL(str(path)).tensor_tuner_run
    run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    assert run(None, None) == 1


def test_a_library_for_a_cpu_this_one_is_not_refuses_to_load(tmp_path: Path, monkeypatch) -> None:
    model = graph.build(graph.optimize(residual_block()))
    model.export(tmp_path / "block.so")
    host = Target.host()
    fewer = ",".join(f for f in host.features.split(",") if f not in ("+avx2", "+fma"))
    monkeypatch.setattr(
        Target, "host", classmethod(lambda cls, cores=None: Target(host.triple, "x86-64", fewer, 2))
    )
    with pytest.raises(LibraryError, match="lacks avx2, fma"):
        graph.load_library(tmp_path / "block.so")


def test_export_into_a_missing_directory_names_it(tmp_path: Path) -> None:
    model = graph.build(graph.optimize(residual_block()))
    with pytest.raises(LibraryError, match="missing is not a directory"):
        model.export(tmp_path / "missing" / "block.so")


def test_export_without_a_compiler_names_it(tmp_path: Path) -> None:
    model = graph.build(graph.optimize(residual_block()))
    with pytest.raises(LibraryError, match="no C compiler 'no-such-cc'"):
        model.export(tmp_path / "block.so", cc="no-such-cc")
