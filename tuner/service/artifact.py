"""A model's artifact: the model compiled for one kind of hardware from the best records there
(`graph.build`, as `tune_model` builds it), exported as one shared library with its C header
(`compiler.graph.export`), handed out as a gzipped tar of two files:

    model.so   exports int tensor_tuner_run(const void *const *inputs, void *const *outputs)
    model.h    declares it, with every input's and output's shape and element type

A model tuned for ranges of sizes is one library for every size in them (it exports
`tensor_tuner_run_sized(sizes, inputs, outputs)`, and its header gives each size's range), or, asked
with sizes, a library of static shapes at those sizes.

A build takes seconds to minutes, so it runs in a child process (`isolated`), off the API's event
loop and its memory, and its result is kept, keyed by the model, the hardware and the ids of the best
record of each layer: a repeated download is instant, and a new best record makes a new artifact.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from compiler.graph import CompiledModel
from runner import TimingKind
from tuner.best import best_record, build_model, build_range_model
from tuner.database import Database, HardwareInfo
from tuner.database import tuned_models as m
from tuner.database.records import TaskInfo
from tuner.service.model_import import dim_specs

# The longest one build may take: ResNet-18's 20-odd kernels build in well under this.
BUILD_SECONDS = 1800.0
LIBRARY, HEADER = "model.so", "model.h"

# The model, the hardware, the sizes asked for (none: the range's one library), the best records.
ArtifactKey = tuple[int, str, tuple[tuple[str, int], ...], tuple[int, ...]]


class NotOneLibrary(Exception):
    """A model's ranges that one module cannot describe (`compiler.graph.symbolic`): it can be
    built at sizes only."""


class MissingRecords(Exception):
    """Layers of the model without a valid record on the hardware: the artifact would not be tuned."""

    def __init__(self, layers: Sequence[TaskInfo]) -> None:
        super().__init__(", ".join(f"task {t.id} ({t.workload_name})" for t in layers))
        self.layers = list(layers)


def artifact_key(
    db: Database, model_id: int, hardware: HardwareInfo, sizes: Mapping[str, int] | None = None
) -> ArtifactKey:
    """What the artifact is built from: the record of each layer on `hardware` that `graph.build`
    takes (`best_record`), and the sizes asked for. Raises MissingRecords if a layer has none."""
    best, missing = [], []
    for task in m.members(db, model_id):
        record = best_record(db, db.workload(task.workload_id).hash, hardware.key, TimingKind.LAYER)
        if record is not None:
            best.append(record.id)
        else:
            missing.append(task)
    if missing:
        raise MissingRecords(missing)
    return model_id, hardware.key, tuple(sorted((sizes or {}).items())), tuple(best)


def build_artifact(database_url: str, key: ArtifactKey) -> bytes:
    """The tar.gz of the model built from the database's best records on the hardware (in the child
    process: it opens the database itself, so nothing large crosses the pipe but the result).
    Raises NotOneLibrary for ranges that one module cannot describe, asked without sizes."""
    from compiler import frontend, graph
    from compiler.graph import ShapeFamily
    from compiler.graph.symbolic import SymbolicError, range_modules
    from compiler.target import Hardware

    model_id, hardware_key, sizes, _ = key
    with Database.open(database_url) as db:
        kind = next(h for h in db.hardware_list() if h.key == hardware_key)
        hardware = Hardware(kind.target, kind.cpu_model)
        source_format, source = m.source(db, model_id)
        dims = m.get_model(db, model_id).dims
        # Accepted once, under the limits of then: no limit refuses it now.
        loaded = frontend.load(
            source,
            source_format,
            max_bytes=len(source),
            max_nodes=2**31,
            dims=dim_specs(dims) if dims else None,
        )
        compiled: CompiledModel
        if isinstance(loaded, ShapeFamily) and not sizes:
            try:
                ranged = range_modules(loaded)
            except SymbolicError as e:
                raise NotOneLibrary(str(e)) from None
            # The library is the range's module alone: no static model of a size is exported.
            compiled = build_range_model(replace(ranged, apart={}), database=db, hardware=hardware)
        else:
            static = loaded.specialize(dict(sizes)) if isinstance(loaded, ShapeFamily) else loaded
            module = graph.optimize(frontend.require_static(static, "a model artifact"))
            compiled = build_model(module, database=db, hardware=hardware)
    with tempfile.TemporaryDirectory(prefix="tensor-tuner-artifact-") as tmp:
        library, header = compiled.export(Path(tmp) / LIBRARY)
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w:gz") as tar:
            tar.add(library, arcname=LIBRARY)
            tar.add(header, arcname=HEADER)
        return out.getvalue()


class ArtifactCache:
    """Built artifacts by key, the least recently used dropped past `max_bytes`. Two requests for one
    key build once: the second waits for the first's build."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._built: OrderedDict[ArtifactKey, bytes] = OrderedDict()
        self._building: dict[ArtifactKey, threading.Lock] = {}
        self._lock = threading.Lock()
        self.builds = 0  # how many builds ran, for the tests and /metrics' readers

    def get(self, key: ArtifactKey, build: Callable[[], bytes]) -> bytes:
        with self._lock:
            lock = self._building.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._built:
                    self._built.move_to_end(key)
                    return self._built[key]
            data = build()
            with self._lock:
                self.builds += 1
                self._building.pop(key, None)
                self._keep(key, data)
            return data

    def _keep(self, key: ArtifactKey, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        self._built[key] = data
        while sum(len(d) for d in self._built.values()) > self.max_bytes:
            self._built.popitem(last=False)
