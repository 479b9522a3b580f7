"""Formulas of real models, through their backends, against hand-derived costs and point counts at sizes the
fit never saw."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_flopbudget._backends import count_entry
from pytest_flopbudget._config.pyproject import ModelEntry, parse_settings
from pytest_flopbudget._curve.engine import count_curve, series
from pytest_flopbudget._curve.text import formula_text
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._judge.curve_verdict import not_exact
from pytest_flopbudget._metrics import BYTES, FLOPS, MACS, PARAMS, PEAK_MEMORY

torch = pytest.importorskip("torch")

MODELS = '''
import torch
import torch.nn.functional as F
from torch import nn

from examples.decoder import GPT, GPTConfig

CONFIG = GPTConfig(vocab=128, n_ctx=512, d_model=64, n_layers=2, n_heads=4)


def gpt():
    return GPT(CONFIG)


class LinearAttention(nn.Module):
    """phi(q) (phi(k)^T v): the key-value summary is d x d whatever the length."""

    def __init__(self, d=32):
        super().__init__()
        self.emb = nn.Embedding(100, d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, ids):
        x = self.emb(ids)
        q, k = F.elu(self.q(x)) + 1, F.elu(self.k(x)) + 1
        kv = torch.einsum("bsd,bse->bde", k, self.v(x))
        return torch.einsum("bsd,bde->bse", q, kv)


def linear_attention():
    return LinearAttention()


def convnet():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, 3, stride=2, padding=1),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
    )


class Branchy(nn.Module):
    """An extra layer for long inputs: the cost is two polynomials, not one."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.body, self.extra = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, ids):
        x = self.body(self.emb(ids))
        return self.extra(x) if ids.shape[1] > 128 else x


def branchy():
    return Branchy()
