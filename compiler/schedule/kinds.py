"""The registered instruction kinds: one entry per schedule primitive (see instruction.py).

They sit together, rather than next to their transforms, because each applies by calling its typed
Schedule method: one table that reads as the trace vocabulary, and transform modules that know
nothing of traces. Pure kinds only look at the program (queries and sampling).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.schedule import sampling
from compiler.schedule.instruction import (
    BLOCK,
    BLOCK_OR_LOOP,
    BUFFER_REF,
    FACTORS,
    INT,
    INTS,
    LOOP,
    LOOPS,
    NUMBERS,
    SCALAR,
    STR,
    Arg,
    Decision,
    InstructionKind,
    Outputs,
    is_int,
    register,
)
from compiler.schedule.rv import BlockRV, IntRV, LoopRV

NOTHING = Outputs()
ONE_BLOCK = Outputs(BlockRV)
ONE_LOOP = Outputs(LoopRV)
ONE_INT = Outputs(IntRV)
BLOCKS = Outputs(BlockRV, many=True)
LOOP_LIST = Outputs(LoopRV, many=True)
INT_LIST = Outputs(IntRV, many=True)


def _tile_decision(decision: Any, args: Mapping[str, Any]) -> bool:
    """n positive ints; when n is itself sampled (a reference), only its value at replay says how many."""
    n = args["n"] if is_int(args["n"]) else len(decision) if isinstance(decision, list) else 0
    return sampling.is_tile_decision(decision, n)


INDEX = Decision("an index", lambda decision, _: is_int(decision))

# --- queries -----------------------------------------------------------------------------------------
GET_BLOCK = register(
    InstructionKind(
        "get_block", (Arg("name", STR),), ONE_BLOCK, lambda sch, a, _: sch.get_block(a["name"]), pure=True
    )
)
GET_LOOPS = register(
    InstructionKind(
        "get_loops", (Arg("block", BLOCK),), LOOP_LIST, lambda sch, a, _: sch.get_loops(a["block"]), pure=True
    )
)
GET_INNERMOST_LOOP = register(
    InstructionKind(
        "get_innermost_loop",
        (Arg("block", BLOCK),),
        ONE_LOOP,
        lambda sch, a, _: sch.get_innermost_loop(a["block"]),
        pure=True,
    )
)
GET_CHILD_BLOCKS = register(
    InstructionKind(
        "get_child_blocks",
        (Arg("parent", BLOCK_OR_LOOP),),
        BLOCKS,
        lambda sch, a, _: sch.get_child_blocks(a["parent"]),
        pure=True,
    )
)
GET_PRODUCERS = register(
    InstructionKind(
        "get_producers",
        (Arg("block", BLOCK),),
        BLOCKS,
        lambda sch, a, _: sch.get_producers(a["block"]),
        pure=True,
    )
)
GET_CONSUMERS = register(
    InstructionKind(
        "get_consumers",
        (Arg("block", BLOCK),),
        BLOCKS,
        lambda sch, a, _: sch.get_consumers(a["block"]),
        pure=True,
    )
)

# --- loop transformations ----------------------------------------------------------------------------
SPLIT = register(
    InstructionKind(
        "split",
        (Arg("loop", LOOP), Arg("factors", FACTORS)),
        LOOP_LIST,
        lambda sch, a, _: sch.split(a["loop"], a["factors"]),
    )
)
FUSE = register(
    InstructionKind("fuse", (Arg("loops", LOOPS),), ONE_LOOP, lambda sch, a, _: sch.fuse(*a["loops"]))
)
REORDER = register(
    InstructionKind("reorder", (Arg("loops", LOOPS),), NOTHING, lambda sch, a, _: sch.reorder(*a["loops"]))
)
PARALLEL = register(
    InstructionKind("parallel", (Arg("loop", LOOP),), NOTHING, lambda sch, a, _: sch.parallel(a["loop"]))
)
VECTORIZE = register(
    InstructionKind("vectorize", (Arg("loop", LOOP),), NOTHING, lambda sch, a, _: sch.vectorize(a["loop"]))
)
UNROLL = register(
    InstructionKind("unroll", (Arg("loop", LOOP),), NOTHING, lambda sch, a, _: sch.unroll(a["loop"]))
)
ANNOTATE = register(
    InstructionKind(
        "annotate",
        (Arg("target", BLOCK_OR_LOOP), Arg("key", STR), Arg("value", SCALAR)),
        NOTHING,
        lambda sch, a, _: sch.annotate(a["target"], a["key"], a["value"]),
    )
)

# --- compute location --------------------------------------------------------------------------------
COMPUTE_AT = register(
    InstructionKind(
        "compute_at",
        (Arg("block", BLOCK), Arg("loop", LOOP)),
        NOTHING,
        lambda sch, a, _: sch.compute_at(a["block"], a["loop"]),
    )
)
REVERSE_COMPUTE_AT = register(
    InstructionKind(
        "reverse_compute_at",
        (Arg("block", BLOCK), Arg("loop", LOOP)),
        NOTHING,
        lambda sch, a, _: sch.reverse_compute_at(a["block"], a["loop"]),
    )
)
COMPUTE_INLINE = register(
    InstructionKind(
        "compute_inline", (Arg("block", BLOCK),), NOTHING, lambda sch, a, _: sch.compute_inline(a["block"])
    )
)
REVERSE_COMPUTE_INLINE = register(
    InstructionKind(
        "reverse_compute_inline",
        (Arg("block", BLOCK),),
        NOTHING,
        lambda sch, a, _: sch.reverse_compute_inline(a["block"]),
    )
)

# --- buffers and reductions --------------------------------------------------------------------------
CACHE_READ = register(
    InstructionKind(
        "cache_read",
        (Arg("block", BLOCK), Arg("read_buffer_index", INT), Arg("scope", STR)),
        ONE_BLOCK,
        lambda sch, a, _: sch.cache_read(a["block"], a["read_buffer_index"], a["scope"]),
    )
)
CACHE_WRITE = register(
    InstructionKind(
        "cache_write",
        (Arg("block", BLOCK), Arg("write_buffer_index", INT), Arg("scope", STR)),
        ONE_BLOCK,
        lambda sch, a, _: sch.cache_write(a["block"], a["write_buffer_index"], a["scope"]),
    )
)
DECOMPOSE_REDUCTION = register(
    InstructionKind(
        "decompose_reduction",
        (Arg("block", BLOCK), Arg("loop", LOOP)),
        ONE_BLOCK,
        lambda sch, a, _: sch.decompose_reduction(a["block"], a["loop"]),
    )
)
RFACTOR = register(
    InstructionKind(
        "rfactor",
        (Arg("loop", LOOP), Arg("factor_axis", INT)),
        ONE_BLOCK,
        lambda sch, a, _: sch.rfactor(a["loop"], a["factor_axis"]),
    )
)

# --- buffer layout and storage ------------------------------------------------------------------------
TRANSFORM_LAYOUT = register(
    InstructionKind(
        "transform_layout",
        (Arg("block", BLOCK), Arg("buffer", BUFFER_REF), Arg("index_map", STR)),
        NOTHING,
        lambda sch, a, _: sch.transform_layout(a["block"], a["buffer"], a["index_map"]),
    )
)
STORAGE_ALIGN = register(
    InstructionKind(
        "storage_align",
        (
            Arg("block", BLOCK),
            Arg("buffer_index", INT),
            Arg("axis", INT),
            Arg("factor", INT),
            Arg("offset", INT),
        ),
        NOTHING,
        lambda sch, a, _: sch.storage_align(
            a["block"], a["buffer_index"], a["axis"], a["factor"], a["offset"]
        ),
    )
)
SET_SCOPE = register(
    InstructionKind(
        "set_scope",
        (Arg("block", BLOCK), Arg("buffer_index", INT), Arg("storage_scope", STR)),
        NOTHING,
        lambda sch, a, _: sch.set_scope(a["block"], a["buffer_index"], a["storage_scope"]),
    )
)

TENSORIZE = register(
    InstructionKind(
        "tensorize",
        (Arg("loop", LOOP), Arg("tensor_intrin", STR)),
        NOTHING,
        lambda sch, a, _: sch.tensorize(a["loop"], a["tensor_intrin"]),
    )
)

# --- sampling ----------------------------------------------------------------------------------------
SAMPLE_PERFECT_TILE = register(
    InstructionKind(
        "sample_perfect_tile",
        (Arg("loop", LOOP), Arg("n", INT), Arg("max_innermost_factor", INT)),
        INT_LIST,
        lambda sch, a, d: sch.sample_perfect_tile(a["loop"], a["n"], a["max_innermost_factor"], decision=d),
        pure=True,
        decision=Decision("a list of n positive ints", _tile_decision),
    )
)
SAMPLE_COVERING_TILE = register(
    InstructionKind(
        "sample_covering_tile",
        (Arg("loop", LOOP), Arg("n", INT), Arg("max_innermost_factor", INT), Arg("multiple", INT)),
        INT_LIST,
        lambda sch, a, d: sch.sample_covering_tile(
            a["loop"], a["n"], a["max_innermost_factor"], a["multiple"], decision=d
        ),
        pure=True,
        decision=Decision("a list of n positive ints", _tile_decision),
    )
)
SAMPLE_CATEGORICAL = register(
    InstructionKind(
        "sample_categorical",
        (Arg("candidates", INTS), Arg("probs", NUMBERS)),
        ONE_INT,
        lambda sch, a, d: sch.sample_categorical(a["candidates"], a["probs"], decision=d),
        pure=True,
        decision=INDEX,
    )
)
SAMPLE_COMPUTE_LOCATION = register(
    InstructionKind(
        "sample_compute_location",
        (Arg("block", BLOCK),),
        ONE_LOOP,
        lambda sch, a, d: sch.sample_compute_location(a["block"], decision=d),
        pure=True,
        decision=INDEX,
    )
)
