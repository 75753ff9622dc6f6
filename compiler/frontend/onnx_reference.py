"""Folding an ONNX node whose inputs are all known at import, with ONNX's own reference
implementation (`onnx.reference`): the shape arithmetic of real exports (Equal, Where, Ceil, Trilu,
CumSum on position ids and masks of a static length) costs nothing at run time, and needs no numpy
twin of ours for every operator the exporters use there."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator


class FoldError(ValueError):
    """The reference implementation refused or failed on the node's inputs."""


def fold_with_reference(
    node: onnx.NodeProto, inputs: Sequence[np.ndarray | None], opset: int
) -> list[np.ndarray]:
    """The outputs of `node` (its attributes as they are, at `opset`) on `inputs` (None for an
    omitted optional input), computed by the onnx package's reference evaluator."""
    names = [f"in{k}" if value is not None else "" for k, value in enumerate(inputs)]
    outputs = [f"out{k}" if name else "" for k, name in enumerate(node.output)]
    single = helper.make_node(node.op_type, names, outputs, domain=node.domain)
    single.attribute.extend(node.attribute)
    graph = helper.make_graph(
        [single],
        "fold",
        [],
        [helper.make_empty_tensor_value_info(o) for o in outputs if o],
        initializer=[numpy_helper.from_array(v, n) for n, v in zip(names, inputs) if v is not None],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        values = ReferenceEvaluator(model).run(None, {})
    except Exception as e:  # a third-party implementation: any failure is the node's refusal
        raise FoldError(f"folding it failed: {type(e).__name__}: {e}") from None
    return [np.asarray(v) for v in values]
