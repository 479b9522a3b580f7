"""The first count in a fresh process: no import of `torch._dynamo` (counting/torch/defer_dynamo.py), a ShapeEnv only
when an op needs one (lazy_shape_env.py), and view ops replayed on their input's storage (shape_memo.py).

Import state is per process and the suite's workers have long imported Dynamo, so every import check runs in a
fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from pytest_flopbudget import count  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]

#: After the count: what the child reports about Dynamo. `cached` lists `_disable_dynamo` wrappers that still hold
#: an answer of the stand-in (they must hold none, or a later torch.compile would not disable Dynamo there).
_REPORT = """
import json, sys, torch
from torch._subclasses.fake_tensor import FakeTensorMode
dynamo = sys.modules.get("torch._dynamo")
raw = FakeTensorMode.__torch_dispatch__.__wrapped__
print(json.dumps({
    "dynamo": None if dynamo is None else type(dynamo).__name__,
    "real": dynamo is not None and hasattr(dynamo, "optimize"),
    "attribute": "_dynamo" in torch.__dict__ and type(torch.__dict__["_dynamo"]).__name__,
    "cached": "__dynamo_disable" in raw.__dict__ and raw.__dict__["__dynamo_disable"] is raw,
    "result": RESULT,
}))
"""


def run_child(body: str) -> dict:
    """Runs `body` (which sets RESULT) in a fresh interpreter and returns the report above."""
    code = textwrap.dedent(body) + _REPORT
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_counting_never_imports_dynamo() -> None:
    # ResNet-18 (real weights: initialising on the meta device runs torch._refs, which imports Dynamo itself),
    # forward and a training step: 1,814,073,344 MACs forward (torchvision's figure), 10,648,412,160 conv/linear
    # FLOPs for the step (REFERENCE.md)
    report = run_child("""
        import torch
        from examples.resnet import resnet18
        from pytest_flopbudget import count
        x = torch.randn(1, 3, 224, 224)
        model = resnet18()
        RESULT = [count(model.eval(), x).macs, 2 * count(model.train(), x, training=True).macs]
    """)
    assert report == {
        "dynamo": None,
        "real": False,
        "attribute": False,
        "cached": False,
        "result": [1_814_073_344, 10_648_412_160],
    }


def test_torch_compile_after_a_count_still_disables_dynamo_in_dispatch() -> None:
    # After the count the real Dynamo imports normally, and the wrappers the stand-in answered ask it again.
    report = run_child("""
        import torch
        from pytest_flopbudget import count
        count(torch.nn.Linear(4, 3), torch.randn(2, 4))
        import torch._dynamo
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            torch.ones(2) + 1  # the wrapper now caches the real torch._dynamo.disable(fn)
        raw = FakeTensorMode.__torch_dispatch__.__wrapped__
        RESULT = raw.__dict__["__dynamo_disable"] is not raw
    """)
    assert report["real"] and report["attribute"] == "module" and report["result"] is True


def test_a_model_that_uses_dynamo_gets_the_real_one() -> None:
    # Any other attribute of the stand-in loads the real package in its place; the count is unaffected:
    # Linear(4, 3) on [2, 4]: 2*4*3 = 24 MACs.
    report = run_child("""
        import torch
        from pytest_flopbudget import count

        class AsksDynamo(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 3)

            def forward(self, x):
                assert torch._dynamo.is_compiling() is False
                return self.fc(x)

        RESULT = count(AsksDynamo(), torch.randn(2, 4)).macs
    """)
    assert report == {"dynamo": "module", "real": True, "attribute": "module", "cached": False, "result": 24}


def test_a_data_dependent_size_in_a_fresh_process_gets_its_shape_env() -> None:
    # x[x > 0] on 6 elements: nonzero needs a ShapeEnv (made on demand); counted at its upper bound, all 6 kept,
    # then 6 multiplications by 2; the same figures as with a ShapeEnv from the start (in this process).
    body = """
        import torch
        from pytest_flopbudget import count

        class Mask(torch.nn.Module):
            def forward(self, x):
                return x[x > 0] * 2

        report = count(Mask(), torch.randn(2, 3))
        RESULT = [report.layers[""].ops["aten.mul"].flops, sorted(report.estimated)]
    """
    child = run_child(body)
    assert child["result"][0] == 6

    class Mask(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x > 0] * 2

    here = count(Mask(), torch.randn(2, 3))
    assert child["result"] == [here.layers[""].ops["aten.mul"].flops, sorted(here.estimated)]


# --- view ops replayed by the shape memo --------------------------------------------------------------------------

_STORAGE_CHECKS: list[bool] = []


class Scan(nn.Module):
    """A per-step loop of views and in-place updates, the shape of Mamba's selective scan."""

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        outs = []
        for i in range(x.shape[1]):
            step = x.select(1, i)  # the same view op on the same metadata from step 2 on: replayed
            _STORAGE_CHECKS.append(step.untyped_storage()._cdata == x.untyped_storage()._cdata)
            state = state * 0.5 + step  # 2 ops of 8 elements
            state.add_(1)  # in place, 8 adds
            outs.append(state.unsqueeze(1))
        return torch.cat(outs, 1)


def test_replayed_views_alias_their_input_and_count_the_same() -> None:
    _STORAGE_CHECKS.clear()
    report = count(Scan(), torch.randn(2, 5, 4), torch.zeros(2, 4))
    # 5 steps of mul (8), add (8), add_ (8)
    assert report.flops == 5 * 3 * 8
    assert _STORAGE_CHECKS == [True] * 5
    real = count(Scan(), torch.randn(2, 5, 4), torch.zeros(2, 4), execution="real")
    assert (report.flops, report.layers[""].ops.keys()) == (real.flops, real.layers[""].ops.keys())
