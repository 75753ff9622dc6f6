"""Models: submit a whole model (ONNX) to tune under one trial budget, follow it, cancel it, and
download it compiled for a kind of hardware.

The coordinator imports the model in a child process with limits (`model_import`), makes one member
task per distinct fused kernel (weighted by calls per forward pass), and its model loop spends the
budget over them (`model_loop`). A model belongs to the token that submitted it, as a task does: a
client token sees its own models only (another's is a 404), an admin token sees every model.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from functools import partial
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from compiler.graph import DimRange, LibraryError
from compiler.workloads import WorkloadError
from compiler.workloads.probe import check_finite
from tuner.database import Database, HardwareInfo, NewWorkload, Role, TaskInfo, absolute_url, quotas
from tuner.database import tuned_models as m
from tuner.database.tokens import TokenInfo
from tuner.range_spec import ranged_workload
from tuner.service import admission
from tuner.service.artifact import (
    BUILD_SECONDS,
    ArtifactKey,
    MissingRecords,
    NotOneLibrary,
    artifact_key,
    build_artifact,
)
from tuner.service.deps import ClientToken, DatabaseDep, PageDep, SettingsDep
from tuner.service.errors import AUTH, BODY, documented, field_error
from tuner.service.isolated import IsolatedError, run_isolated
from tuner.service.model_import import ImportedModel, Layer, ModelRefused, import_model, ranged
from tuner.service.routes.tasks import gflops, parse_workload, resolve_hardware
from tuner.service.schemas import (
    NO_NUL,
    CurvePoint,
    IdPath,
    ModelCreate,
    ModelDetail,
    ModelPublic,
    ModelTaskPublic,
)
from tuner.service.settings import Settings

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/models", tags=["models"], responses=documented(*AUTH))
ARTIFACT_TYPE = "application/gzip"


@router.post("", status_code=status.HTTP_201_CREATED, responses=documented(*BODY, 429))
async def submit_model(
    request: Request, body: ModelCreate, db: DatabaseDep, settings: SettingsDep, holder: ClientToken
) -> ModelPublic:
    """Queue a model to tune: `onnx` is the model file, base64-encoded (or `graph`, its JSON form).
    Refused (422, naming the node and its op) if it is not ONNX, is malformed, is over the size or
    node limits, uses an operator the frontend does not support, or has a layer whose candidates could
    not finish within a worker's run timeout; 429 if the token's quotas are used up (a model counts as
    one task holding its budget), checked before the model is imported; 503 with Retry-After while
    the coordinator imports max_concurrent_imports models already."""
    submit = partial(_submit_model, body, db, settings, holder)
    return await anyio.to_thread.run_sync(submit, limiter=request.app.state.model_threads)


def _submit_model(body: ModelCreate, db: Database, settings: Settings, holder: TokenInfo) -> ModelPublic:
    if body.trials > settings.max_trials:
        raise field_error("trials", f"must be <= {settings.max_trials}")
    quota = admission.quota(holder, settings)
    try:
        quotas.precheck(db, token_id=holder.id, asked=quotas.Usage(1, body.trials, 0.0), quota=quota)
    except quotas.OverQuota as e:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, f"over quota: {e}") from None
    hardware = resolve_hardware(db, body.hardware, None)
    dims: dict[str, Any] | None = dict(body.dims) if body.dims and ranged(body.dims) else None
    if body.workload is not None:
        source_format = field = "workload"
        source = _encoded(body.workload, settings, field)
        imported, dims = _range_layers(body.workload, body.sizes)
    else:
        source_format, field = ("onnx", "onnx") if body.onnx is not None else ("graph", "graph")
        source = _decoded(body.onnx, settings) if body.onnx is not None else _encoded(body.graph, settings)
        try:
            imported = import_model(source_format, source, settings, body.dims)
        except ModelRefused as e:
            raise field_error(e.field or field, str(e)) from None
    if body.trials < len(imported.layers):
        raise field_error(
            "trials", f"the model has {len(imported.layers)} layers to tune: give each at least one trial"
        )
    members = _members(db, imported, hardware, settings, field)
    try:
        model_id = m.submit_model(
            db,
            token_id=holder.id,
            quota=quota,
            name=body.name or "model",
            source=imported.sized or source,
            source_format=source_format,
            dims=dims,
            hardware_id=hardware.id,
            scheduler=body.scheduler,
            trials=body.trials,
            seed=body.seed,
            members=members,
        )
    except quotas.OverQuota as e:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, f"over quota: {e}") from None
    return model_public(db, m.get_model(db, model_id))


@router.get("")
def list_models(response: Response, db: DatabaseDep, holder: ClientToken, page: PageDep) -> list[ModelPublic]:
    """This token's models (an admin token's: every model), oldest first, a page at a time: a full
    page's X-Next-After header is the `after` of the next."""
    owner = None if holder.role == Role.ADMIN else holder.id
    found = m.models(db, token_id=owner, after=page.after, limit=page.limit)
    page.answer(response, [model.id for model in found])
    return [model_public(db, model) for model in found]


