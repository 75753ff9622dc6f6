"""A compiled model as one native shared library with a C header: every kernel, the forward pass
calling them in order (`compiler.graph.forward`), and the weights embedded, exporting

    int tensor_tuner_run(const void *const *inputs, void *const *outputs);
    const char *tensor_tuner_metadata(void);  /* JSON: inputs, outputs, sizes, target */

A model made for a range of sizes (`compiler.graph.symbolic`) exports instead

    int tensor_tuner_run_sized(const int64_t *sizes, const void *const *inputs, void *const *outputs);

taking the value of each size var (the header lists them with their ranges; each input's and output's
shape is written in them); a value outside its range returns 2 before anything is written.

The system C compiler links it (`cc`, as TVM's export_library does): llvmlite writes object files
but cannot link a shared library. The weights go in through the assembler's `.incbin`, so a 50 MB
model is never spelled out as source text. Everything but the two entry points is local to the
library, so two exported models load side by side in one process.

A model's native extern functions (`compiler.graph.extern`) stay in their own shared libraries: a
shared library cannot be linked into another, so the model's records each as a dependency (`-l:`),
found through an rpath of the directory it was registered from, then of the model's own ($ORIGIN,
for a library shipped beside the model). A Python extern function cannot leave this process: a
model calling one is refused."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from compiler.dtypes import INT_DTYPES
from compiler.graph import workspaces
from compiler.graph.extern import NativeFunc
from compiler.graph.forward import (
    ALIGNMENT,
    EXTERN_FAILED,
    FORWARD,
    I8P,
    I8PP,
    I32,
    I64,
    I64P,
    emit_forward,
)
from compiler.graph.native_call import (
    ExternSite,
    NativeForward,
    SizeRange,
    TensorSpec,
    model_sizes,
    model_specs,
)
from compiler.target import Target, init_llvm, parse_features

if TYPE_CHECKING:
    from compiler.graph.executor import CompiledModel

RUN = "tensor_tuner_run"
RUN_SIZED = "tensor_tuner_run_sized"
METADATA = "tensor_tuner_metadata"
WEIGHTS = "tensor_tuner_weights"
FORMAT = 1
C_TYPES = {
    "float32": "float",
    "float64": "double",
    "float16": "_Float16",
    "bfloat16": "uint16_t",  # the bits of a bfloat16 (the high half of a float32's)
    "bool": "bool",
    **{d: f"{d}_t" for d in INT_DTYPES},
}


class LibraryError(RuntimeError):
    """A library could not be written (no C compiler, or the compiler or linker failed) or loaded
    (built for a CPU with features this one lacks)."""


def export_library(model: CompiledModel, path: Path, *, cc: str = "cc") -> tuple[Path, Path]:
    """Write `path` (the shared library) and the header beside it; returns both paths."""
    if shutil.which(cc) is None:
        raise LibraryError(f"no C compiler {cc!r} on PATH: exporting links with the system compiler")
    path = Path(path)
    if not path.parent.is_dir():  # else the link, after every object is written, fails in ld's words
        raise LibraryError(f"cannot export to {path}: {path.parent} is not a directory")
    header = path.with_suffix(".h")
    externs = _native_externs(model)
    metadata = _metadata(model, externs)
    with tempfile.TemporaryDirectory(prefix="tensor-tuner-export-") as tmp:
        work = Path(tmp)
        offsets = _write_weights(model, work / "weights.bin")
        objects = [_weights_object(work, cc)]
        for k, kernel in enumerate(model.kernels.values()):
            objects.append(work / f"kernel{k}.o")
            objects[-1].write_bytes(kernel.compiled.obj)
        objects.append(work / "forward.o")
        objects[-1].write_bytes(_entry_object(model, offsets, json.dumps(metadata), externs))
        command, cache = workspaces.compile_command(cc, work)
        _run(command)
        objects.append(cache)
        exports = work / "exports.map"
        exports.write_text(f"{{ global: {_entry(metadata)}; {METADATA}; local: *; }};\n")
        _run(
            [cc, "-shared", "-o", str(path), *map(str, objects), f"-Wl,--version-script={exports}"]
            + ["-Wl,-z,text", "-Wl,-z,noexecstack", *workspaces.LINK_FLAGS, *_extern_flags(externs)]
            + ["-lgomp", "-lm"]
        )
    header.write_text(c_header(path.name, metadata))
    return path, header


def _native_externs(model: CompiledModel) -> list[NativeFunc]:
    """The native function of each extern call; a LibraryError for a Python one, or for two
    libraries' functions of one symbol (the dynamic linker would bind both calls to one of them)."""
    out = []
    for call, func in zip(model.forward_plan.externs, model.externs):
        if not isinstance(func, NativeFunc):
            raise LibraryError(
                f"node {call.node!r} calls the Python function {call.func!r}, which only runs in this "
                "process: register a native function (register_native_func) to export the model"
            )
        out.append(func)
    for a in out:
        clash = next((b for b in out if b.symbol == a.symbol and b.library != a.library), None)
        if clash is not None:
            raise LibraryError(
                f"extern functions {a.name!r} and {clash.name!r} are both the symbol {a.symbol!r}, "
                f"of {a.library} and {clash.library}: one library would serve both"
            )
    return out


