"""Read a program saved by `torch.export.save` without running any code the file holds.

`torch.export.load` unpickles the archive's sample inputs (falling back to an unrestricted unpickler
when the safe one refuses them) and every weight or constant saved with pickle: opening a `.pt2`
someone sent you ran their code. Here the exported program and its plain tensors are read through
torch's own deserializer, the sample inputs are never read (the frontend takes its shapes from the
program), and an archive that keeps a weight or a constant as a pickle, a script object or the legacy
`.pt` form is refused, naming it. The archive's layout is torch 2.13's (pinned by the models extra)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from compiler.frontend import FrontendError

if TYPE_CHECKING:
    from torch.export import ExportedProgram


def load_exported_program(path: str | os.PathLike[str]) -> ExportedProgram:
    """The archive's one exported program, its weights and constants read as raw tensors."""
    from torch._export.serde import schema
    from torch._export.serde.serialize import ExportedProgramDeserializer, _bytes_to_dataclass
    from torch.export.pt2_archive import _package as package
    from torch.export.pt2_archive import constants as layout

    try:
        reader = package.PT2ArchiveReader(os.fspath(path))
    except (OSError, RuntimeError) as e:
        raise FrontendError(f"not a .pt2 archive: {e}") from None
    with reader:
        names = reader.get_file_names()
        name = _model_name(names, layout)
        _refuse_pickles(reader, names, name, layout)
        program = reader.read_bytes(layout.MODELS_FILENAME_FORMAT.format(name))
        serialized = _bytes_to_dataclass(schema.ExportedProgram, program)
        weights = package._load_state_dict(reader, name)
        constants = package._load_constants(reader, name)
        # No sample inputs: empty bytes are what the deserializer reads as none.
        return ExportedProgramDeserializer().deserialize(serialized, weights, constants, b"")


def _model_name(names: list[str], layout: Any) -> str:
    prefix, suffix = layout.MODELS_FILENAME_FORMAT.split("{}")
    models = [n[len(prefix) : -len(suffix)] for n in names if n.startswith(prefix) and n.endswith(suffix)]
    if len(models) != 1:
        raise FrontendError(f"the archive holds {len(models)} exported programs; one is read")
    return models[0]


def _refuse_pickles(reader: Any, names: list[str], name: str, layout: Any) -> None:
    """FrontendError for any weight or constant the archive keeps in a form torch unpickles."""
    for legacy in (f"{layout.WEIGHTS_DIR}{name}.pt", f"{layout.CONSTANTS_DIR}{name}.pt"):
        if legacy in names:
            raise FrontendError(f"{legacy} is a pickle (the legacy format): save the program again")
    weights = _config(reader, layout.WEIGHTS_CONFIG_FILENAME_FORMAT.format(name))
    for fqn, entry in weights.items():
        if entry.get("use_pickle"):
            raise FrontendError(f"weight {fqn!r} is saved as a pickle, which would run code to read it")
    constants = _config(reader, layout.CONSTANTS_CONFIG_FILENAME_FORMAT.format(name))
    for fqn, entry in constants.items():
        if entry.get("use_pickle") or not str(entry.get("path_name", "")).startswith(
            layout.TENSOR_CONSTANT_FILENAME_PREFIX
        ):
            raise FrontendError(f"constant {fqn!r} is saved as a pickle or an object, which would run code")


def _config(reader: Any, file: str) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(reader.read_string(file))
    except (KeyError, RuntimeError, ValueError) as e:
        raise FrontendError(f"{file}: not a readable configuration ({e})") from None
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict) or not all(isinstance(v, dict) for v in config.values()):
        raise FrontendError(f"{file}: not a configuration of payloads")
    return config
