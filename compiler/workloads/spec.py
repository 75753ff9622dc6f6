"""JSON workload specs: `{"op": ..., "params": ..., "dtype": ...}` for a registered operator, or
`{"expr": ..., "inputs": ..., "dtype": ...}` for a custom expression program."""

from __future__ import annotations

from compiler.workloads import ops  # noqa: F401  (registers the operators)
from compiler.workloads.custom import custom_workload
from compiler.workloads.registry import op_workload
from compiler.workloads.workload import DTYPES, Workload, WorkloadError, show

_OP_KEYS = ("op", "params", "dtype")
_EXPR_KEYS = ("expr", "inputs", "dtype")


def workload_from_spec(spec: object) -> Workload:
    """Validate `spec` and build its workload; `Workload.spec` is the canonical form of `spec`
    (defaults filled in, params sorted, the expression re-printed), so equal workloads give equal specs.
    Any problem raises WorkloadError whose `.field` is the dotted path of the culprit."""
    if not isinstance(spec, dict):
        raise WorkloadError("spec", f"must be an object, got {show(spec)}")
    if "op" in spec and "expr" in spec:
        raise WorkloadError("expr", "give either 'op' (a registered operator) or 'expr', not both")
    allowed = _EXPR_KEYS if "expr" in spec else _OP_KEYS
    for key in spec:
        if key not in allowed:
            raise WorkloadError(str(key), f"unknown key; expected some of {', '.join(allowed)}")
    dtype = spec.get("dtype", "float32")
    if dtype not in DTYPES:
        raise WorkloadError("dtype", f"must be one of {', '.join(DTYPES)}, got {show(dtype)}")
    if "expr" in spec:
        if "inputs" not in spec:
            raise WorkloadError("inputs", "missing: a custom expression needs its input shapes")
        return custom_workload(spec["expr"], spec["inputs"], dtype)
    if "op" not in spec:
        raise WorkloadError("op", "missing: give 'op' (a registered operator) or 'expr'")
    if not isinstance(spec["op"], str):
        raise WorkloadError("op", f"must be a string, got {show(spec['op'])}")
    return op_workload(spec["op"], spec.get("params", {}), dtype)
