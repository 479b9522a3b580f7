"""count() leaves the caller's inputs as they were: forward runs on a private copy of them
(`ModelCopy.copy_inputs` in counting/torch/model_copy.py), as it runs on a private copy of the model.

Every test walks the inputs before and after counting (containers, attributes, slots, namedtuples, dataclasses,
Hugging Face caches) and requires the same objects, the same tensor values and versions, the same lengths, and no
fake tensor anywhere reachable; the Hugging Face tests then run a real decode step with the counted cache and
require exactly the logits of the same step on a cache the count never saw.
"""

from __future__ import annotations

import copy
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensor  # noqa: E402

from pytest_flopbudget import count  # noqa: E402

EXECUTIONS = ["fake", "real"]

# --- the walker -------------------------------------------------------------------------------------------------


def snapshot(*roots: Any) -> dict[str, Any]:
    """Everything reachable from the roots through containers, `__dict__` and `__slots__`, by path: identity and type,
    for tensors their metadata, version counter and a copy of their values, for containers their length."""
    seen: dict[str, Any] = {}
    visited: set[int] = set()

    def walk(value: Any, where: str) -> None:
        assert not isinstance(value, FakeTensor), f"{where}: a fake tensor is reachable from the inputs"
        seen[where] = _describe(value)
        if isinstance(value, (bool, int, float, str, bytes, type(None), torch.dtype, torch.device)):
            return
        if id(value) in visited or isinstance(value, (torch.Tensor, type)):
            return
        visited.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{where}[{key!r}]")
        elif isinstance(value, (list, tuple, set, frozenset)):
            for index, item in enumerate(sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value):
                walk(item, f"{where}[{index}]")
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict):
            seen[f"{where}#attrs"] = sorted(attrs)
            for key, item in attrs.items():
                walk(item, f"{where}.{key}")
        for klass in type(value).__mro__:
            for slot in klass.__dict__.get("__slots__", ()):
                if hasattr(value, slot) and slot not in ("__dict__", "__weakref__"):
                    walk(getattr(value, slot), f"{where}.{slot}")

    for index, root in enumerate(roots):
        walk(root, f"input{index}")
    return seen


def _describe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        data = None if value.is_meta else value.detach().clone()
        return (
            "tensor",
            id(value),
            type(value),
            value.dtype,
            tuple(value.shape),
            value._version,
            value.requires_grad,
            not value.is_leaf or value.grad is None,
            data,
        )
    if isinstance(value, (bool, int, float, str, type(None))):
        return ("atom", type(value), value)
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        return ("container", id(value), type(value), len(value))
    return ("object", id(value), type(value))


def assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert before.keys() == after.keys(), sorted(set(before) ^ set(after))[:10]
    for where, old in before.items():
        new = after[where]
        if isinstance(old, tuple) and old[0] == "tensor":
            assert old[:-1] == new[:-1], where
            if old[-1] is not None:
                assert torch.equal(old[-1], new[-1]), f"{where}: values changed"
        else:
            assert old == new, where


def test_the_walker_sees_what_a_forward_could_change() -> None:
    # the walker is what the guarantee is tested with: it must fail on each kind of change
    state = _inputs()
    before = snapshot(state)
    state[1]["table"]["t"].add_(0)  # same values, one more version
    with pytest.raises(AssertionError, match="table"):
        assert_same(before, snapshot(state))
    state = _inputs()
    before = snapshot(state)
    state[1]["state"].memory[0, 0] = 7.0
    with pytest.raises(AssertionError, match="memory"):
        assert_same(before, snapshot(state))
    state = _inputs()
    before = snapshot(state)
    state[1]["batch"].extra.append(1)
    with pytest.raises(AssertionError):
        assert_same(before, snapshot(state))
    state = _inputs()
    from torch._subclasses.fake_tensor import FakeTensorMode

    state[1]["items"].append(FakeTensorMode().from_tensor(torch.zeros(1)))
    with pytest.raises(AssertionError, match="fake tensor"):
        snapshot(state)


# --- inputs that forward writes to, of every kind --------------------------------------------------------------


@dataclass
class Batch:
    features: Any
    extra: list[Any] = field(default_factory=list)


class State:
    """A plain object with tensor attributes (a user's recurrent state)."""

    def __init__(self) -> None:
        self.memory = torch.randn(2, 4)
        self.steps = 0


class Slotted:
    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer = torch.randn(2, 4)