def _extern_flags(externs: list[NativeFunc]) -> list[str]:
    """The link flags recording each extern library as a dependency, found where it was registered
    from or beside the model."""
    flags = []
    for library in dict.fromkeys(f.library for f in externs):
        flags += [f"-L{library.parent}", f"-l:{library.name}", f"-Wl,-rpath,{library.parent}"]
    return flags + (["-Wl,-rpath,$ORIGIN"] if externs else [])


class NativeModel(NativeForward):
    """An exported library loaded into this process: called like `graph.build`'s model."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._library = ctypes.CDLL(str(path))
        describe = getattr(self._library, METADATA)
        describe.restype = ctypes.c_char_p
        self.metadata: dict[str, Any] = json.loads(describe())
        _check_cpu(path, self.metadata["target"])
        sizes = [SizeRange.from_json(s) for s in self.metadata.get("sizes", [])]
        run = getattr(self._library, _entry(self.metadata))
        run.argtypes = [ctypes.c_void_p] * (3 if sizes else 2)
        run.restype = ctypes.c_int
        super().__init__(
            [TensorSpec.from_json(i) for i in self.metadata["inputs"]],
            [TensorSpec.from_json(o) for o in self.metadata["outputs"]],
            (lambda ins, outs, values: run(values, ins, outs))
            if sizes
            else (lambda ins, outs, _: run(ins, outs)),
            sizes,
            [ExternSite.from_json(e) for e in self.metadata.get("externs", [])],
        )


def load_library(path: str | Path) -> NativeModel:
    """Load a library written by `CompiledModel.export`, checking that this CPU can run its code."""
    return NativeModel(Path(path).resolve())


def c_header(library: str, metadata: dict[str, Any]) -> str:
    """The header declaring the entry points and every input's and output's shape."""
    sizes = metadata.get("sizes", [])
    names = ", ".join(z["name"] for z in sizes)
    call = f"{RUN_SIZED}(sizes, inputs, outputs)" if sizes else f"{RUN}(inputs, outputs)"
    lines = [
        f"/* The model in {library}, compiled by tensor-tuner for {metadata['target']['mcpu']}",
        f" * ({metadata['target']['key']}).",
        " *",
        f" * {call} runs one forward pass: inputs and outputs are the arrays below,",
        " * in this order, C-contiguous, each of its element type (TENSOR_TUNER_INPUTk_TYPE: float,",
        " * double, _Float16, int8_t ... int64_t, uint8_t ... uint64_t, bool (one byte holding 0 or 1), or",
        " * uint16_t holding a bfloat16's bits).",
        *(
            [
                f" * sizes holds the value of each size var ({names}), in this order; the shapes below",
                " * are written in them (the SHAPE and SIZE macros take their values).",
                " * It returns 0 on success, 1 when an argument is NULL, and 2 when a size is outside its",
                " * range (nothing is written then). It is not reentrant (the intermediates live in the",
            ]
            if sizes
            else [
                " * It returns 0 on success and 1 when inputs or outputs is NULL. It is not reentrant (the",
            ]
        ),
        " * library's static storage): one call at a time per process.",
        *_extern_lines(metadata.get("externs", [])),
        " * Its parallel loops run on libgomp's threads (OMP_NUM_THREADS). */",
        f"#ifndef {_guard(library)}",
        f"#define {_guard(library)}",
        "",
        "#include <stdbool.h>",
        "#include <stdint.h>",
        "",
        f"#define TENSOR_TUNER_NUM_INPUTS {len(metadata['inputs'])}",
        f"#define TENSOR_TUNER_NUM_OUTPUTS {len(metadata['outputs'])}",
    ]
    if sizes:
        lines.append(f"#define TENSOR_TUNER_NUM_SIZES {len(sizes)}")
    for k, z in enumerate(sizes):
        lines += [
            "",
            f"/* size {k}: {z['name']}, from {z['min']} to {z['max']} */",
            f'#define TENSOR_TUNER_SIZE{k}_NAME "{z["name"]}"',
            f"#define TENSOR_TUNER_SIZE{k}_MIN {z['min']}",
            f"#define TENSOR_TUNER_SIZE{k}_MAX {z['max']}",
        ]
    for kind, tensors in (("INPUT", metadata["inputs"]), ("OUTPUT", metadata["outputs"])):
        for k, t in enumerate(tensors):
            lines += ["", *_tensor_macros(f"TENSOR_TUNER_{kind}{k}", kind.lower(), k, t, names)]
    entry = (
        f"int {RUN_SIZED}(const int64_t *sizes, const void *const *inputs, void *const *outputs);"
        if sizes
        else f"int {RUN}(const void *const *inputs, void *const *outputs);"
    )
    lines += [
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        entry,
        f"const char *{METADATA}(void);",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "",
        f"#endif /* {_guard(library)} */",
        "",
    ]
    return "\n".join(lines)


def _extern_lines(externs: list[dict[str, Any]]) -> list[str]:
    """The header's word on the extern functions the model calls, and their status codes."""
    if not externs:
        return []
    lines = [
        " * It calls extern functions, from shared libraries loaded with it; when extern call k",
        f" * returns non-zero, the pass stops and returns {EXTERN_FAILED} + k:",
    ]
    for k, e in enumerate(externs):
        where = f"{e['symbol']} in {_comment(e['library'])}"
        lines.append(f" *   {k}: {_comment(e['func'])} (node {_comment(e['node'])}), {where}")
    return lines


