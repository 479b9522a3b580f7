"""What an xdist worker sends the controller, and how the controller reads it (plugin/xdist_transport.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_flopbudget._config.location import Location
from pytest_flopbudget._judge.baseline import BaselineStore
from pytest_flopbudget._judge.verdict import Measurement
from pytest_flopbudget._plugin.xdist_transport import WorkerExport, receive
from pytest_flopbudget._report import LayerCost, PhaseTotals, Report
from pytest_flopbudget._run import Run
from pytest_flopbudget._shard import PlanItem, Shard


def state(tmp_path: Path, narrowed: str = "") -> Any:
    return SimpleNamespace(
        run=Run(BaselineStore(tmp_path)),
        owners=set(),
        deselected=0,
        lost_worker=False,
        narrowed=lambda session: narrowed,
        config=SimpleNamespace(workeroutput={}),
        shard=None,
    )


def node(output: dict | None) -> Any:
    return SimpleNamespace(workerinput={"workerid": "gw1"}, workeroutput=output or {})


def send(worker: Any) -> dict:
    WorkerExport(worker).pytest_sessionfinish(session=None)  # type: ignore[arg-type]
    return worker.config.workeroutput


def test_a_worker_run_reaches_the_controller(tmp_path: Path) -> None:
    worker = state(tmp_path)
    report = Report(layers={"fc": LayerCost(flops=2, macs=1)}, forward=PhaseTotals(flops=2, macs=1))
    worker.run.record(Measurement("net", report, origin=Location(key="net"), nodeid="t.py::t"))
    worker.owners.add("net")
    controller = state(tmp_path)
    receive(controller, node(send(worker)), None)
    assert [m.name for m in controller.run.measurements] == ["net"] and controller.owners == {"net"}
    assert controller.deselected == 0 and not controller.lost_worker


def test_a_shards_plan_reaches_the_controller(tmp_path: Path) -> None:
    """`--flopbudget-shard`: a worker computed the plan at collection; the controller writes it in the results."""
    worker = state(tmp_path)
    worker.shard = Shard(2, 3, (PlanItem("net", "t.py::t"),), ("t.py::t",), {"front end": "pytest"}, {})
    controller = state(tmp_path)
    receive(controller, node(send(worker)), None)
    assert controller.shard == worker.shard and not controller.lost_worker


def test_a_narrowed_worker_keeps_stale_baselines(tmp_path: Path) -> None:
    controller = state(tmp_path)
    receive(controller, node(send(state(tmp_path, narrowed="-k"))), None)
    assert controller.deselected == 1


def test_a_worker_without_results_leaves_its_models_unchecked(tmp_path: Path) -> None:
    controller = state(tmp_path)
    receive(controller, node(None), "crashed")
    (unchecked,) = controller.run.unchecked
    assert unchecked.name == "xdist worker gw1" and controller.lost_worker
    assert unchecked.message == "xdist worker gw1 sent no results (crashed); the models it counted are not checked"


def test_unreadable_results_are_said_so(tmp_path: Path) -> None:
    controller = state(tmp_path)
    receive(controller, node({"flopbudget_run": "{not json"}), None)
    (unchecked,) = controller.run.unchecked
    assert "sent results that cannot be read: JSONDecodeError" in unchecked.message
