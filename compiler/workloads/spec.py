"""JSON workload specs: `{"op": ..., "params": ..., "dtype": ...}` for a registered operator,
`{"expr": ..., "inputs": ..., "dtype": ...}` for a custom expression program, or
`{"primfunc": ..., "num_inputs": ...}` for a serialized PrimFunc (a fused graph kernel), or
`{"tvmscript": ..., "num_inputs": ...}` for a PrimFunc written in TVMScript (num_inputs optional)."""

from __future__ import annotations

from compiler.workloads import ops  # noqa: F401  (registers the operators)
from compiler.workloads.custom import custom_workload
from compiler.workloads.primfunc_spec import primfunc_workload
from compiler.workloads.registry import op_workload
from compiler.workloads.script_spec import script_workload
from compiler.workloads.workload import DTYPES, Workload, WorkloadError, show

# The keys of each kind of spec; the first names the kind.
_KEYS = {
    "op": ("op", "params", "dtype"),
    "expr": ("expr", "inputs", "dtype"),
    "primfunc": ("primfunc", "num_inputs"),
    "tvmscript": ("tvmscript", "num_inputs"),
}


def workload_from_spec(spec: object) -> Workload:
    """Validate `spec` and build its workload; `Workload.spec` is the canonical form of `spec`
    (defaults filled in, params sorted, the expression re-printed, the function re-serialized), so
    equal workloads give equal specs. Any problem raises WorkloadError whose `.field` is the dotted
    path of the culprit."""
    if not isinstance(spec, dict):
        raise WorkloadError("spec", f"must be an object, got {show(spec)}")
    kinds = [k for k in _KEYS if k in spec]
    if len(kinds) > 1:
        raise WorkloadError(kinds[1], f"give one of {', '.join(map(repr, _KEYS))}, not both")
    kind = kinds[0] if kinds else "op"
    for key in spec:
        if key not in _KEYS[kind]:
            raise WorkloadError(str(key), f"unknown key; expected some of {', '.join(_KEYS[kind])}")
    if kind == "primfunc":
        if "num_inputs" not in spec:
            raise WorkloadError("num_inputs", "missing: how many of the function's parameters are inputs")
        return primfunc_workload(spec["primfunc"], spec["num_inputs"])
    if kind == "tvmscript":
        return script_workload(spec["tvmscript"], spec.get("num_inputs"))
    dtype = spec.get("dtype", "float32")
    if dtype not in DTYPES:
        raise WorkloadError("dtype", f"must be one of {', '.join(DTYPES)}, got {show(dtype)}")
    if kind == "expr":
        if "inputs" not in spec:
            raise WorkloadError("inputs", "missing: a custom expression needs its input shapes")
        return custom_workload(spec["expr"], spec["inputs"], dtype)
    if "op" not in spec:
        raise WorkloadError(
            "op", "missing: give 'op' (a registered operator), 'expr', 'primfunc' or 'tvmscript'"
        )
    if not isinstance(spec["op"], str):
        raise WorkloadError("op", f"must be a string, got {show(spec['op'])}")
    return op_workload(spec["op"], spec.get("params", {}), dtype)