def _tensor_macros(prefix: str, kind: str, k: int, t: dict[str, Any], sizes: str) -> list[str]:
    """A tensor's NDIM, SHAPE, SIZE and TYPE; SHAPE and SIZE take the size vars where the shape has
    them (`TENSOR_TUNER_INPUT0_SHAPE(sequence)`)."""
    dims = [_dim_text(d) for d in t["shape"]]
    symbolic = any(isinstance(d, dict) for d in t["shape"])
    args = f"({sizes})" if symbolic else ""
    shape = ", ".join(dims) or "1"
    size = " * ".join(f"(int64_t){d}" for d in dims) if symbolic else str(np.prod(t["shape"], dtype=np.int64))
    form = f"{t['dtype']}[{shape}]" if t["shape"] else f"one {t['dtype']} (rank 0)"
    return [
        f"/* {kind} {k}: {_comment(t['name'])}, {form} */",
        f"#define {prefix}_NDIM {len(t['shape'])}",
        f"#define {prefix}_SHAPE{args} {{{shape}}}",
        f"#define {prefix}_SIZE{args} ({size})" if symbolic else f"#define {prefix}_SIZE {size}",
        f"#define {prefix}_TYPE {C_TYPES[t['dtype']]}",
    ]


def _dim_text(dim: int | dict[str, Any]) -> str:
    """A dimension in C: a number, or the size var's expression in parentheses."""
    if isinstance(dim, int):
        return str(dim)
    text = dim["var"] if dim["scale"] == 1 else f"{dim['scale']} * {dim['var']}"
    offset = dim["offset"]
    return f"({text}{f' + {offset}' if offset > 0 else f' - {-offset}' if offset < 0 else ''})"


def rename_header(header: str, library: str, renamed: str) -> str:
    """A header `c_header` wrote for `library`, for the same library saved as `renamed`: its comment
    and include guard name the new file, so two models' headers can be included side by side."""
    first = f"/* The model in {library}, "
    if not header.startswith(first):
        raise ValueError(f"not a header written for {library}")
    return f"/* The model in {renamed}, " + header[len(first) :].replace(_guard(library), _guard(renamed))


def _entry(metadata: dict[str, Any]) -> str:
    return RUN_SIZED if metadata.get("sizes") else RUN


def _metadata(model: CompiledModel, natives: list[NativeFunc]) -> dict[str, Any]:
    target = model.target
    inputs, outputs = model_specs(model.module)
    sizes = model_sizes(model.module)
    externs = [
        {**ExternSite(c.func, c.node).to_json(), "symbol": f.symbol, "library": str(f.library)}
        for c, f in zip(model.forward_plan.externs, natives)
    ]
    return {
        "format": FORMAT,
        "inputs": [i.to_json() for i in inputs],
        "outputs": [o.to_json() for o in outputs],
        **({"sizes": [s.to_json() for s in sizes]} if sizes else {}),
        **({"externs": externs} if externs else {}),
        "target": {
            "key": target.key,
            "triple": target.triple,
            "mcpu": target.mcpu,
            "features": target.features,
        },
    }


