"""Detection models in fake mode (issue 9): data-dependent sizes at their upper bound, named in `Report.estimated`.

The rule under test: an op whose output size depends on data (`nonzero`, `masked_select`, boolean-mask indexing,
`unique*`, `torchvision::nms`) is counted at its upper bound, every element (every box) kept; caps later in the model
(`keep[:N]`, `topk(min(k, n))`) apply as usual. Routing ops on fake floats (`topk`, `argmax`, ...) get invented
indices (top-k: row t takes `(t*k + j) % n`; argmax: `t % n`), ops whose tensors all carry such known values run
for real, and a routing op is listed in `estimated` when its invented indices were read.

Each model below is small enough to derive by hand; its `saturate()` weights make a *real* forward reach the bound
(every score passes, NMS keeps every box), so `execution="real"` confirms each hand derivation and must agree with
fake mode op for op.

Figures leave out nms and roi_align (no formula today) and topk and unique (comparison ops, hand-derived in
test_torch_ops_compare.py): `priced()` subtracts them, so the numbers here are the boxes' arithmetic alone, and
the real-vs-fake comparison covers them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import detection_models  # noqa: E402
from detection_models import TinyFasterRCNN, TinyRetinaNet, TinySSD  # noqa: E402
from torch_op_helpers import Call, op_costs  # noqa: E402

from pytest_flopbudget import Report, count  # noqa: E402
from pytest_flopbudget._errors import CountingError  # noqa: E402

# --- helpers -------------------------------------------------------------------------------------------------------

#: Ops left out of the hand-derived figures: no formula (nms, roi_align: listed in `skipped`) or derived elsewhere.
UNPRICED = frozenset(
    {
        "aten.topk",
        "aten._unique2",
        "aten.unique_dim",
        "aten.unique_consecutive",
        "torchvision.nms",
        "torchvision.roi_align",
    }
)
BOUND = "upper bound"  # words of the bound rule in EstimatedOp.rule
ROUTING = "round-robin"  # words of the routing rule


def priced(report: Report) -> tuple[int, int]:
    """(FLOPs, MACs) without the ops in UNPRICED."""
    extra = [cost for op, cost in report.ops.items() if op in UNPRICED]
    return report.flops - sum(c.flops for c in extra), report.macs - sum(c.macs for c in extra)


def conv(c_out: int, h: int, w: int, fan_in: int) -> tuple[int, int]:
    """(MACs, bias adds) of a convolution with bias: c_out x h x w outputs, each a dot product over fan_in
    = c_in * kh * kw taps. FLOPs are 2 * MACs + bias adds."""
    outputs = c_out * h * w
    return outputs * fan_in, outputs


def linear(rows: int, c_in: int, c_out: int) -> tuple[int, int]:
    """(MACs, bias adds) of a dense layer with bias."""
    return rows * c_in * c_out, rows * c_out


def decode(boxes: int, sets: int) -> int:
    """BoxCoder.decode_single on `boxes` rows of `sets` box deltas each: 6R + 20RG FLOPs (see detection_models)."""
    return 6 * boxes + 20 * boxes * sets


def batched_nms(boxes: int) -> int:
    """Coordinate trick before one nms: max 4M, add 1, mul M, add 4M."""
    return 9 * boxes + 1


def remove_small(boxes: int) -> int:
    """2 sub, 2 ge, 1 and per box."""
    return 5 * boxes


def anchors(h: int, w: int, per_cell: int) -> int:
    """arange * stride for both axes, then the shift add over every anchor coordinate."""
    return w + h + 4 * h * w * per_cell


# --- hand-derived figures ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    """What one model on a 1x3x64x64 input costs at the upper bound."""

    flops: int
    macs: int
    estimated: dict[str, int]  # bounded ops: exact calls; routing ops: calls at most
    layers: dict[str, set[str]]  # estimated op -> module paths
    nms: list[int]  # boxes into (= kept by) each NMS call at the bound
    detections: int
    routing: frozenset[str] = field(default_factory=lambda: frozenset({"aten.topk"}))


def faster_rcnn_expected(scale_from_tensor: bool) -> Expected:
    # Backbone: three 3x3 stride-2 convs, 3->8 (32x32), 8->16 (16x16), 16->16 (8x8), each + ReLU.
    # RPN head on the 8x8 map: 3x3 conv 16->16 + ReLU, 1x1 objectness 16->1, 1x1 deltas 16->4 (one anchor/cell).
    convs = [
        conv(8, 32, 32, 3 * 9),  # 221,184 MACs
        conv(16, 16, 16, 8 * 9),  # 294,912
        conv(16, 8, 8, 16 * 9),  # 147,456
        conv(16, 8, 8, 16 * 9),  # RPN conv: 147,456
        conv(1, 8, 8, 16),  # objectness: 1,024
        conv(4, 8, 8, 16),  # deltas: 4,096
    ]
    relus = 8 * 32 * 32 + 16 * 16 * 16 + 16 * 8 * 8 + 16 * 8 * 8  # 15,360 with the box head's below
    # 64 anchors; pre_nms_top_n 32 -> k = 32 proposals; all disjoint, NMS keeps 32; post_nms_top_n -> P = 16.
    n_anchors, k, p = 64, 32, 16
    # Box head on P = 16 RoIs of 16x4x4: fc6 256->32 + ReLU, fc7 32->32 + ReLU, cls 32->3, deltas 32->12.
    linears = [linear(p, 256, 32), linear(p, 32, 32), linear(p, 32, 3), linear(p, 32, 12)]
    relus += 2 * p * 32
    # Second stage: 3 classes, background dropped -> M = 2P = 32 candidates, all pass, NMS keeps 32; cap D = 20.
    m, d = 2 * p, 20
    post = (
        anchors(8, 8, 1)  # 8 + 8 + 256 = 272
        + decode(n_anchors, 1)  # RPN decode: 1,664
        + k  # top_n_idx + offset
        + k  # sigmoid
        + 4 * k  # clip: clamp per coordinate
        + remove_small(k)  # 160; its torch.where is aten.nonzero #1
        + k  # scores >= score_thresh; torch.where: aten.nonzero #2
        + batched_nms(k)  # 289; torchvision.nms #1 keeps k, keep[:16]
        + (4 if scale_from_tensor else 0)  # _infer_scale: log2 + round for each spatial dim
        + decode(p, 3)  # RoI decode of [16, 12]: 1,056
        + 5 * p * 3  # softmax over 3 classes: 240
        + p * 3 * 4  # clip [16, 3, 4]: 192
        + m  # scores > score_thresh; boxes/scores/labels[mask]: aten.index x 3
        + remove_small(m)  # 160; aten.nonzero #3
        + batched_nms(m)  # 289; torchvision.nms #2 keeps 32, keep[:20]
    )  # 4,582 (4,578 with the scale in Python math)
    macs = sum(c[0] for c in convs) + sum(lin[0] for lin in linears)  # 816,128 + 155,136 = 971,264
    biases = sum(c[1] for c in convs) + sum(lin[1] for lin in linears)  # 14,656 + 1,264 = 15,920
    return Expected(
        flops=2 * macs + biases + relus + post,  # 1,978,390 (1,978,386)
        macs=macs,
        estimated={"aten.index": 3, "aten.nonzero": 3, "aten.topk": 1, "torchvision.nms": 2},
        layers={
            "aten.index": {"roi_heads"},
            "aten.nonzero": {"rpn", "roi_heads"},
            "aten.topk": {"rpn"},
            "torchvision.nms": {"rpn", "roi_heads"},
        },
        nms=[k, m],
        detections=d,
    )


def retinanet_expected() -> Expected:
    # Stem to P3 (8x8) as in Faster R-CNN, one more 3x3 stride-2 conv to P4 (4x4). Shared head per level: 3x3 conv
    # 16->16 + ReLU then 3x3 cls 16->2 (one anchor, 2 classes); 3x3 conv 16->16 + ReLU then 3x3 deltas 16->4.
    convs = [conv(8, 32, 32, 27), conv(16, 16, 16, 72), conv(16, 8, 8, 144), conv(16, 4, 4, 144)]
    for h in (8, 4):
        convs += [conv(16, h, h, 144), conv(2, h, h, 144), conv(16, h, h, 144), conv(4, h, h, 144)]
    relus = 8 * 32 * 32 + 16 * 16 * 16 + 16 * 8 * 8 + 16 * 4 * 4 + 2 * (16 * 8 * 8 + 16 * 4 * 4)  # 16,128
    # Per level n logits (cells x 2 classes): sigmoid n, > thresh n; scores[mask] (aten.index, bound n) and
    # torch.where (aten.nonzero, bound n); topk(k = min(50, n)); anchor index: div k, label: remainder k; decode k
    # boxes (26k); clip 4k.
    n3, n4 = 64 * 2, 16 * 2
    k3, k4 = min(50, n3), min(50, n4)  # 50, 32
    per_level = sum(2 * n + 2 * k + decode(k, 1) + 4 * k for n, k in ((n3, k3), (n4, k4)))  # 1,856 + 1,088
    m = k3 + k4  # 82 boxes: two classes apart, IoU <= 0.25 within one, NMS keeps all; cap 40
    post = anchors(8, 8, 1) + anchors(4, 4, 1) + per_level + batched_nms(m)  # 272 + 72 + 2,944 + 739 = 4,027
    macs = sum(c[0] for c in convs)  # 1,138,176
    return Expected(
        flops=2 * macs + sum(c[1] for c in convs) + relus + post,  # 2,276,352 + 16,608 + 16,128 + 4,027
        macs=macs,
        estimated={"aten.index": 2, "aten.nonzero": 2, "aten.topk": 2, "torchvision.nms": 1},
        layers={op: {""} for op in ("aten.index", "aten.nonzero", "aten.topk", "torchvision.nms")},
        nms=[m],
        detections=40,
    )


def ssd_expected() -> Expected:
    # Stem to 8x8 as above; 3x3 heads: cls 16->3 (background + 2 classes), deltas 16->4; one anchor per cell.
    convs = [conv(8, 32, 32, 27), conv(16, 16, 16, 72), conv(16, 8, 8, 144), conv(3, 8, 8, 144), conv(4, 8, 8, 144)]
    relus = 8 * 32 * 32 + 16 * 16 * 16 + 16 * 8 * 8  # 13,312
    # softmax over [64, 3]; decode 64 boxes and clip once; per foreground class: score > thresh (64),
    # score[mask] and boxes[mask] (2 x aten.index, bound 64), topk(min(24, 64) = 24). 48 boxes, NMS keeps 48; cap 30.
    k, m = 24, 48
    post = anchors(8, 8, 1) + 5 * 64 * 3 + decode(64, 1) + 4 * 64 + 2 * 64 + batched_nms(m)  # 3,713
    macs = sum(c[0] for c in convs)  # 663,552 + 27,648 + 36,864 = 728,064
    assert m == 2 * k
    return Expected(
        flops=2 * macs + sum(c[1] for c in convs) + relus + post,  # 1,456,128 + 13,760 + 13,312 + 3,713
        macs=macs,
        estimated={"aten.index": 4, "aten.topk": 2, "torchvision.nms": 1},
        layers={op: {""} for op in ("aten.index", "aten.topk", "torchvision.nms")},
        nms=[m],
        detections=30,
    )


Build = Callable[[], nn.Module]
CASES: dict[str, tuple[Build, Expected]] = {
    "faster_rcnn": (lambda: TinyFasterRCNN(), faster_rcnn_expected(scale_from_tensor=True)),
    "faster_rcnn_python_scale": (
        lambda: TinyFasterRCNN(scale_from_tensor=False),
        faster_rcnn_expected(scale_from_tensor=False),
    ),
    "retinanet": (lambda: TinyRetinaNet(), retinanet_expected()),
    "ssd": (lambda: TinySSD(), ssd_expected()),
}


def test_the_hand_derivations_add_up_to_the_written_totals() -> None:
    figures = {name: (e.flops, e.macs) for name, (_, e) in CASES.items()}
    assert figures == {
        "faster_rcnn": (1_978_390, 971_264),
        "faster_rcnn_python_scale": (1_978_386, 971_264),
        "retinanet": (2_313_115, 1_138_176),
        "ssd": (1_486_913, 728_064),
    }


def saturated(name: str) -> tuple[nn.Module, Any, Expected]:
    build, expected = CASES[name]
    torch.manual_seed(0)
    model = build().eval()
    model.saturate()  # type: ignore[operator]
    return model, torch.randn(1, 3, 64, 64), expected


def cases(**marks: pytest.MarkDecorator) -> list[Any]:
    return [pytest.param(name, id=name, marks=[marks[name]] if name in marks else []) for name in CASES]


# --- real execution: the derivations, with the bound reached for real -----------------------------------------------


@pytest.mark.parametrize("name", cases())
def test_saturated_real_forward_reaches_the_bound(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model, x, expected = saturated(name)
    calls: list[tuple[int, int]] = []
    nms = detection_models.nms

    def recording_nms(boxes: Any, scores: Any, iou_threshold: float) -> Any:
        keep = nms(boxes, scores, iou_threshold)
        calls.append((boxes.shape[0], keep.shape[0]))
        return keep

    monkeypatch.setattr(detection_models, "nms", recording_nms)
    with torch.no_grad():
        [(boxes, scores, labels)] = model(x)
    # every score passed its threshold (the NMS inputs are the bounds) and NMS kept every box
    assert calls == [(n, n) for n in expected.nms]
    assert boxes.shape == (expected.detections, 4)
    assert scores.shape == labels.shape == (expected.detections,)


@pytest.mark.parametrize("name", cases())
def test_real_count_matches_the_hand_derivation(name: str) -> None:
    model, x, expected = saturated(name)
    report = count(model, x, execution="real")
    assert priced(report) == (expected.flops, expected.macs)
    assert set(report.skipped) <= UNPRICED
    assert sum(c.flops for c in report.layers.values()) == report.flops


# --- fake execution: the upper-bound rule ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", cases())
def test_fake_count_is_the_upper_bound(name: str) -> None:
    model, x, expected = saturated(name)
    fake = count(model, x)
    assert priced(fake) == (expected.flops, expected.macs)
    assert set(fake.skipped) <= UNPRICED
    # at the bound, the real forward runs the very same ops on the very same shapes
    assert op_costs(fake) == op_costs(count(model, x, execution="real"))


@pytest.mark.parametrize("name", cases())
def test_fake_report_names_the_estimated_ops(name: str) -> None:
    model, x, expected = saturated(name)
    report = count(model, x)
    bounded = {op: calls for op, calls in report.estimated.items() if op not in expected.routing}
    assert bounded == {op: calls for op, calls in expected.estimated.items() if op not in expected.routing}
    for op, entry in report.estimated_ops.items():
        assert set(entry.layers) <= expected.layers[op], op
        if op in expected.routing:
            # listed when its invented indices were read; here only the number of picks matters, not which
            assert 0 < entry.calls <= expected.estimated[op], op
            assert ROUTING in entry.rule, (op, entry.rule)
        else:
            assert set(entry.layers) == expected.layers[op], op
            assert BOUND in entry.rule, (op, entry.rule)
    assert Report.from_dict(report.to_dict()).estimated == report.estimated


def test_fake_count_does_not_depend_on_the_weights() -> None:
    # fake tensors carry no values: random weights (a real run would drop boxes) count the same as saturated ones
    x = torch.randn(1, 3, 64, 64)
    torch.manual_seed(1)
    random = count(TinyRetinaNet().eval(), x)
    saturated_model = TinyRetinaNet().eval().saturate()
    saturated_report = count(saturated_model, x)
    assert op_costs(random) == op_costs(saturated_report)
    assert random.estimated == saturated_report.estimated


@pytest.mark.parametrize("name", cases())
def test_real_execution_estimates_nothing(name: str) -> None:
    model, x, _ = saturated(name)
    report = count(model, x, execution="real")
    assert report.estimated == {}
    assert report.estimated_ops == {}
    assert "estimated" not in report.to_dict()


def test_a_model_without_data_dependent_ops_estimates_nothing() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
    report = count(model, torch.randn(1, 3, 8, 8))
    assert report.estimated == {}
    assert "estimated" not in report.to_dict()


# --- the bound, op by op --------------------------------------------------------------------------------------------

#: positive and distinct: every selection and every unique keeps every element in a real run
GRID = torch.arange(1.0, 25.0).reshape(6, 4)
#: six disjoint 5x5 boxes, scores falling: NMS keeps all six
BOXES = torch.tensor([[10.0 * i, 0.0, 10.0 * i + 5, 5.0] for i in range(6)])
SCORES = torch.linspace(1.0, 0.5, 6)
#: all above the 0.05 threshold
SCORES32 = torch.linspace(0.1, 1.0, 32)


def nms_kept(cap: int | None) -> Callable[[Any, Any], Any]:
    def run(boxes: Any, scores: Any) -> Any:
        keep = detection_models.nms(boxes, scores, 0.5)
        return (keep if cap is None else keep[:cap]).float() * 2

    return run


def known_labels_masked(scores: Any) -> Any:
    """torchvision's RoIHeads labels (arange over classes, expanded per box) kept by a score mask."""
    labels = torch.arange(3).view(1, -1).expand(scores.shape[0] // 2, 3)[:, 1:].reshape(-1)
    return labels[scores > 0.05].float() * 2


BOUNDED_OPS = [
    # (op under the rule, function, inputs, FLOPs at the bound)
    pytest.param("aten.nonzero", lambda x: torch.nonzero(x).float() * 2, (GRID,), 24 * 2, id="nonzero"),
    pytest.param("aten.nonzero", lambda x: torch.where(x > 0)[0].float() * 2, (GRID,), 24 + 24, id="where"),
    pytest.param("aten.masked_select", lambda x: torch.masked_select(x, x > 0) * 2, (GRID,), 24 + 24, id="masked"),
    # gt on 6 rows, all 6 rows of 4 kept
    pytest.param("aten.index", lambda x: x[x[:, 0] > 0] * 2, (GRID,), 6 + 24, id="bool_index"),
    # gt on 32 scores, all 32 labels kept
    pytest.param("aten.index", known_labels_masked, (SCORES32,), 32 + 32, id="bool_index_known"),
    pytest.param("aten._unique2", lambda x: torch.unique(x) * 2, (GRID,), 24, id="unique"),
    pytest.param("aten.unique_dim", lambda x: torch.unique(x, dim=0) * 2, (GRID,), 24, id="unique_dim"),
    pytest.param("aten.unique_consecutive", lambda x: torch.unique_consecutive(x) * 2, (GRID,), 24, id="consecutive"),
    pytest.param("torchvision.nms", nms_kept(None), (BOXES, SCORES), 6, id="nms"),
    pytest.param("torchvision.nms", nms_kept(4), (BOXES, SCORES), 4, id="nms_capped"),  # keep[:4] caps the bound
]


@pytest.mark.parametrize(("op", "fn", "inputs", "flops"), BOUNDED_OPS)
def test_data_dependent_op_counts_at_its_upper_bound(
    op: str, fn: Callable[..., Any], inputs: tuple[Any, ...], flops: int
) -> None:
    fake = count(Call(fn), *inputs)
    real = count(Call(fn), *inputs, execution="real")
    assert priced(fake) == priced(real) == (flops, 0)
    assert op_costs(fake) == op_costs(real)
    assert fake.estimated == {op: 1}
    assert BOUND in fake.estimated_ops[op].rule
    assert real.estimated == {}


def topk_then_unique(scores: Any) -> Any:
    picks = torch.unique(scores.topk(3, dim=1).indices)
    return scores.new_ones(int(picks.max()) + 1) * 2  # Python control flow on the picked values


def argmax_then_size(scores: Any) -> Any:
    picks = scores.argmax(dim=1)
    return scores.new_ones(int(picks.max()) + 1) * 2


def routed_scores(picks: Callable[[int], list[int]]) -> Any:
    """[4, 6] scores whose real top choices per row t are `picks(t)`: a real run picks the invented indices."""
    scores = torch.zeros(4, 6)
    for t in range(4):
        scores[t, picks(t)] = 1.0
    return scores


ROUTING_CASES = [
    # topk(3) of 6, invented (3t + j) % 6: rows [0,1,2], [3,4,5], [0,1,2], [3,4,5]; unique runs for real on them:
    # 6 values (exact, not estimated); max over them 6, ones(5 + 1) * 2: 6 -> 12 FLOPs (identity picks would give
    # 3 values and 6 FLOPs, so this also pins the round-robin)
    pytest.param(
        "aten.topk", topk_then_unique, routed_scores(lambda t: [(3 * t + j) % 6 for j in range(3)]), 6 + 6, id="topk"
    ),
    # argmax over 6, invented t % 6: [0, 1, 2, 3]; argmax reads 24, max 4, ones(3 + 1) * 2: 4 -> 32 FLOPs
    pytest.param("aten.argmax", argmax_then_size, routed_scores(lambda t: [t % 6]), 24 + 4 + 4, id="argmax"),
]


@pytest.mark.parametrize(("op", "fn", "scores", "flops"), ROUTING_CASES)
def test_invented_indices_are_known_values_that_run_for_real(
    op: str, fn: Callable[[Any], Any], scores: Any, flops: int
) -> None:
    fake = count(Call(fn), scores)
    real = count(Call(fn), scores, execution="real")
    assert priced(fake) == priced(real) == (flops, 0)
    assert fake.estimated == {op: 1}
    assert ROUTING in fake.estimated_ops[op].rule


# --- errors ---------------------------------------------------------------------------------------------------------


class GatedOnOutput(nn.Module):
    """Python control flow on a value of the model's own output: no bound can stand in for it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: Any) -> Any:
        y = self.conv(x)
        if y.sum().item() > 0:
            return y.relu()
        return y


def test_control_flow_on_an_output_value_fails_in_one_line_pointing_to_real_execution() -> None:
    x = torch.randn(1, 3, 8, 8)
    with pytest.raises(CountingError) as info:
        count(GatedOnOutput(), x)
    message = str(info.value)
    assert "fake mode cannot run" in message
    assert "execution='real'" in message
    assert "\n" not in message
    assert count(GatedOnOutput(), x, execution="real").macs == 4 * 6 * 6 * 27


def test_a_real_input_error_does_not_suggest_real_execution() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3))
    with pytest.raises(CountingError) as info:
        count(model, None)
    message = str(info.value)
    assert "layer '0' (Conv2d)" in message
    assert "TypeError" in message
    assert "execution='real'" not in message
    assert "\n" not in message


# --- the torchvision:: ops of the helper module ---------------------------------------------------------------------


def test_nms_kernel_suppresses_overlaps_and_keeps_score_order() -> None:
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [20.0, 20.0, 30.0, 30.0]])
    scores = torch.tensor([0.5, 0.9, 0.7])
    assert torch.ops.torchvision.nms(boxes, scores, 0.5).tolist() == [1, 2]  # box 0 overlaps box 1 (IoU 0.68)
    assert torch.ops.torchvision.nms(boxes, scores, 0.7).tolist() == [1, 2, 0]


def test_fake_kernels_like_torchvision() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv()):
        keep = torch.ops.torchvision.nms(torch.empty(5, 4), torch.empty(5), 0.5)
        pooled = torch.ops.torchvision.roi_align(torch.empty(2, 16, 8, 8), torch.empty(7, 5), 0.125, 4, 3, 2, False)
    assert not isinstance(keep.shape[0], int)  # an unbacked size: the number of kept boxes depends on the data
    assert keep.dtype == torch.int64
    assert tuple(pooled.shape) == (7, 16, 4, 3)


def test_roi_align_kernel_averages_the_box() -> None:
    feature = torch.arange(64.0).reshape(1, 1, 8, 8)  # value = 8 * row + column
    rois = torch.tensor([[0.0, 2.0, 2.0, 6.0, 6.0]])
    pooled = torch.ops.torchvision.roi_align(feature, rois, 1.0, 1, 1, 2, True)
    # aligned box [1.5, 5.5)^2, samples at 2.5 and 4.5 on each axis: mean of 8y + x over them = 9 * 3.5 = 31.5
    assert pooled.shape == (1, 1, 1, 1)
    assert pooled.item() == pytest.approx(31.5)


def test_helper_module_registers_the_ops_once() -> None:
    nms_before = torch.ops.torchvision.nms.default
    importlib.reload(detection_models)
    path = Path(detection_models.__file__)
    spec = importlib.util.spec_from_file_location("detection_models_again", path)
    assert spec is not None and spec.loader is not None
    again = importlib.util.module_from_spec(spec)
    sys.modules["detection_models_again"] = again
    try:
        spec.loader.exec_module(again)
    finally:
        del sys.modules["detection_models_again"]
    assert again._LIBRARIES == []  # found the ops defined and left them alone
    assert torch.ops.torchvision.nms.default is nms_before
    assert torch.ops.torchvision.nms(BOXES, SCORES, 0.5).tolist() == list(range(6))