@router.get("/{model_id}", responses=documented(404))
def get_model(model_id: IdPath, db: DatabaseDep, holder: ClientToken) -> ModelDetail:
    """Its layers' progress (trials given and measured, best time, GFLOPS, share of the estimated
    latency) and the estimated latency after each finished batch."""
    model = find_model(db, model_id, holder)
    layers = _layers(db, model)
    return ModelDetail(
        **_public(model, layers).model_dump(),
        layers=layers,
        curve=[CurvePoint(trials=n, estimated_secs=secs) for n, secs in model.curve],
    )


@router.post("/{model_id}/cancel", responses=documented(404, 409))
def cancel(model_id: IdPath, db: DatabaseDep, holder: ClientToken) -> ModelPublic:
    """Stop the model and its layers' tasks; records already measured are kept (and shared)."""
    find_model(db, model_id, holder)
    if not m.cancel_model(db, model_id=model_id, message="cancelled by a client"):
        raise HTTPException(status.HTTP_409_CONFLICT, f"model {model_id} has already ended")
    return model_public(db, m.get_model(db, model_id))


@router.get(
    "/{model_id}/artifact",
    response_class=Response,
    responses={
        200: {
            "content": {ARTIFACT_TYPE: {}},
            "description": "A gzipped tar of model.so and model.h: the model compiled from the best "
            "records on the hardware.",
        },
        **documented(404, 409, 410),
    },
)
async def artifact(
    model_id: IdPath,
    request: Request,
    db: DatabaseDep,
    settings: SettingsDep,
    holder: ClientToken,
    hardware: Annotated[str | None, Query(min_length=1, max_length=200, pattern=NO_NUL)] = None,
    size: Annotated[list[str] | None, Query(max_length=64)] = None,
) -> Response:
    """The model compiled for `hardware` (a key; default: the hardware it was tuned for) from the best
    record of each of its layers there, as model.so and model.h in a .tar.gz. 409 while a layer has no
    valid record on that hardware. The first request builds it (seconds to minutes); later ones, until
    a better record arrives, get the same bytes at once.

    A model tuned for ranges of sizes is one library for every size in them; with `size=NAME=VALUE`
    for each ranged dimension, a library of static shapes at those sizes (422 for a size outside its
    range, naming it; or for ranges that one library cannot describe, asked without sizes)."""
    model = await run_in_threadpool(find_model, db, model_id, holder)
    if model.source_format == "workload":
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"model {model_id} is one kernel tuned for a range, which has no library: each size's "
            "records are POST /v1/best's, and tuner.compile_range builds the kernel from them",
        )
    sizes = _sizes(model, size or [])
    if not await run_in_threadpool(m.has_source, db, model_id):
        raise HTTPException(
            status.HTTP_410_GONE,
            f"model {model_id} was cancelled, and its file dropped after cancelled_model_days: "
            "submit it again to build it",
        )
    kind = await run_in_threadpool(_hardware, db, hardware or model.hardware_key)
    try:
        key = await run_in_threadpool(artifact_key, db, model_id, kind, sizes)
    except MissingRecords as e:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"model {model_id} has no valid record on {kind.key} for {len(e.layers)} of its layers ({e}): "
            "wait for its tuning to measure them, or tune it for that hardware",
        ) from None
    app = request.app.state
    get = partial(app.artifacts.get, key, lambda: _build(settings, key, app.build_slots))
    data = await anyio.to_thread.run_sync(get, limiter=app.model_threads)
    return Response(
        data,
        media_type=ARTIFACT_TYPE,
        headers={"Content-Disposition": f'attachment; filename="model-{model_id}.tar.gz"'},
    )


