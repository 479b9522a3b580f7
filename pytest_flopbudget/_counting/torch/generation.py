"""Counting a generation (`generate = N`): one prefill forward, then N - 1 cached decode steps, each a phase.

A Hugging Face model (one with `generate`) runs its own greedy `generate` on the fake copy, so what is counted is
what `model.generate(ids, max_new_tokens=N)` computes: the forwards and the loop's own ops (picking the token,
growing the mask, the stopping checks) between them. A phase starts where a top-level forward starts, so the ops
after decode step k's forward belong to step k and the phases add up to the whole call. On fake tensors no
end-of-sequence token can be seen: the generation always runs its N tokens.

Any other model follows the decode-step protocol: its forward is the prefill, and decode step k is its `method`
called with what `decode_inputs(model, context)` returns for a cache of `context` = prompt + k - 1 tokens (a
tuple of positional arguments, a dict of keyword arguments, or one value); see docs/generation.md.

N forwards of a large model would be slow, so above `COUNT_ALL` tokens only a few decode steps are counted (the
first three, and the last two from a cache grown to their length) and the others are read off the line the
first two fix (`counting/phases.py`), checked exactly at the third and the last but one. A check that fails
counts every step instead.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from pytest_flopbudget._counting.phases import FIT, CountedPhase, NotLinear, decode_line, generation
from pytest_flopbudget._counting.tally import Tally
from pytest_flopbudget._errors import CountingError
from pytest_flopbudget._report import Phase

#: Up to this many generated tokens every step is counted; above, steps 1-3 and the last two are.
COUNT_ALL = 8
#: The steps after `FIT` that check the line, counted at the start of the generation.
EARLY_CHECK = 3


class PhaseRecorder:
    """Gives each phase its own tally (and its own peak of live bytes) on the counting mode, and keeps them."""

    def __init__(self, mode: Any) -> None:
        self.mode = mode
        self.phases: list[CountedPhase] = []
        self._saved: tuple[int, str, bool] | None = None

    def begin(self) -> None:
        self.mode.tally = Tally()
        live = self.mode.peak
        if live is not None:
            self._saved = (live.peak, live.layer, live.backward)
            live.peak = live.live

    def end(self, keep: bool = True) -> CountedPhase:
        """Close the phase: kept in `phases` (`keep`), or dropped (building a cache is not the model's compute)."""
        live = self.mode.peak
        peak = None if live is None or live.failed else live.peak
        if live is not None and self._saved is not None and self._saved[0] >= live.peak:
            live.peak, live.layer, live.backward = self._saved
        phase = CountedPhase(self.mode.tally, peak)
        if keep:
            self.phases.append(phase)
        self.mode.tally = Tally()
        return phase


class Generation:
    """Counts a generation of `tokens` new tokens on the counted copy, as `count_torch`'s call: it leaves the
    whole generation's tally on the counting mode and its phases in `phases`."""

    def __init__(self, tokens: int, method: str = "forward", decode_inputs: Callable[..., Any] | None = None) -> None:
        if tokens < 1:
            raise CountingError(f"generate = {tokens}: a generation makes at least one token")
        self.tokens = tokens
        self.method = method
        self.decode_inputs = decode_inputs
        self.phases: list[Phase] = []
        #: Which steps were counted (the rest derived); what a benchmark or a test reads.
        self.counted_steps: list[int] = []

    def __call__(self, counted: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], mode: Any) -> Any:
        steps = self.tokens - 1
        derive = steps > COUNT_ALL - 1
        try:
            if derive:
                prefill, phases = self._run(counted, args, kwargs, mode, derive=True)
                checks = (EARLY_CHECK, steps - 1)
                line, peak_line = decode_line(phases, checks)
                total, self.phases = generation(prefill, phases, steps, line, peak_line)
                self.counted_steps = sorted(phases)
                mode.tally = total
                return None
        except NotLinear:
            pass
        prefill, phases = self._run(counted, args, kwargs, mode, derive=False)
        total, self.phases = generation(prefill, phases, steps)
        self.counted_steps = sorted(phases)
        mode.tally = total
        return None

    def _run(
        self, counted: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], mode: Any, derive: bool
    ) -> tuple[CountedPhase, dict[int, CountedPhase]]:
        recorder = PhaseRecorder(mode)
        if self.decode_inputs is None:
            return _hugging_face(counted, args, kwargs, recorder, self.tokens, derive)
        return _protocol(counted, args, kwargs, recorder, self.tokens, self.method, self.decode_inputs, derive)


def is_generator(model: Any) -> bool:
    """A Hugging Face model that generates (`GenerationMixin.generate`)."""
    return callable(getattr(model, "generate", None)) and callable(
        getattr(model, "prepare_inputs_for_generation", None)
    )


def _hugging_face(
    counted: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    recorder: PhaseRecorder,
    tokens: int,
    derive: bool,
) -> tuple[CountedPhase, dict[int, CountedPhase]]:
    if not is_generator(counted):
        raise CountingError(
            f"generate: {type(counted).__name__} has no Hugging Face generate(); give its decode step instead "
            f"(method = the step's method, decode-inputs = a function building its cache: see docs/generation.md)"
        )
    ids = _prompt(args, kwargs)
    opened = [0]

    def next_phase(*_: Any) -> None:
        if opened[0]:
            recorder.end()
            recorder.begin()
        opened[0] += 1

    hook = counted.register_forward_pre_hook(next_phase)
    try:
        first = EARLY_CHECK + 2 if derive else tokens  # derive: the prefill and steps 1-4 (4 ends that run)
        recorder.begin()
        out = _generate(counted)(*args, **_greedy(kwargs, first, derive))
        recorder.end()
        if opened[0] != first:
            raise CountingError(
                f"generate ran {opened[0]} forward(s) for {first} new token(s); cannot split its phases"
            )
        phases = dict(enumerate(recorder.phases))
        prefill = phases.pop(0)
        if not derive:
            return prefill, phases
        early = {step: phases[step] for step in (*FIT, EARLY_CHECK)}
        # the last two steps: a cache grown to prompt + tokens - 4 entries, then generate's own loop over three
        # tokens (the first forward completes its setup and is dropped, the next two are steps tokens-2, tokens-1)
        late = _late_steps(counted, ids, out, recorder, tokens, opened)
        return prefill, {**early, **late}
    finally:
        hook.remove()