'''


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("curve_models")
    (where / "curve_models.py").write_text(MODELS)
    return where


def entry(root: Path, target: str, inputs: str, dims: str, curve: str) -> ModelEntry:
    text = (
        f'[tool.flopbudget.models.m]\ntarget = "{target}"\ninputs = {inputs}\ndims = {dims}\ncurve = {curve}\n'
        'flops = "1T"\n'
    )
    return parse_settings(text, root / "pyproject.toml").models["m"]


def assert_agrees_at(model: ModelEntry, root: Path, formula, points: list[dict[str, int]]) -> None:  # type: ignore[no-untyped-def]
    for point in points:
        report = count_entry(model.at(point), root)
        for (path, metric), value in series(report).items():
            poly = formula.total(metric) if path is None else formula.layer(path, metric)
            assert poly.at(point) == value, (point, path, metric)


def test_a_gpt_decoders_macs_are_its_linear_weights_times_seq_plus_its_attention(root: Path) -> None:
    model = entry(
        root, "curve_models:gpt", '[{ shape = [1, "seq"], dtype = "int64" }]', "{ seq = 256 }", "{ seq = [16, 512] }"
    )
    report, formula = count_curve(model, root)
    gpt = __import__("curve_models").gpt()
    linear_weights = sum(m.weight.numel() for m in gpt.modules() if isinstance(m, torch.nn.Linear))
    layers, d_model = 2, 64
    assert str(formula.total(MACS)) == f"{2 * layers * d_model}*seq**2 + {linear_weights}*seq"
    assert formula.holds.exact and formula.holds.describe() == "exact on seq in [16, 512]"
    assert formula.total(PARAMS).degree() == 0 and report.inputs[0]["shape"] == [1, 256]
    assert all(formula.layer(f"h.{i}.attn", MACS).term((2,)) == 2 * d_model for i in range(layers))
    unseen = [{"seq": s} for s in (17, 97, 333, 509)]
    assert_agrees_at(model, root, formula, unseen)


MIXTRAL = """
import torch
import transformers


def mixtral():
    config = transformers.MixtralConfig(
        vocab_size=128, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=512,
    )
    torch.manual_seed(0)
    return transformers.MixtralForCausalLM(config).eval()
"""


def test_a_moe_routers_sort_costs_only_flops_their_formula(root: Path) -> None:
    """Mixtral's routing sorts the token-expert pairs (n*ceil(log2 n) comparisons, no polynomial): FLOPs have no
    exact formula and say so, while MACs, bytes and peak memory keep theirs, exact at lengths never counted (the
    whole curve failed with "no polynomial of degree 6 or less")."""
    pytest.importorskip("transformers")
    (root / "moe_models.py").write_text(MIXTRAL)
    model = entry(
        root, "moe_models:mixtral", '[{ shape = [1, "seq"], dtype = "int64" }]', "{ seq = 32 }", "{ seq = [8, 128] }"
    )
    _, formula = count_curve(model, root)
    assert formula.holds.inexact == (FLOPS,) and not formula.holds.piecewise
    # attention 2 layers * (QK^T + AV: 2 * hidden 32 * seq**2) = 128*seq**2 MACs, the rest linear in seq
    assert formula.total(MACS).degree("seq") == 2 and formula.total(MACS).term((2,)) == 128
    for point in ({"seq": 9}, {"seq": 77}, {"seq": 127}):
        report = count_entry(model.at(point), root)
        for metric in (MACS, BYTES, PEAK_MEMORY, PARAMS):
            assert formula.total(metric).at(point) == metric.of_report(report), (point, metric)
    why = not_exact(FLOPS, formula)
    assert why is not None and why.startswith("FLOPs: the formula is not exact on the curve")
    flops_line = next(line for line in formula_text(formula).splitlines() if line.startswith("  FLOPs"))
    assert flops_line.split()[1:3] == ["not", "exact"]  # no polynomial shown that does not hold


def test_linear_attention_has_degree_one_in_seq(root: Path) -> None:
    model = entry(root, "curve_models:linear_attention", '[[2, "seq"]]', "{ seq = 64 }", "{ seq = [8, 1024] }")
    _, formula = count_curve(model, root)
    assert formula.total(FLOPS).degree("seq") == 1 and formula.total(MACS).degree("seq") == 1
    assert_agrees_at(model, root, formula, [{"seq": 11}, {"seq": 1000}])


def test_a_convnet_holds_at_every_multiple_of_its_stride_and_says_so(root: Path) -> None:
    model = entry(root, "curve_models:convnet", '[[1, 3, "height", "width"]]', "{ height = 64, width = 64 }",
                  "{ height = [32, 256], width = [32, 256] }")  # fmt: skip
    _, formula = count_curve(model, root)
    assert formula.holds.step == {"height": 8, "width": 8} and not formula.holds.piecewise
    assert formula.holds.describe().startswith("exact at height, width multiples of 8")
    macs = formula.total(MACS)
    multiples = range(32, 257, 8)
    for height, width in [*((h, 96) for h in multiples), *((72, w) for w in multiples), (256, 248), (40, 200)]:
        point = {"height": height, "width": width}
        assert macs.at(point) == count_entry(model.at(point), root).macs, point
    off = {"height": 36, "width": 64}
    assert macs.at(off) != count_entry(model.at(off), root).macs  # where it does not hold, it was right to say so


def test_a_model_that_branches_on_the_length_is_reported_piecewise(root: Path) -> None:
    model = entry(root, "curve_models:branchy", '[[1, "seq"]]', "{ seq = 64 }", "{ seq = [16, 512] }")
    _, formula = count_curve(model, root)
    holds = formula.holds
    assert holds.piecewise and not holds.exact and holds.ranges == {"seq": (16, 128)}
    assert holds.broken_at == {"seq": 144} and "piecewise" in holds.describe()
    assert_agrees_at(model, root, formula, [{"seq": s} for s in (17, 100, 128)])


def test_an_onnx_graphs_symbolic_dims_get_a_formula(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("MatMul", ["x", "proj.weight"], ["h"], name="proj/MatMul"),
        helper.make_node("Transpose", ["h"], ["ht"], perm=[0, 2, 1], name="attn/Transpose"),
        helper.make_node("MatMul", ["h", "ht"], ["y"], name="attn/MatMul"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.zeros((16, 32), np.float32), "proj.weight")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "sym.onnx")
    text = (
        '[tool.flopbudget.models.m]\ntarget = "sym.onnx"\ndims = { batch = 2, sequence = 16 }\n'
        'curve = { batch = [1, 8], sequence = [16, 256] }\nflops = "1T"\n'
    )
    model = parse_settings(text, tmp_path / "pyproject.toml").models["m"]
    report, formula = count_curve(model, tmp_path)
    assert str(formula.total(MACS)) == "32*batch*sequence**2 + 512*batch*sequence"
    assert str(formula.layer("attn", MACS)) == "32*batch*sequence**2" and formula.holds.exact
    assert report.macs == formula.total(MACS).at({"batch": 2, "sequence": 16})
    point = {"batch": 3, "sequence": 101}
    assert formula.total(MACS).at(point) == count_entry(model.at(point), tmp_path).macs
    # the shapes may name dims of their own too: `len` sizes x's sequence axis, batch stays the graph's symbol
    text = text.replace("sequence = 16", "len = 16").replace("sequence = [16, 256]", "len = [16, 256]")
    text += 'inputs = { x = ["batch", "len", 16] }\n'
    named = parse_settings(text, tmp_path / "pyproject.toml").models["m"]
    _, again = count_curve(named, tmp_path)
    assert str(again.total(MACS)) == "32*batch*len**2 + 512*batch*len"


def test_a_count_that_fails_at_a_size_names_the_size(root: Path) -> None:
    model = entry(
        root, "curve_models:gpt", '[{ shape = [1, "seq"], dtype = "int64" }]', "{ seq = 256 }", "{ seq = [16, 1024] }"
    )
    with pytest.raises(CountingError, match=r"^at seq=\d+: .*exceeds n_ctx 512"):
        count_curve(model, root)


def test_formulas_equal_point_counts_at_random_unseen_sizes(root: Path) -> None:
    model = entry(root, "curve_models:gpt", '[{ shape = ["batch", "seq"], dtype = "int64" }]',
                  "{ batch = 1, seq = 64 }", "{ batch = [1, 8], seq = [16, 512] }")  # fmt: skip
    _, formula = count_curve(model, root)
    assert formula.total(MACS).degree("batch") == 1 and formula.total(MACS).degree("seq") == 2
    rng = random.Random(21)
    assert_agrees_at(
        model, root, formula, [{"batch": rng.randint(1, 8), "seq": rng.randint(16, 512)} for _ in range(3)]
    )


def test_flop_counter_mode_on_real_runs_agrees_at_sizes_the_fit_never_saw(root: Path) -> None:
    """torch's FlopCounterMode counts 2 FLOPs per MAC of matmuls and linear layers on a real forward, and nothing
    for scaled_dot_product_attention on the CPU: the attention modules' own MACs (their SDPA) are left out."""
    from torch.utils.flop_counter import FlopCounterMode

    model = entry(
        root, "curve_models:gpt", '[{ shape = [1, "seq"], dtype = "int64" }]', "{ seq = 64 }", "{ seq = [16, 512] }"
    )
    _, formula = count_curve(model, root)
    gpt = __import__("curve_models").gpt().eval()
    for seq in (23, 301):
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            gpt(torch.zeros(1, seq, dtype=torch.long))
        point = {"seq": seq}
        attention = sum(formula.layer(f"h.{i}.attn", MACS).at(point) for i in range(2))
        assert attention == 2 * 2 * 64 * seq * seq
        assert counter.get_total_flops() == 2 * (formula.total(MACS).at(point) - attention)
