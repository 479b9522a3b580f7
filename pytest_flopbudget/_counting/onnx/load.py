"""Read an ONNX model without its weights and check that it is one, with errors that say what to fix.

`onnx.load(..., load_external_data=False)` never opens the external-data file, so a model whose weights live in a
multi-gigabyte `.onnx.data` file counts from the graph alone (parameter counts come from initializer dims).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pytest_flopbudget._counting.onnx.graph import normalize_domain
from pytest_flopbudget._counting.onnx.names import text
from pytest_flopbudget._errors import CountingError


def load_model(model: Any) -> tuple[Any, str]:
    """The ModelProto and a label for messages (the file path, or the graph name for an in-memory model)."""
    import onnx

    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        label = str(path)
        if not path.exists():
            raise CountingError(f"{label}: no such ONNX file; check the path (relative paths start at {os.getcwd()})")
        if not path.is_file():
            raise CountingError(f"{label}: is a directory, not an .onnx file")
        try:
            proto = onnx.load(label, load_external_data=False)
        except Exception as exc:  # protobuf raises DecodeError, RuntimeError or OSError here
            raise CountingError(
                f"{label}: not a readable ONNX model ({_one_line(exc)}); the file is truncated, corrupt or not "
                f"ONNX: re-export it or check it was copied completely"
            ) from None
    elif isinstance(model, onnx.ModelProto):
        proto = model
        label = f"<ModelProto {text(model.graph.name) or 'unnamed'}>"
    else:
        raise CountingError(
            f"count_onnx() needs a path to an .onnx file or an onnx.ModelProto, got {type(model).__name__}"
        )
    _check_is_model(proto, label)
    return proto, label


def _check_is_model(proto: Any, label: str) -> None:
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise CountingError(
            f"{label}: not an ONNX model (no graph or no IR version); the file is truncated or is another format: "
            f"pass the .onnx file written by your exporter"
        )
    if not len(proto.opset_import):
        raise CountingError(
            f"{label}: the model declares no opset_import, so its operators cannot be identified; the file is "
            f"truncated or was written by a broken exporter: re-export it"
        )


def opset_versions(proto: Any) -> dict[str, int]:
    """Domain -> opset version, with `ai.onnx` folded into the empty default domain."""
    versions: dict[str, int] = {}
    for entry in proto.opset_import:
        versions[normalize_domain(entry.domain)] = int(entry.version)
    return versions


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
