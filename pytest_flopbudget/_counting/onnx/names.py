"""Recover the dotted module path (`layer1.0.conv1`) that an exporter recorded for an ONNX node.

Exporters leave the module hierarchy in different places:

- the dynamo exporter (`torch.onnx.export(..., dynamo=True)`) writes node metadata: `pkg.torch.onnx.name_scopes`
  is the list of module paths from the root down, ending with the FX node's own name; older versions only wrote
  `namespace` ("``: Root/layer1: Sequential/layer1.0: BasicBlock/add: aten.add.Tensor``");
- the TorchScript exporter (`dynamo=False`) encodes it in the node name, `/layer1/layer1.0/conv1/Conv`, where each
  component is the module's qualified name cut back to its last non-numeric atom (`layer1.0`, `downsample.0`,
  `conv1`), so consecutive components overlap and must be stitched together;
- TensorFlow converters use `model/dense/MatMul`-style scopes.

Anything else falls back to the node name itself, so per-layer diffs still line up between two exports of the
same model. The per-layer diff is only as good as these paths, hence the care taken here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any

NAME_SCOPES = "pkg.torch.onnx.name_scopes"
NAMESPACE = "namespace"
REWRITE_RULE = "pkg.onnxscript.rewriter.rule_name"
#: The most `/` scopes of a TorchScript node name that are stitched into a module path (module trees are a few
#: dozen deep); a name with more is taken as it is, its scopes joined by dots: stitching it would cost time
#: quadratic in its length.
MAX_STITCHED = 256


def text(value: Any) -> str:
    """Valid text from a protobuf string field: onnx hands back `bytes` when the field is not valid UTF-8, and a
    `str` may carry lone surrogates; both become backslash escapes, so every name in a Report encodes as UTF-8."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    value = str(value)
    if value.isascii():
        return value
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


class ModulePaths:
    """Per-model resolver; `known` module paths (from parameter names) settle ambiguous TorchScript names."""

    def __init__(self, known_modules: Iterable[str] = ()) -> None:
        self.known = set(known_modules)
        self._scope_cache: dict[str, str] = {}

    def path(self, node: Any, weight_module: str | None = None) -> str:
        """The module path of `node`; `weight_module` is the module owning its weight, if the weight is named."""
        if len(node.metadata_props):
            found = self._from_metadata(node, weight_module)
            if found is not None:
                return found
        name = text(node.name)
        if name.startswith("/"):
            return self._from_torchscript_name(name)
        if "/" in name:
            return ".".join(part for part in name.split("/")[:-1] if part)
        return name

    def _from_metadata(self, node: Any, weight_module: str | None) -> str | None:
        props = {text(p.key): text(p.value) for p in node.metadata_props}
        path: str | None = None
        if NAME_SCOPES in props:
            path = _last_module_from_scopes(props[NAME_SCOPES])
        if path is None and NAMESPACE in props:
            path = _last_module_from_namespace(props[NAMESPACE])
        if path is None:
            return None
        # Folding a batch norm into the preceding conv/gemm keeps the batch norm's metadata on the fused node;
        # its weight still carries the conv's parameter name, which names the module that did the arithmetic.
        if weight_module is not None and "FuseBatchNorm" in props.get(REWRITE_RULE, ""):
            return weight_module
        return path

    def _from_torchscript_name(self, name: str) -> str:
        scope = name[1 : name.rfind("/")]
        cached = self._scope_cache.get(scope)
        if cached is None:
            components = scope.split("/") if scope else []
            if len(components) > MAX_STITCHED:  # no exporter nests modules this deep: a hostile or broken name
                cached = ".".join(part for part in components if part)
            else:
                cached = self._stitch(components)
            self._scope_cache[scope] = cached
        return cached

    def _stitch(self, components: list[str]) -> str:
        path: list[str] = []
        for component in components:
            atoms = component.split(".")
            # `layer1` then `layer1.0`: the child repeats its parent's trailing atoms (Sequential/ModuleList items).
            # Overlaps that fit, smallest first, then none; a known module path settles which one is meant.
            overlaps = [
                overlap for overlap in range(1, min(len(path), len(atoms) - 1) + 1)
                if path[len(path) - overlap :] == atoms[:overlap]
            ]  # fmt: skip
            chosen = overlaps[0] if overlaps else 0
            if overlaps and self.known:
                chosen = next((o for o in [*overlaps, 0] if ".".join(path + atoms[o:]) in self.known), chosen)
            path.extend(atoms[chosen:])
        return ".".join(path)


#: One element of a `name_scopes` list as `repr` writes it: a quoted string literal, then `,` or the closing `]`.
_SCOPE_ITEM = re.compile(r"""\s*('[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")\s*([,\]])""", re.DOTALL)
_SCOPES_END = re.compile(r"\s*\]\s*\Z")


def _last_module_from_scopes(value: str) -> str | None:
    """`['', 'layer1', 'layer1.0', 'add']` -> `layer1.0`: the entries before the last are module paths.

    The value is scanned in one pass, and only the entry wanted is decoded: `ast.literal_eval` of the whole value
    is quadratic on some inputs (a 4 MB value took 48 s), and it is metadata any tool may have written.
    """
    value = value.strip()
    if not value.startswith("["):
        return None
    if _SCOPES_END.match(value, 1):
        return ""  # an empty list
    spans: list[tuple[int, int]] = []
    pos = 1
    while True:
        match = _SCOPE_ITEM.match(value, pos)
        if match is None:
            return None
        spans.append(match.span(1))
        pos = match.end()
        if match.group(2) == "]":
            if value[pos:].strip():
                return None
            break
        if _SCOPES_END.match(value, pos):  # a trailing comma
            break
    if len(spans) < 2:
        return ""
    start, end = spans[-2]
    try:
        scope = ast.literal_eval(value[start:end])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return scope if isinstance(scope, str) else None


def _last_module_from_namespace(value: str) -> str | None:
    """`: Root/layer1: Sequential/layer1.0: Block/add: aten.add.Tensor` -> `layer1.0`."""
    entries = value.split("/")
    if len(entries) < 2:
        return None
    name, sep, _ = entries[-2].partition(": ")
    return name.strip() if sep else None


def module_of_parameter(name: str) -> str | None:
    """`layer1.0.conv1.weight` -> `layer1.0.conv1`; None for generated names (`onnx::Conv_193`, `val_3`)."""
    if "." not in name or any(c in name for c in ":/ "):
        return None
    module, _, attr = name.rpartition(".")
    if not attr.isidentifier() or not module:
        return None
    return module