class Pair(NamedTuple):
    a: Any
    b: Any


class Writes(nn.Module):
    """Writes to every input it is given: in place, by appending, by assigning attributes and keys."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(
        self,
        x: Any,
        batch: Batch,
        state: State,
        slotted: Slotted,
        pair: Pair,
        table: dict[str, Any],
        items: list[Any],
        nested: tuple[Any, ...],
    ) -> Any:
        x.add_(1)
        y = self.linear(x)
        batch.features.mul_(2)
        batch.extra.append(y)
        batch.features = y
        state.memory.copy_(y)
        state.steps += 1
        state.new_attribute = y
        slotted.buffer.sub_(1)
        slotted.buffer = y
        pair.a.zero_()
        table["t"].sub_(1)
        table["out"] = y
        items[0].div_(2)
        items.append(y)
        nested[0]["deep"].append(y)
        nested[1][0].neg_()
        return y


def _inputs() -> tuple[tuple[Any, ...], dict[str, Any]]:
    torch.manual_seed(0)
    return (torch.randn(2, 4),), {
        "batch": Batch(torch.randn(2, 4), [torch.randn(1)]),
        "state": State(),
        "slotted": Slotted(),
        "pair": Pair(torch.randn(2, 4), torch.randn(3)),
        "table": {"t": torch.randn(2, 4)},
        "items": [torch.randn(2, 4)],
        "nested": ({"deep": [torch.randn(1)]}, [torch.randn(2, 4)]),
    }


@pytest.mark.parametrize("execution", EXECUTIONS)
def test_inputs_of_every_kind_are_left_as_they_were(execution: str) -> None:
    model = Writes()
    args, kwargs = _inputs()
    before = snapshot(args, kwargs)
    report = count(model, *args, **kwargs, execution=execution)
    assert_same(before, snapshot(args, kwargs))
    # the writes ran on the private copy and are counted as usual, on [2, 4] tensors (8 elements):
    #   add_ 8; linear 2*4*4 = 32 MACs = 64 FLOPs + bias 8; mul_ 8; sub_ 8 (slotted); sub_ 8 (table); div_ 8;
    #   neg_ 8; copy_ and zero_ are free
    assert report.macs == 32
    assert report.flops == 8 + 64 + 8 + 8 + 8 + 8 + 8 + 8
    assert report.skipped == {}
    # and a second count sees the inputs the first one saw
    assert count(model, *args, **kwargs, execution=execution).to_dict() == report.to_dict()


class Trains(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: Any, table: dict[str, Any]) -> Any:
        y = self.linear(x)
        table["counter"].add_(1)
        table["out"] = y
        return y


@pytest.mark.parametrize("execution", EXECUTIONS)
def test_a_training_step_leaves_inputs_without_grad_and_as_they_were(execution: str) -> None:
    x = torch.randn(2, 4, requires_grad=True)
    table = {"counter": torch.zeros(1)}
    before = snapshot(x, table)
    report = count(Trains(), x, table, training=True, execution=execution)
    assert_same(before, snapshot(x, table))
    assert x.grad is None and table.keys() == {"counter"}
    assert report.backward.macs > 0


class SameObjects(nn.Module):
    """Checks, inside forward, that one object passed twice arrives as one object (the copy keeps aliasing)."""

    def forward(self, x: Any, y: Any, box: dict[str, Any], again: dict[str, Any], layer: nn.Module) -> Any:
        assert x is y
        assert box is again and box["list"] is box["same_list"]
        assert isinstance(layer, nn.Linear)
        layer.seen_by_forward = True
        return layer(x)


def test_aliasing_inside_the_inputs_is_kept_and_the_model_is_reached_through_its_copy() -> None:
    model = nn.ModuleDict({"layer": nn.Linear(4, 4)})
    wrapper = SameObjects()
    wrapper.inner = model
    x = torch.randn(2, 4)
    shared: list[Any] = [torch.randn(1)]
    box = {"list": shared, "same_list": shared}
    before = snapshot(x, box, model.layer.__dict__)
    report = count(wrapper, x, x, box, box, model.layer)
    assert_same(before, snapshot(x, box, model.layer.__dict__))
    assert "seen_by_forward" not in model.layer.__dict__  # the layer passed in is the copy's, never the caller's
    assert report.macs == 2 * 4 * 4


class Locked:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.t = torch.randn(2)


def test_an_input_that_cannot_be_copied_is_named_in_a_warning() -> None:
    class UsesLock(nn.Module):
        def forward(self, x: Any, guard: Locked) -> Any:
            return x * 2

    with pytest.warns(UserWarning, match=r"1 input value\(s\) cannot be copied .*kwargs\['guard'\] \(Locked\)"):
        report = count(UsesLock(), torch.randn(3), guard=Locked())
    assert report.flops == 3


# --- Hugging Face caches: a counted decode step leaves the cache as it was ---------------------------------------

VOCAB = 64


def _llama() -> Any:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval(), config


def _decode_is_unchanged(model: Any, cache: Any, execution: str, cache_keyword: str, **inputs: Any) -> Any:
    """Counts one decode step with `cache`, then requires the real step on it to equal the step on a deep copy
    taken before the count (the forward as if the count had not happened)."""
    untouched = copy.deepcopy(cache)
    length = int(cache.get_seq_length())
    before = snapshot(cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # `past_key_values` is deprecated in favour of `cache`
        report = count(model, **inputs, **{cache_keyword: cache}, use_cache=True, execution=execution)
    assert_same(before, snapshot(cache))
    assert cache.get_seq_length() == length
    with torch.no_grad():
        after_count = model(**inputs, cache=cache, use_cache=True).logits
        as_if_not_counted = model(**inputs, cache=untouched, use_cache=True).logits
    assert type(after_count) is torch.Tensor
    assert torch.equal(after_count, as_if_not_counted)
    assert cache.get_seq_length() == untouched.get_seq_length() == length + 1
    assert report.skipped == {}
    return report


@pytest.mark.parametrize("cache_keyword", ["past_key_values", "cache"])
@pytest.mark.parametrize("execution", EXECUTIONS)
def test_llama_decode_step_leaves_the_dynamic_cache_as_it_was(execution: str, cache_keyword: str) -> None:
    from transformers import DynamicCache

    model, _ = _llama()
    prompt, step = torch.randint(0, VOCAB, (1, 6)), torch.randint(0, VOCAB, (1, 1))
    with torch.no_grad():
        cache = model(prompt, use_cache=True).past_key_values  # a real prefill builds a real cache
    assert isinstance(cache, DynamicCache) and cache.get_seq_length() == 6
    report = _decode_is_unchanged(model, cache, execution, cache_keyword, input_ids=step)
    # one token against 6 cached + 1 new keys, H = 32, 4 heads of 8, 2 KV heads (16 wide), I = 64, 2 layers:
    #   q 32*32 + k, v 32*16 each + o 32*32 = 3072; attention 2 * 4 heads * 1*7 * 8 = 448; MLP 3*32*64 = 6144
    #   per layer 9664, 2 layers 19328; lm_head 32*64 = 2048
    assert report.macs == 2 * (3072 + 448 + 6144) + 2048


@pytest.mark.parametrize("execution", EXECUTIONS)
def test_llama_decode_step_leaves_the_static_cache_as_it_was(execution: str) -> None:
    from transformers import StaticCache

    model, config = _llama()
    prompt, step = torch.randint(0, VOCAB, (1, 6)), torch.randint(0, VOCAB, (1, 1))
    cache = StaticCache(config=config, max_cache_len=16)
    with torch.no_grad():
        model(prompt, cache=cache, use_cache=True)
    report = _decode_is_unchanged(model, cache, execution, "cache", input_ids=step)
    # as the dynamic case, but attention runs over all 16 preallocated positions: 2 * 4 * 1*16 * 8 = 1024
    assert report.macs == 2 * (3072 + 1024 + 6144) + 2048


@pytest.mark.parametrize("execution", EXECUTIONS)
def test_t5_decode_step_leaves_the_encoder_decoder_cache_as_it_was(execution: str) -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        decoder_start_token_id=0,
    )
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(config).eval()
    source, step = torch.randint(0, VOCAB, (1, 6)), torch.randint(0, VOCAB, (1, 1))
    with torch.no_grad():
        cache = model(input_ids=source, decoder_input_ids=source[:, :3], use_cache=True).past_key_values
    assert isinstance(cache, transformers.EncoderDecoderCache)
    assert cache.cross_attention_cache.get_seq_length() == 6 and cache.get_seq_length() == 3
    _decode_is_unchanged(model, cache, execution, "cache", input_ids=source, decoder_input_ids=step)
    assert cache.cross_attention_cache.get_seq_length() == 6
