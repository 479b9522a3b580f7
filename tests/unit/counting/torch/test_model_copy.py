"""Nothing of a count stays in the caller's model: the count runs a private structural copy
(counting/torch/model_copy.py).

Each escape found on public model zoos is reproduced here with a small model of the same shape, and every example
model is walked attribute by attribute after counting it: no fake tensor, no new meta tensor, the same objects,
the same values, the same Python attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensor  # noqa: E402

from examples.decoder import GPT, GPTConfig, Llama, LlamaConfig, gpt_inputs, llama_inputs  # noqa: E402
from examples.factories import resnet18_on_meta, resnet50_on_meta, vit_b_16_on_meta  # noqa: E402
from examples.resnet import resnet18  # noqa: E402
from examples.vit import vit_tiny, vit_tiny_inputs  # noqa: E402
from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._counting.torch.model_copy import ModelCopy  # noqa: E402

# --- the walker -------------------------------------------------------------------------------------------------


def snapshot(model: nn.Module) -> dict[str, Any]:
    """Every attribute reachable from every module's __dict__ through plain containers, by path: the object's
    identity and type, and for tensors their metadata and a copy of their values."""
    seen: dict[str, Any] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        seen[f"{path}#module"] = (id(module), type(module))
        seen[f"{path}#keys"] = sorted(module.__dict__)
        for key, value in module.__dict__.items():
            for where, item in _walk(value, f"{path}.{key}", depth=0):
                seen[where] = _describe(item)
    return seen


def _walk(value: Any, where: str, depth: int) -> Iterator[tuple[str, Any]]:
    yield where, value
    if depth > 4 or isinstance(value, (nn.Module, torch.Tensor)):
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{where}[{key!r}]", depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _walk(item, f"{where}[{index}]", depth + 1)


def _describe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        assert not isinstance(value, FakeTensor), "a fake tensor stayed in the model"
        data = None if value.is_meta else value.detach().clone()
        return (
            "tensor",
            id(value),
            type(value),
            value.dtype,
            tuple(value.shape),
            value.device,
            value.requires_grad,
            value.grad is None,
            data,
        )
    if isinstance(value, (bool, int, float, str, type(None))):
        return ("atom", type(value), value)
    if isinstance(value, (dict, list, tuple, set)):
        return ("container", id(value), type(value), len(value))
    return ("object", id(value), type(value))


def assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert before.keys() == after.keys(), sorted(set(before) ^ set(after))[:10]
    for where, old in before.items():
        new = after[where]
        if old[0] == "tensor":
            assert old[:-1] == new[:-1], where
            assert (old[-1] is None) == (new[-1] is None), f"{where}: a meta tensor appeared or went"
            if old[-1] is not None:
                assert torch.equal(old[-1], new[-1]), f"{where}: values changed"
        else:
            assert old == new, where


def counted_twice_unchanged(model: nn.Module, *inputs: Any, **options: Any) -> tuple[Any, Any]:
    before = snapshot(model)
    first = count(model, *inputs, **options)
    assert_same(before, snapshot(model))
    second = count(model, *inputs, **options)
    assert_same(before, snapshot(model))
    return first, second


# --- every example model -------------------------------------------------------------------------------------------

EXAMPLES: dict[str, Callable[[], tuple[nn.Module, tuple[Any, ...]]]] = {
    "resnet18": lambda: (resnet18(num_classes=10), (torch.randn(2, 3, 32, 32),)),
    "resnet18_meta": lambda: (resnet18_on_meta(), (torch.randn(1, 3, 64, 64),)),
    "resnet50_meta": lambda: (resnet50_on_meta(), (torch.randn(1, 3, 64, 64),)),
    "vit_tiny": lambda: (vit_tiny(), vit_tiny_inputs()),
    "vit_b_16_meta": lambda: (vit_b_16_on_meta(), (torch.randn(1, 3, 224, 224),)),
    "gpt_tiny": lambda: (GPT(GPTConfig.tiny()), gpt_inputs(GPTConfig.tiny())),
    "llama_tiny": lambda: (Llama(LlamaConfig.tiny()), llama_inputs(LlamaConfig.tiny())),
}


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_model_is_left_exactly_as_it_was(name: str, training: bool) -> None:
    model, inputs = EXAMPLES[name]()
    model.train(not training)  # the count switches modes for training=True: the caller's mode must survive
    first, second = counted_twice_unchanged(model, *inputs, training=training)
    assert first.to_dict() == second.to_dict()
    if not name.endswith("_meta"):
        real_first, _ = counted_twice_unchanged(model, *inputs, training=training, execution="real")
        assert real_first.macs == first.macs


# --- the escapes found on model zoos, one by one ------------------------------------------------------------------


class Caches(nn.Module):
    """timm LeViT / EfficientFormer keep `attention_bias_cache`; Ultralytics' Detect head keeps anchors."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))
        self.cache: dict[str, torch.Tensor] = {}
        self.history: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.plain = torch.arange(4.0)
        if "k" not in self.cache:
            self.cache["k"] = self.w * 2
        self.history.append(x)
        return x * self.cache["k"] + self.plain


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_tensors_assigned_in_forward_do_not_stay(execution: str) -> None:
    model = Caches()
    counted_twice_unchanged(model, torch.ones(4), execution=execution)
    assert model.cache == {} and model.history == [] and not hasattr(model, "plain")
    out = model(torch.ones(4))
    assert type(out) is torch.Tensor and torch.equal(out, torch.tensor([2.0, 3.0, 4.0, 5.0]))


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_a_module_under_two_names_keeps_its_real_parameters(execution: str) -> None:
    # timm CoaT shares a module between two parents
    lin = nn.Linear(4, 4)
    model = nn.Sequential(lin, nn.ReLU(), lin)
    report = counted_twice_unchanged(model, torch.ones(1, 4), execution=execution)[0]
    assert model[0] is model[2] is lin
    assert type(lin.weight) is nn.Parameter and not isinstance(lin.weight.data, FakeTensor)
    # run twice, counted once: 2 * 4*4 MACs; the shared parameters once: 16 + 4
    assert (report.macs, report.params) == (32, 20)