def _sizes(model: m.ModelInfo, given: list[str]) -> dict[str, int]:
    """The sizes of `size=NAME=VALUE` query parameters: one for each ranged dimension of a model tuned
    for ranges (none at all: its one library), each inside its range; a 422 on `size` otherwise."""
    ranges = [
        DimRange(name, spec[0], spec[1])
        for name, spec in (model.dims or {}).items()
        if isinstance(spec, list) and spec[0] < spec[1]
    ]
    if given and not ranges:
        raise field_error("size", f"model {model.id} has static shapes: it takes no size", location="query")
    sizes: dict[str, int] = {}
    for text in given:
        name, _, value = text.partition("=")
        dim = next((d for d in ranges if d.name == name), None)
        if dim is None:
            have = ", ".join(map(str, ranges))
            raise field_error("size", f"{text!r}: the model's ranged dimensions are {have}", location="query")
        if not value.isdigit() or not dim.min <= int(value) <= dim.max:
            raise field_error("size", f"{name}={value} is outside the declared range {dim}", location="query")
        sizes[name] = int(value)
    missing = [d.name for d in ranges if d.name not in sizes]
    if sizes and missing:
        raise field_error(
            "size", f"give every ranged dimension a size: {', '.join(missing)} missing", location="query"
        )
    return sizes


def _build(settings: Settings, key: ArtifactKey, slots: admission.Slots) -> bytes:
    try:
        with slots.hold():
            return run_isolated(
                build_artifact,
                absolute_url(settings.database_url),
                key,
                seconds=BUILD_SECONDS,
                memory_bytes=settings.model_memory_bytes,
            )
    except NotOneLibrary as e:
        raise field_error(
            "size",
            f"model {key[0]}'s ranges cannot be one library ({e}): download it at sizes, with "
            "size=NAME=VALUE for each ranged dimension",
            location="query",
        ) from None
    except (
        IsolatedError,
        LibraryError,
    ) as e:  # no C compiler here, or the build died: not the client's doing
        log.error("the artifact of model %d for %s failed to build: %s", key[0], key[1], e)
        raise HTTPException(status.HTTP_500_INTERNAL_SERVER_ERROR, f"the build failed: {e}") from None


def _encoded(data: dict[str, Any] | None, settings: Settings, field: str = "graph") -> bytes:
    """The graph's JSON form (or a kernel range's spec) as it is stored (and imported, and rebuilt
    from for the artifact)."""
    source = json.dumps(data, separators=(",", ":"), allow_nan=False).encode()
    if len(source) > settings.max_model_bytes:
        raise field_error(
            field, f"the {field} is {len(source)} bytes, over max_model_bytes={settings.max_model_bytes}"
        )
    return source


def _range_layers(spec: dict[str, Any], sizes: list[int] | None) -> tuple[ImportedModel, dict[str, Any]]:
    """A kernel over a range as a model's layers: the workload at each size, once a call each; and
    its range, as the model's dims."""
    try:
        found = ranged_workload(spec, sizes)
    except WorkloadError as e:
        raise field_error("sizes" if e.field == "sizes" else f"workload.{e.field}", e.message) from None
    if found is None:
        raise field_error(
            "workload",
            "no parameter is a range [min, max] and the script declares no size var: a kernel of "
            "static shapes is a task (POST /v1/tasks)",
        )
    layers = tuple(Layer(f"{found.dimension}={size}", wl.spec, 1, (wl.name,)) for size, wl in found.sizes)
    return ImportedModel(layers, 1, None), {found.dimension: [found.low, found.high]}