def _late_steps(
    counted: torch.nn.Module, ids: Any, out: Any, recorder: PhaseRecorder, tokens: int, opened: list[int]
) -> dict[int, CountedPhase]:
    # transformers 5 names the cache `cache` (`past_key_values` before, deprecated since)
    cache_name = "cache" if "cache" in getattr(out, "keys", lambda: ())() else "past_key_values"
    cache = getattr(out, cache_name, None)
    prompt = ids.shape[-1]
    recorder.begin()
    try:
        _grow(cache, prompt + tokens - 4 - _cache_length(cache))
    except Exception as exc:
        raise NotLinear(f"cannot grow the cache: {exc}") from None
    longer = ids.new_zeros((*ids.shape[:-1], prompt + tokens - 3))
    recorder.end(keep=False)
    recorder.phases.clear()
    opened[0] = 0
    recorder.begin()
    try:
        _generate(counted)(longer, **{cache_name: cache}, **_greedy({}, 3, False))
    except Exception as exc:  # a model whose generate does not resume from a cache: count every step instead
        raise NotLinear(f"generate on a grown cache raised {type(exc).__name__}") from None
    recorder.end()
    if opened[0] != 3 or len(recorder.phases) != 3:
        raise NotLinear("generate on a grown cache did not run three forwards")
    # their compute is that of the real steps; their live bytes lack what the real loop still holds from the
    # steps before (this run never made them): no peak is given rather than a low one
    return {tokens - 2: CountedPhase(recorder.phases[1].tally), tokens - 1: CountedPhase(recorder.phases[2].tally)}


def _generate(model: torch.nn.Module) -> Callable[..., Any]:
    """The copy's `generate`, its warnings quiet: on fake tensors a pad token or the length the config was trained
    to is no news, and the count's own output must stay readable."""
    generate: Callable[..., Any] = getattr(model, "generate")  # noqa: B009 (an nn.Module's attribute types as Tensor)

    def quiet(*args: Any, **kwargs: Any) -> Any:
        logger = logging.getLogger("transformers")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return generate(*args, **kwargs)
        finally:
            logger.setLevel(level)

    return quiet


def _greedy(kwargs: Mapping[str, Any], tokens: int, keep_cache: bool) -> dict[str, Any]:
    return {
        **kwargs,
        "max_new_tokens": tokens,
        "min_new_tokens": None,
        "do_sample": False,
        "num_beams": 1,
        "return_dict_in_generate": keep_cache,
    }


def _prompt(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    ids = args[0] if args else kwargs.get("input_ids")
    if not isinstance(ids, torch.Tensor) or ids.dim() < 1:
        raise CountingError("generate needs the prompt's token ids as the first input, e.g. --input 1,128:int64")
    return ids


def _cache_length(cache: Any) -> int:
    return int(cache.get_seq_length())


def _grow(cache: Any, extra: int) -> None:
    """Append `extra` entries to every layer of a Hugging Face cache through its own `update`."""
    if extra < 0:
        raise ValueError(f"the cache is already longer than needed by {-extra}")
    for index, layer in enumerate(cache.layers):
        keys, values = layer.keys, layer.values
        cache.update(
            keys.new_zeros((*keys.shape[:-2], extra, keys.shape[-1])),
            values.new_zeros((*values.shape[:-2], extra, values.shape[-1])),
            index,
        )


def _protocol(
    counted: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    recorder: PhaseRecorder,
    tokens: int,
    method: str,
    decode_inputs: Callable[..., Any],
    derive: bool,
) -> tuple[CountedPhase, dict[int, CountedPhase]]:
    """The decode-step protocol: forward is the prefill, `method(*decode_inputs(model, context))` a step."""
    prompt = _prompt(args, kwargs).shape[-1]
    recorder.begin()
    counted(*args, **kwargs)
    prefill = recorder.end()
    step_call = getattr(counted, method)
    steps = tokens - 1
    wanted = (*FIT, EARLY_CHECK, steps - 1, steps) if derive else tuple(range(1, steps + 1))
    phases: dict[int, CountedPhase] = {}
    for step in sorted(set(wanted)):
        recorder.begin()
        try:
            built = decode_inputs(counted, prompt + step - 1)
        except Exception as exc:
            raise CountingError(
                f"decode-inputs(model, {prompt + step - 1}) raised {type(exc).__name__}: {exc}"
            ) from None
        recorder.end(keep=False)
        step_args, step_kwargs = _as_call(built)
        recorder.begin()
        step_call(*step_args, **step_kwargs)
        phases[step] = recorder.end(keep=False)
    return prefill, phases


def _as_call(built: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(built, Mapping):
        return (), dict(built)
    if isinstance(built, (tuple, list)):
        return tuple(built), {}
    return (built,), {}