class RescalesOnce(nn.Module):
    """RWKV: the first forward divides the weights in place and sets a Python flag."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.layers_are_rescaled = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.layers_are_rescaled:
            with torch.no_grad():
                self.lin.weight.div_(2)
            self.layers_are_rescaled = True
        return self.lin(x)


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_python_state_and_in_place_weight_updates_stay_in_the_copy(execution: str) -> None:
    model = RescalesOnce()
    weight = model.lin.weight.detach().clone()
    counted_twice_unchanged(model, torch.ones(1, 4), execution=execution)
    assert model.layers_are_rescaled is False
    assert torch.equal(model.lin.weight, weight)


class AnchorsOnShapeChange(nn.Module):
    """Ultralytics' Detect head: anchors are made (with compute) only when the input shape changes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.shape: tuple[int, ...] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if self.shape != tuple(x.shape):
            grid = torch.stack(torch.meshgrid(torch.arange(x.shape[2]), torch.arange(x.shape[3]), indexing="ij"))
            self.anchors = (grid.float() + 0.5) * 8
            self.shape = tuple(x.shape)
        return y + self.anchors.sum()


def test_a_second_count_gives_the_same_figures() -> None:
    model = AnchorsOnShapeChange()
    first, second = counted_twice_unchanged(model, torch.ones(1, 3, 4, 4))
    assert first.to_dict() == second.to_dict()
    assert model.shape is None and not hasattr(model, "anchors")


def test_lstm_flat_weights_stay_real_parameters() -> None:
    lstm = nn.LSTM(4, 8)
    counted_twice_unchanged(lstm, torch.ones(3, 1, 4))
    assert all(type(w) is nn.Parameter and not isinstance(w.data, FakeTensor) for w in lstm._flat_weights)
    assert [id(w) for w in lstm._flat_weights] == [id(p) for p in lstm.parameters()]
    assert type(lstm(torch.ones(3, 1, 4))[0]) is torch.Tensor


class CastsItsRouter(nn.Module):
    """Switch Transformers and NLLB-MoE routers call `self.classifier.to(router_dtype)` inside forward."""

    def __init__(self) -> None:
        super().__init__()
        self.classifier = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.classifier = self.classifier.to(torch.float64)
        return self.classifier(x.double())


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_module_to_dtype_inside_forward(execution: str) -> None:
    model = CastsItsRouter()
    report = counted_twice_unchanged(model, torch.ones(2, 8), execution=execution)[0]
    # 2*8*4 = 64 MACs
    assert report.macs == 64 and report.skipped == {}
    assert model.classifier.weight.dtype == torch.float32


def test_a_forward_closing_over_a_module_runs_that_module_s_copy() -> None:
    inner = nn.Linear(4, 2)

    class Wrapper(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner
            self.fn = lambda x: inner(x)  # a lambda closing over the submodule

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fn(x)

    model = Wrapper()
    report = counted_twice_unchanged(model, torch.ones(3, 4))[0]
    # attributed to the submodule: 3*4*2 = 24 MACs
    assert report.layers["inner"].macs == 24


def test_objects_that_cannot_be_copied_are_shared_and_named() -> None:
    import threading

    model = nn.Linear(2, 2)
    model.lock = threading.Lock()  # type: ignore[assignment]
    with pytest.warns(UserWarning, match=r"lock \(lock\)"):
        count(model, torch.ones(1, 2))
    assert isinstance(model.lock, type(threading.Lock()))


def test_the_copy_keeps_ties_and_costs_no_weight_copies() -> None:
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight  # tied
    copier = ModelCopy(lambda p: ("param", id(p)), lambda t: ("tensor", id(t)))
    copy = copier.copy(model)
    assert copy is not model and copy[0] is not model[0]
    assert copy[0]._parameters["weight"] is copy[1]._parameters["weight"]
    assert copy[0]._parameters["weight"] == ("param", id(model[0].weight))
    assert copier.shared == []
