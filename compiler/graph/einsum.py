"""Einsum (ONNX's Einsum; torch.export decomposes torch.einsum itself) as the graph operators that
exist: each operand's letters found in no other operand nor the output summed away, then operands
taken pairwise as one batched matmul (the shared output letters the batch, the shared others the
contraction, each operand's own letters a row or a column block) between transposes and reshapes,
and a final transpose to the output's order. A letter repeated within one operand (`ii->i`, a
trace `ii->`) first takes that operand's diagonal: the two axes moved last, merged, and every
(n + 1)-th element taken."""

from __future__ import annotations

import math
import string
from collections.abc import Sequence

import numpy as np

from compiler.graph.builder import GraphBuilder
from compiler.graph.ir import GraphError, Node

Letters = list[str]


def einsum(b: GraphBuilder, name: str, equation: str, operands: Sequence[Node]) -> Node:
    inputs, output = _parse(name, equation.replace(" ", ""), [len(x.type.shape) for x in operands])
    diagonals = [_diagonal(b, name, x, letters) for x, letters in zip(operands, inputs)]
    operands, inputs = [d[0] for d in diagonals], [d[1] for d in diagonals]
    sizes: dict[str, int] = {}
    for letters, x in zip(inputs, operands):
        for letter, n in zip(letters, x.type.shape):
            if sizes.get(letter, 1) not in (1, n) and n != 1:
                raise GraphError(
                    name, "Einsum", f"{letter!r} is {sizes[letter]} in one operand and {n} in another"
                )
            sizes[letter] = max(sizes.get(letter, 1), n)
    acc, acc_letters = operands[0], inputs[0]
    for k in range(1, len(operands)):
        later = set(output).union(*inputs[k + 1 :])
        acc, acc_letters = _contract(b, name, acc, acc_letters, operands[k], inputs[k], later)
    acc, acc_letters = _sum_unused(b, name, acc, acc_letters, set(output))
    if acc_letters != output:
        acc = b.call("transpose", [acc], name=name, axes=tuple(acc_letters.index(c) for c in output))
    return acc if output else b.call("reshape", [acc], name=name, shape=(1,))


def _diagonal(b: GraphBuilder, name: str, x: Node, letters: Letters) -> tuple[Node, Letters]:
    """`x` with each letter it repeats taken along its diagonal, once."""
    while len(set(letters)) != len(letters):
        letter = next(c for c in letters if letters.count(c) > 1)
        p, q = [k for k, c in enumerate(letters) if c == letter][:2]
        n = x.type.shape[p]
        if x.type.shape[q] != n:
            raise GraphError(
                name, "Einsum", f"{letter!r} names axes of sizes {n} and {x.type.shape[q]} in one operand"
            )
        rest = [k for k in range(len(letters)) if k not in (p, q)]
        order = (*rest, p, q)
        if order != tuple(range(len(letters))):
            x = b.call("transpose", [x], name=name, axes=order)
        x = b.call("reshape", [x], name=name, shape=(*x.type.shape[:-2], n * n))
        rows = b.constant(f"{name}_diagonal", np.arange(n, dtype=np.int64) * (n + 1))
        x = b.call("take", [x, rows], name=name, axis=len(rest))
        letters = [letters[k] for k in rest] + [letter]
    return x, letters


def _parse(name: str, equation: str, ranks: Sequence[int]) -> tuple[list[Letters], Letters]:
    """Each operand's letters and the output's, an ellipsis spelled out as letters of its own
    (aligned from the right, as numpy broadcasts); the implicit output is the letters used once."""
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise GraphError(name, "Einsum", f"{equation!r} has {len(terms)} operands, the node {len(ranks)}")
    spare = [c for c in string.ascii_uppercase + string.ascii_lowercase if c not in equation]
    widest = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0)
    ellipsis = spare[:widest]
    inputs: list[Letters] = []
    for term, rank in zip(terms, ranks):
        named = term.replace("...", "")
        if not named.isalpha() and named:
            raise GraphError(name, "Einsum", f"{equation!r}: only letters and '...' may name axes")
        letters = (
            list(term.replace("...", "".join(ellipsis[widest - (rank - len(named)) :])))
            if "..." in term
            else list(term)
        )
        if len(letters) != rank:
            raise GraphError(
                name, "Einsum", f"{term!r} names {len(letters)} axes of an operand of rank {rank}"
            )
        inputs.append(letters)
    if arrow:
        output = list(rhs.replace("...", "".join(ellipsis)))
    else:
        counts = [c for letters in inputs for c in letters]
        output = ellipsis + sorted(c for c in set(counts) if counts.count(c) == 1 and c not in ellipsis)
    if any(c not in {x for letters in inputs for x in letters} for c in output) or len(set(output)) != len(
        output
    ):
        raise GraphError(
            name, "Einsum", f"the output of {equation!r} names an axis twice or one no operand has"
        )
    return inputs, output


def _sum_unused(
    b: GraphBuilder, name: str, x: Node, letters: Letters, keep: set[str]
) -> tuple[Node, Letters]:
    axes = tuple(k for k, c in enumerate(letters) if c not in keep)
    if not axes:
        return x, letters
    kept = [c for c in letters if c in keep]
    out = b.call("sum", [x], name=name, axes=axes, keepdims=not kept)
    return (out if kept else b.call("reshape", [out], name=name, shape=(1,))), kept


def _contract(
    b: GraphBuilder,
    name: str,
    x: Node,
    x_letters: Letters,
    y: Node,
    y_letters: Letters,
    keep: set[str],
) -> tuple[Node, Letters]:
    """x and y as one batched matmul; the result's letters: batch, x's own, y's own."""
    x, x_letters = _sum_unused(b, name, x, x_letters, keep | set(y_letters))
    y, y_letters = _sum_unused(b, name, y, y_letters, keep | set(x_letters))
    shared = [c for c in x_letters if c in y_letters]
    batch = [c for c in shared if c in keep]
    inner = [c for c in shared if c not in keep]
    rows = [c for c in x_letters if c not in shared]
    cols = [c for c in y_letters if c not in shared]
    own = dict(zip(y_letters, y.type.shape)) | dict(zip(x_letters, x.type.shape))
    left = _arranged(b, name, x, x_letters, batch, rows, inner)
    right = _arranged(b, name, y, y_letters, batch, inner, cols)
    product = b.call("matmul", [left, right], name=name)
    shape = (*product.type.shape[:-2], *(own[c] for c in rows + cols))
    return b.call("reshape", [product], name=name, shape=shape or (1,)), batch + rows + cols


def _arranged(
    b: GraphBuilder,
    name: str,
    x: Node,
    letters: Letters,
    batch: Letters,
    first: Letters,
    second: Letters,
) -> Node:
    """x transposed to (batch, first, second) and reshaped to (batch, prod(first), prod(second)),
    each batch axis keeping its own size (1 broadcasts in the matmul)."""
    order = batch + first + second
    if order != letters:
        x = b.call("transpose", [x], name=name, axes=tuple(letters.index(c) for c in order))
    own = dict(zip(order, x.type.shape))
    shape = (
        *(own[c] for c in batch),
        math.prod(own[c] for c in first),
        math.prod(own[c] for c in second),
    )
    return x if x.type.shape == shape else b.call("reshape", [x], name=name, shape=shape)