def _decoded(text: str, settings: Settings) -> bytes:
    try:
        source = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise field_error("onnx", "not base64 (RFC 4648, with padding): encode the file's bytes") from None
    if len(source) > settings.max_model_bytes:
        raise field_error(
            "onnx", f"the model is {len(source)} bytes, over max_model_bytes={settings.max_model_bytes}"
        )
    return source


def _members(
    db: Database, imported: ImportedModel, hardware: HardwareInfo, settings: Settings, field: str
) -> list[m.NewMember]:
    """Each layer as a workload of the database, once it passes what a task must pass."""
    out = []
    for layer in imported.layers:
        where = f"layer {layer.name} ({' + '.join(layer.ops)})"
        wl = parse_workload(layer.spec, field)
        cost = admission.estimate(wl, hardware, settings)
        if not cost.fits:
            raise field_error(field, f"{where}: {admission.refusal(wl, hardware, settings, cost)}")
        try:
            check_finite(wl)
        except WorkloadError as e:
            raise field_error(field, f"{where}: {e.message}") from None
        out.append(m.NewMember(NewWorkload.of(wl), layer.weight, cost.candidate_secs))
    return out


def _hardware(db: Database, key: str) -> HardwareInfo:
    found = next((h for h in db.hardware_list() if h.key == key), None)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no hardware {key!r}")
    return found


def find_model(db: Database, model_id: int, holder: TokenInfo) -> m.ModelInfo:
    """The model, if this token may see it: 404 for another token's, as for one that does not exist."""
    try:
        model = m.get_model(db, model_id)
    except KeyError:
        model = None
    if model is None or (holder.role != Role.ADMIN and model.token_id != holder.id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no model {model_id}")
    return model


def model_public(db: Database, model: m.ModelInfo) -> ModelPublic:
    return _public(model, _layers(db, model))


def _public(model: m.ModelInfo, layers: list[ModelTaskPublic]) -> ModelPublic:
    return ModelPublic(
        id=model.id,
        name=model.name,
        hardware_key=model.hardware_key,
        scheduler=model.scheduler,
        trials=model.trials,
        trials_done=model.trials_done,
        status=model.status,
        message=model.message,
        tasks=len(layers),
        estimated_secs=_estimated([(layer.weight, layer.best_secs) for layer in layers]),
        dims=model.dims,
        created_at=model.created_at,
        updated_at=model.updated_at,
    )


def _layers(db: Database, model: m.ModelInfo) -> list[ModelTaskPublic]:
    tasks = m.members(db, model.id)
    best = db.best_of_tasks([t.id for t in tasks])
    secs = [best[t.id][1] if t.id in best else None for t in tasks]
    total = _estimated([(t.weight, s) for t, s in zip(tasks, secs)])
    return [_layer(db, t, s, total) for t, s in zip(tasks, secs)]


def _layer(db: Database, task: TaskInfo, best: float | None, total: float | None) -> ModelTaskPublic:
    workload = db.workload(task.workload_id)
    return ModelTaskPublic(
        task_id=task.id,
        workload_name=task.workload_name,
        workload_hash=workload.hash,
        weight=task.weight,
        flops=workload.flops,
        trials=task.trials,
        trials_done=task.trials_done,
        status=task.status,
        best_secs=best,
        gflops=gflops(workload.flops, best) if best else None,
        share=task.weight * best / total if best and total else None,
    )


def _estimated(layers: list[tuple[int, float | None]]) -> float | None:
    """Calls x best seconds summed over the layers; None while a layer has no valid record."""
    if any(secs is None for _, secs in layers):
        return None
    return sum(weight * (secs or 0.0) for weight, secs in layers)
