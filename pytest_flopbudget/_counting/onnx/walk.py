"""Walking an inferred ONNX graph: price each node, charge it to its module, recurse into control flow.

`If` counts its costlier branch (the taken one when the condition folds to a constant); `Loop` and `Scan` count
their body once per iteration when the trip count is static, after re-inferring the body with the real input
shapes; a loop whose trip count is dynamic is reported as skipped rather than guessed. An op without a formula
whose ONNX schema defines it by a function body is counted through that body (`functions.py`).
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable

from pytest_flopbudget._counting.formulas import Cost
from pytest_flopbudget._counting.onnx.consts import ConstFolder
from pytest_flopbudget._counting.onnx.functions import expand_node, get_schema, has_body
from pytest_flopbudget._counting.onnx.graph import NodeInfo, index_nodes, topological_order
from pytest_flopbudget._counting.onnx.names import ModulePaths, module_of_parameter, text
from pytest_flopbudget._counting.onnx.node import NodeContext, UnknownShape, known_dims
from pytest_flopbudget._counting.onnx.ops import ONNX_OPS, integer_arithmetic, op_label
from pytest_flopbudget._counting.onnx.shapes import Scope, complete_shapes, constant_tensors, infer, infer_body
from pytest_flopbudget._counting.onnx.traffic import NodeBytes, Unsized, is_identity, moves_data
from pytest_flopbudget._counting.onnx.validate import InvalidNode, refuse_node
from pytest_flopbudget._counting.registry import FREE
from pytest_flopbudget._counting.tally import NO_FORMULA, UNKNOWN_SHAPE, Tally, formula_failed
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._metrics import BYTES, Metric

#: Domains whose operators are known (to onnx or to us); anything else is reported as an unknown domain.
KNOWN_DOMAINS = {
    "",
    "ai.onnx.ml",
    "ai.onnx.preview",
    "ai.onnx.preview.training",
    "com.microsoft",
    "com.microsoft.nchwc",
}
#: Function bodies may use ops that are themselves functions; ONNX forbids recursion, this bounds a broken schema.
MAX_FUNCTION_DEPTH = 8
#: A trip count at least this large is the "run until cond is false" idiom, not a real count.
WHILE_LOOP_TRIP = 2**62
CONTROL_FLOW = ("If", "Loop", "Scan")


class Walker:
    """Prices every node of a graph and its subgraphs into a Tally."""

    def __init__(
        self,
        model: Any,
        label: str,
        opsets: dict[str, int],
        undeclared: set[str],
        initializer_names: set[str],
        names: ModulePaths,
        consts: dict[str, Any],
        depth: int = 0,
    ) -> None:
        self.model = model
        self.depth = depth
        self.label = label
        self.opsets = opsets
        self.undeclared = undeclared
        self.initializer_names = initializer_names
        self.names = names
        self.consts = consts
        self._entries: dict[tuple[str, str], Any] = {}
        self._bodies: dict[tuple[str, str], bool] = {}
        #: Why `bytes` cannot be measured (the first node with a tensor of unknown size), None while it can.
        self.unsized: str | None = None

    def path(self, info: NodeInfo, inherited: str = "") -> str:
        inputs = info.inputs
        weight = inputs[1] if len(inputs) > 1 and inputs[1] in self.initializer_names else None
        path = self.names.path(info.node, module_of_parameter(weight) if weight else None)
        return path or inherited

    def entry(self, domain: str, op: str) -> Callable[[NodeContext], Cost] | Any:
        key = (domain, op)
        if key not in self._entries:
            self._entries[key] = ONNX_OPS.lookup(key, self.opsets.get(domain))
        return self._entries[key]

    def walk(self, nodes: list[NodeInfo], scope: Scope, folder: ConstFolder, tally: Tally, inherited: str = "") -> None:
        sizes = NodeBytes(scope)
        for info in nodes:
            domain, op = info.domain, info.op_type
            if domain == "" and op in CONTROL_FLOW:
                self._control_flow(info, scope, folder, tally, inherited)
                continue
            entry = self.entry(domain, op)
            if entry is FREE:
                # no arithmetic, but a new tensor written (not shape arithmetic): its bytes count
                if moves_data(domain, op) and not sizes.computes_shapes(info, folder.ints):
                    tally.add_values(self.path(info, inherited), op_label(domain, op), self._bytes(info, sizes, {}))
                continue
            path = self.path(info, inherited)
            label = op_label(domain, op)
            if entry is None:
                if not self._function(info, scope, folder, tally, path, label):
                    tally.skip(path, label, self._no_formula(domain))
                continue
            ctx = NodeContext(
                info.node,
                self.opsets.get(domain, 1),
                [scope.dims(name) for name in info.inputs],
                [scope.dims(name) for name in info.outputs],
                folder.ints,
                folder.floats,
            )
            try:
                cost = entry(ctx)
            except UnknownShape as exc:
                tally.skip(path, label, exc.reason)
                continue
            except InvalidNode as exc:  # a node no runtime would run: the model is refused, not counted
                raise refuse_node(self.label, info.node, None, str(exc)) from None
            except Exception as exc:  # a malformed node is skipped with the reason, never a crash
                tally.skip(path, label, formula_failed(f"{type(exc).__name__}: {str(exc)[:100]}"))
                continue
            if cost.macs and info.outputs:  # a product on integer tensors counts integer ops (read types only then)
                cost = integer_arithmetic(cost, scope.elem_type(info.outputs[0]))
            values = cost.values()
            if not sizes.computes_shapes(info, folder.ints):
                values = self._bytes(info, sizes, values)
            tally.add_values(path, label, values)

    def _bytes(self, info: NodeInfo, sizes: NodeBytes, values: dict[Metric, int]) -> dict[Metric, int]:
        """`values` with the node's bytes moved; a size not known leaves them out and `bytes` not measured."""
        if self.unsized is not None or is_identity(info.domain, info.op_type, values):
            return values
        try:
            return {**values, BYTES: sizes.of(info)}
        except Unsized as exc:
            self.unsized = exc.reason
            return values
        except Exception as exc:  # a malformed type: bytes not measured, never a failed count
            node = f"{text(info.op_type)} node '{text(info.node.name)}'"
            self.unsized = f"the tensors of {node} could not be sized ({type(exc).__name__})"
            return values

    def _no_formula(self, domain: str) -> str:
        if domain in self.undeclared:
            return f"{NO_FORMULA} (domain '{domain}' is not declared in the model's opset_import)"
        if domain not in KNOWN_DOMAINS:
            return f"{NO_FORMULA} (unknown domain '{domain}')"
        return NO_FORMULA

    # --- ops defined by a function body -----------------------------------------------------------------------

    def _function(self, info: NodeInfo, scope: Scope, folder: ConstFolder, tally: Tally, path: str, label: str) -> bool:
        """Count an op without a formula through its schema's function body; False when it has none.

        The body's total is charged to the op itself (`SwiGLU` in the report, not `Sigmoid` and `Mul`); an op of
        the body that cannot be counted is reported as skipped, naming the op whose body it is in.
        """
        domain = info.domain
        key = (domain, info.op_type)
        if key not in self._bodies:
            self._bodies[key] = has_body(get_schema(info.op_type, domain, self.opsets.get(domain, 1)))
        if not self._bodies[key] or self.depth >= MAX_FUNCTION_DEPTH:
            return False
        from onnx import helper

        types: list[Any] = []
        constants: dict[str, Any] = {}
        for name in info.inputs:
            if not name:
                types.append(None)
                continue
            dims, elem = known_dims(scope.dims(name)) if scope.known(name) else None, scope.elem_type(name)
            if dims is None:
                found = scope.type_of(name)
                if found is not None and found.WhichOneof("value") not in (None, "tensor_type"):
                    types.append(found)  # a sequence or optional input: no shape to bind
                    continue
                tally.skip(path, label, UNKNOWN_SHAPE)
                return True
            types.append(helper.make_tensor_type_proto(elem or 1, list(dims)))
            values = folder.ints(name) if elem in (6, 7) else None  # INT32, INT64: shape-like data
            if elem is not None and values is not None and len(values) == prod(dims):
                constants[name] = helper.make_tensor(name, elem, list(dims), values)
        try:
            expanded = expand_node(info.node, domain, self.opsets.get(domain, 1), types, constants, self.model)
        except Exception as exc:  # onnx could not build or inline the body: say so, never count zero silently
            tally.skip(path, label, f"no formula, and its function body could not be expanded ({type(exc).__name__})")
            return True
        if expanded is None:
            return False
        standalone, opsets = expanded
        try:
            inferred = infer(standalone, self.label)
        except CountingError:
            tally.skip(path, label, "no formula, and shape inference failed on its function body")
            return True
        child = Walker(
            inferred, self.label, opsets, set(), set(), self.names, constant_tensors(inferred), self.depth + 1
        )
        nodes = index_nodes(inferred.graph)
        body_scope = Scope(inferred.graph)
        body_folder = ConstFolder(inferred.graph, body_scope.dims, child.consts, nodes=nodes)
        complete_shapes(nodes, inferred, body_scope, body_folder)
        body = Tally()
        child.walk(nodes, body_scope, body_folder, body, path)
        if self.unsized is None:
            self.unsized = child.unsized
        tally.add_values(path, label, body.totals())
        for op, skipped in body.skipped.items():
            tally.skip(path, op, f"{skipped.reason} (in the function body of {label})", skipped.calls)
        return True

    # --- control flow ------------------------------------------------------------------------------------------

    def _control_flow(self, info: NodeInfo, scope: Scope, folder: ConstFolder, tally: Tally, inherited: str) -> None:
        path = self.path(info, inherited)
        graphs = {a.name: a.g for a in info.node.attribute if a.type == 5}
        if info.op_type == "If":
            self._if(info, graphs, scope, folder, tally, path)
        elif info.op_type == "Loop":
            self._loop(info, graphs.get("body"), scope, folder, tally, path)
        else:
            self._scan(info, graphs.get("body"), scope, folder, tally, path)

    def walk_subgraph(self, graph: Any, scope: Scope, folder: ConstFolder, path: str) -> tuple[Tally, Scope]:
        """Walk a subgraph whose shapes were inferred in place (If branches; Loop/Scan bodies after `infer_body`)."""
        nodes = index_nodes(graph)
        topological_order(nodes, self.label)
        sub_scope = Scope(graph, parent=scope)
        sub_folder = ConstFolder(graph, sub_scope.dims, parent=folder, nodes=nodes)
        complete_shapes(nodes, self.model, sub_scope, sub_folder)
        sub = Tally()
        self.walk(nodes, sub_scope, sub_folder, sub, path)
        return sub, sub_scope

    def _if(
        self, info: NodeInfo, graphs: dict[str, Any], scope: Scope, folder: ConstFolder, tally: Tally, path: str
    ) -> None:
        then_graph, else_graph = graphs.get("then_branch"), graphs.get("else_branch")
        if then_graph is None or else_graph is None:
            tally.skip(path, "If", "malformed If (a branch is missing)")
            return
        cond = folder.ints(info.inputs[0]) if info.inputs else None
        if cond is not None and len(cond) == 1:
            tally.merge(self.walk_subgraph(then_graph if cond[0] else else_graph, scope, folder, path)[0])
            return
        then_tally = self.walk_subgraph(then_graph, scope, folder, path)[0]
        else_tally = self.walk_subgraph(else_graph, scope, folder, path)[0]
        if list(else_tally.totals().values()) > list(then_tally.totals().values()):
            then_tally, else_tally = else_tally, then_tally
        tally.merge(then_tally)
        # Ops skipped in the cheaper branch may run too: they are reported, so the count is never called exact.
        tally.merge_skipped(else_tally)

    def _loop(self, info: NodeInfo, body: Any, scope: Scope, folder: ConstFolder, tally: Tally, path: str) -> None:
        trip_name = info.inputs[0] if info.inputs else ""
        trip = folder.ints(trip_name) if trip_name else None
        if body is None or trip is None or len(trip) != 1 or not 0 <= trip[0] < WHILE_LOOP_TRIP:
            tally.skip(path, "Loop", "dynamic trip count")
            return
        carried = info.inputs[2:]
        input_dims = [(), (), *(scope.dims(name) for name in carried)]
        elems = [7, 9, *(scope.elem_type(name) for name in carried)]  # iteration INT64, condition BOOL
        self._repeat(body, input_dims, elems, len(carried), trip[0], "Loop", scope, folder, tally, path, 1)

    def _scan(self, info: NodeInfo, body: Any, scope: Scope, folder: ConstFolder, tally: Tally, path: str) -> None:
        if self.opsets.get("", 0) < 9:
            tally.skip(path, "Scan", "no formula (Scan before opset 9 has a batch axis and sequence lengths)")
            return
        attrs = {a.name: a for a in info.node.attribute}
        n_scan = int(attrs["num_scan_inputs"].i) if "num_scan_inputs" in attrs else 0
        n_state = len(info.inputs) - n_scan
        axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else [0] * n_scan
        if body is None or n_scan <= 0 or n_state < 0 or len(axes) != n_scan:
            tally.skip(path, "Scan", "malformed Scan")
            return
        scanned: list[tuple[int, ...]] = []
        for name in info.inputs[n_state:]:
            known = known_dims(scope.dims(name))
            if known is None:
                tally.skip(path, "Scan", "dynamic trip count (scan input shape unknown after shape inference)")
                return
            scanned.append(known)
        slices = []
        trips = set()
        for dims, axis in zip(scanned, axes):
            axis = axis + len(dims) if axis < 0 else axis
            trips.add(dims[axis])
            slices.append(dims[:axis] + dims[axis + 1 :])
        if len(trips) != 1:
            tally.skip(path, "Scan", "malformed Scan (scan inputs of different lengths)")
            return
        input_dims = [*(scope.dims(name) for name in info.inputs[:n_state]), *slices]
        elems = [scope.elem_type(name) for name in info.inputs]
        self._repeat(body, input_dims, elems, n_state, trips.pop(), "Scan", scope, folder, tally, path, 0)

    def _repeat(
        self,
        body: Any,
        input_dims: list[Any],
        input_elems: list[int],
        carried: int,
        trip: int,
        op: str,
        scope: Scope,
        folder: ConstFolder,
        tally: Tally,
        path: str,
        first_output: int,
    ) -> None:
        """Infer the body with these input shapes, check carried shapes are loop-invariant, count it `trip` times.

        `first_output` is where the carried values start among the body outputs (after Loop's condition).
        """
        try:
            inferred = infer_body(body, input_dims, input_elems, scope, self.model, self.consts, self.label)
        except CountingError:
            tally.skip(path, op, "loop body shape inference failed")
            return
        sub, body_scope = self.walk_subgraph(inferred, scope, folder, path)
        carried_in = input_dims[2 * first_output : 2 * first_output + carried]
        for index in range(carried):
            after = body_scope.dims(inferred.output[first_output + index].name)
            before = carried_in[index] if index < len(carried_in) else None
            if before is not None and after is not None and tuple(before) != tuple(after):
                tally.skip(path, op, "loop-carried shape changes between iterations")
                return
        tally.merge(sub, trip)