def _write_weights(model: CompiledModel, path: Path) -> list[int]:
    """The constants one after another, each aligned; returns their offsets."""
    offsets = []
    with path.open("wb") as out:
        for constant in model.forward_plan.constants:
            out.write(b"\0" * (-out.tell() % ALIGNMENT))
            offsets.append(out.tell())
            out.write(np.ascontiguousarray(constant.data).tobytes())
    return offsets


def _weights_object(work: Path, cc: str) -> Path:
    source = work / "weights.S"
    source.write_text(
        f'\t.section .rodata.{WEIGHTS},"a"\n'
        f"\t.balign {ALIGNMENT}\n"
        f"\t.globl {WEIGHTS}\n\t.hidden {WEIGHTS}\n"
        f"{WEIGHTS}:\n"
        f'\t.incbin "{work / "weights.bin"}"\n'
        '\t.section .note.GNU-stack,"",@progbits\n'
    )
    _run([cc, "-c", "-o", str(work / "weights.o"), str(source)])
    return work / "weights.o"


def _entry_object(
    model: CompiledModel, offsets: list[int], metadata: str, externs: list[NativeFunc]
) -> bytes:
    """Object code of the forward pass and the two exported entry points; the extern calls call
    their functions' own symbols, which the dynamic linker binds to their libraries."""
    kernels = {name: k.func for name, k in model.kernels.items()}
    module = emit_forward(model.forward_plan, kernels, [f.symbol for f in externs])
    weights = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), 0), WEIGHTS)
    weights.linkage = "external"
    arena = ir.GlobalVariable(
        module, ir.ArrayType(ir.IntType(8), model.forward_plan.arena_bytes), "tensor_tuner_arena"
    )
    arena.linkage = "internal"
    arena.initializer = ir.Constant(arena.value_type, None)
    arena.align = ALIGNMENT
    table = ir.GlobalVariable(module, ir.ArrayType(I8P, max(1, len(offsets))), "tensor_tuner_table")
    table.linkage = "internal"
    table.global_constant = True
    table.initializer = ir.Constant(table.value_type, [weights.gep([I64(0), I64(k)]) for k in offsets or [0]])
    _define_run(module, arena, table, sized=bool(model.forward_plan.size_vars))
    _define_metadata(module, metadata)
    module.triple = model.target.triple
    init_llvm()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    return model.target.target_machine(pic=True).emit_object(parsed)


def _define_run(
    module: ir.Module, arena: ir.GlobalVariable, table: ir.GlobalVariable, *, sized: bool
) -> None:
    """The exported entry: RUN(inputs, outputs), or RUN_SIZED(sizes, inputs, outputs); 1 for a NULL
    argument, else the forward pass's status."""
    params = [I64P, I8PP, I8PP] if sized else [I8PP, I8PP]
    fn = ir.Function(module, ir.FunctionType(I32, params), name=RUN_SIZED if sized else RUN)
    entry, fail, run = (fn.append_basic_block(n) for n in ("entry", "fail", "run"))
    b = ir.IRBuilder(entry)
    missing = ir.IntType(1)(0)
    for arg in fn.args:
        missing = b.or_(missing, b.icmp_unsigned("==", arg, ir.Constant(arg.type, None)))
    b.cbranch(missing, fail, run)
    b.position_at_end(fail)
    b.ret(I32(1))
    b.position_at_end(run)
    forward = module.get_global(FORWARD)
    bases = [b.bitcast(table, I8PP), b.bitcast(arena, I8P)]
    inputs, outputs = fn.args[-2:]
    sizes = fn.args[0] if sized else ir.Constant(I64P, None)
    b.ret(b.call(forward, [inputs, outputs, *bases, sizes]))


def _define_metadata(module: ir.Module, metadata: str) -> None:
    data = bytearray(metadata.encode() + b"\0")
    text = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), len(data)), "tensor_tuner_json")
    text.linkage = "internal"
    text.global_constant = True
    text.initializer = ir.Constant(text.value_type, data)
    fn = ir.Function(module, ir.FunctionType(I8P, []), name=METADATA)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.bitcast(text, I8P))


def _check_cpu(path: Path, target: dict[str, str]) -> None:
    missing = parse_features(target["features"]) - Target.host().feature_set
    if missing:
        raise LibraryError(
            f"{path} was compiled for {target['mcpu']} and this CPU lacks {', '.join(sorted(missing))}"
        )


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LibraryError(f"{' '.join(command[:2])} ... failed:\n{done.stderr.strip()}")


def _guard(library: str) -> str:
    stem = library.split(".")[0].upper()
    return "TENSOR_TUNER_" + "".join(c if c.isalnum() else "_" for c in stem) + "_H"


def _comment(name: str) -> str:
    return '"' + name.replace("*/", "* /") + '"'
