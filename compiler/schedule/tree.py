"""Navigating and editing the loop/block tree by path (child indices from the function body)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from compiler.ir import Allocate, Block, Buffer, For, SeqStmt, Stmt, Var
from compiler.schedule.errors import ScheduleError
from compiler.visit import block_reads, block_writes, blocks, free_vars, seq

Path = tuple[int, ...]


def nodes(stmt: Stmt, path: Path = ()) -> Iterator[tuple[Path, Stmt]]:
    """Every statement with its path, in execution order."""
    # An explicit stack: nested generators would pass each node up through every level above it,
    # and loop nests after tiling are 20 deep.
    stack = [(path, stmt)]
    while stack:
        p, s = stack.pop()
        yield p, s
        kids = s.children()
        for i in range(len(kids) - 1, -1, -1):
            stack.append((p + (i,), kids[i]))


def get(stmt: Stmt, path: Path) -> Stmt:
    for i in path:
        stmt = stmt.children()[i]
    return stmt


def set_at(stmt: Stmt, path: Path, new: Stmt | None) -> Stmt | None:
    """Replace the node at `path` (None deletes it; loops left empty are deleted too)."""
    if not path:
        return new
    i, rest = path[0], path[1:]
    kids = list(stmt.children())
    child = set_at(kids[i], rest, new)
    if isinstance(stmt, For | Allocate):
        return None if child is None else replace(stmt, body=child)
    assert isinstance(stmt, SeqStmt), f"cannot edit inside {type(stmt).__name__}"
    if child is None:
        del kids[i]
    else:
        kids[i] = child
    return seq(kids) if kids else None


def insert_at(stmt: Stmt, parent: Path, index: int, new: Stmt) -> Stmt:
    """Insert `new` as child number `index` of the loop at `parent` (whose body becomes a sequence)."""
    loop = get(stmt, parent)
    assert isinstance(loop, For)
    kids = list(loop.body.stmts) if isinstance(loop.body, SeqStmt) else [loop.body]
    kids.insert(index, new)
    out = set_at(stmt, parent, replace(loop, body=seq(kids)))
    assert out is not None
    return out


def insert_sibling(body: Stmt, path: Path, new: Stmt, after: bool = False) -> Stmt:
    """Insert `new` right before (or after) the node at `path`, in the same parent."""
    pair = [get(body, path), new] if after else [new, get(body, path)]
    if not path:
        return seq(pair)
    parent = get(body, path[:-1])
    if isinstance(parent, SeqStmt):
        kids = list(parent.stmts)
        kids.insert(path[-1] + (1 if after else 0), new)
        out = set_at(body, path[:-1], seq(kids))
    else:
        out = set_at(body, path, seq(pair))
    assert out is not None
    return out


def find_block(body: Stmt, name: str) -> tuple[Path, Block]:
    """The block called `name`, or renamed from it (`Block.former_name`): a stored trace or a rule
    that names a block before decompose_reduction renamed it still finds it."""
    for path, s in nodes(body):
        if isinstance(s, Block) and name in (s.name, s.former_name):
            return path, s
    raise ScheduleError(f"no block named {name!r}")


def taken_block_names(body: Stmt) -> set[str]:
    """The names that find a block, former names included: a new block takes none of them, so no
    lookup is ambiguous, and a primitive names its block as it did before blocks were renamed."""
    return {name for b in blocks(body) for name in (b.name, b.former_name) if name is not None}


def find_loop(body: Stmt, name: str) -> tuple[Path, For]:
    for path, s in nodes(body):
        if isinstance(s, For) and s.var.name == name:
            return path, s
    raise ScheduleError(
        f"loop {name!r} does not exist (it was split, fused or removed by an earlier primitive)"
    )


def loops_above(body: Stmt, path: Path) -> list[tuple[Path, For]]:
    """The loops enclosing the node at `path`, outermost first."""
    out = []
    for k in range(len(path)):
        node = get(body, path[:k])
        if isinstance(node, For):
            out.append((path[:k], node))
    return out


def loop_iter_kinds(body: Stmt) -> dict[Var, str]:
    """What each loop iterates over, from the bindings of the blocks under it: "S" if its variable
    feeds only spatial iteration variables, "R" if only reduction ones, "-" if both or a scan's
    ordered axis. Loops that feed no binding are absent (they count as spatial)."""
    seen: dict[Var, set[str]] = {}
    for b in blocks(body):
        for iv, binding in zip(b.iter_vars, b.bindings):
            for v in free_vars(binding):
                seen.setdefault(v, set()).add(iv.kind)
    return {v: "S" if kinds == {"S"} else "R" if kinds == {"R"} else "-" for v, kinds in seen.items()}


def is_ancestor(a: Path, b: Path) -> bool:
    return len(a) <= len(b) and b[: len(a)] == a


def nest_root(body: Stmt, path: Path) -> Path:
    """The outermost loop that holds nothing but the node at `path` (the node itself if none)."""
    top = path
    while top:
        parent = get(body, top[:-1])
        if isinstance(parent, For):
            top = top[:-1]
        else:
            break
    return top


def conflicts(a: Block, b: Block) -> bool:
    """Whether swapping the execution order of two blocks could change results."""
    wa, wb = set(block_writes(a)), set(block_writes(b))
    return bool(wa & (set(block_reads(b)) | wb) or set(block_reads(a)) & wb)


def check_order(old: Stmt, new: Stmt, moved: str) -> None:
    """A primitive that moves one block must not swap it with a block it depends on."""
    check_order_of(blocks(old), blocks(new), moved)


def check_order_of(old: list[Block], new: list[Block], moved: str) -> None:
    """`check_order` on the blocks in execution order before and after the move."""
    old_order = [b.name for b in old]
    new_order = [b.name for b in new]
    by_name = {b.name: b for b in new}
    m = by_name[moved]
    before_old = set(old_order[: old_order.index(moved)])
    before_new = set(new_order[: new_order.index(moved)])
    for name in (before_old ^ before_new) - {moved}:
        if name in by_name and conflicts(m, by_name[name]):
            raise ScheduleError(
                f"moving block {moved!r} would reorder it with block {name!r}, which it depends on"
            )


def readers(body: Stmt, buf: Buffer) -> list[Block]:
    return [b for b in blocks(body) if buf in block_reads(b)]


def writers(body: Stmt, buf: Buffer) -> list[Block]:
    return [b for b in blocks(body) if buf in block_writes(b)]
