"""Peak memory of the counted call on fake tensors (counting/torch/peak_memory.py): hand-derived small cases, and
agreement within 3% (docs/conventions.md's figure) with torch's own `MemTracker` measuring the same call on real CPU
tensors."""

from __future__ import annotations

from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from pytest_flopbudget._counting.torch.backend import measure_peak  # noqa: E402
from pytest_flopbudget._counting.torch.peak_memory import PeakMemory  # noqa: E402

F32 = 4


def _param_bytes(model: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


# --- hand-derived ------------------------------------------------------------------------------------------------


def test_linear_inference_holds_parameters_input_and_output() -> None:
    tokens, k, n = 8, 16, 32
    peak = measure_peak(nn.Linear(k, n), (torch.randn(tokens, k),))
    assert peak == PeakMemory((n * k + n + tokens * k + tokens * n) * F32, "")


def test_a_chain_frees_its_intermediates() -> None:
    """x -> Linear -> ReLU -> Linear: the first Linear's output dies once ReLU's is made; the peak is at ReLU."""
    tokens, k, n = 8, 16, 32
    model = nn.Sequential(nn.Linear(k, n), nn.ReLU(), nn.Linear(n, k))
    with torch.no_grad():
        peak = measure_peak(model, (torch.randn(tokens, k),))
    params = _param_bytes(model)
    assert peak == PeakMemory(params + tokens * k * F32 + 2 * tokens * n * F32, "1")


def test_a_long_chain_peaks_at_its_widest_step_not_at_the_sum() -> None:
    width = 64
    model = nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(6)])
    with torch.no_grad():
        peak = measure_peak(model, (torch.randn(4, width),))
    # parameters, the input, and two activations alive at once (one layer's input and its output)
    assert peak.bytes == _param_bytes(model) + 3 * 4 * width * F32


def test_views_share_their_base_storage() -> None:
    class Reshape(nn.Module):
        def forward(self, x: Any) -> Any:
            return x.view(-1).view(4, -1).t().unsqueeze(0)

    x = torch.randn(4, 8)
    assert measure_peak(Reshape(), (x,)).bytes == x.numel() * F32


def test_a_tensor_first_seen_by_an_op_counts_from_the_start() -> None:
    """A plain tensor attribute (neither parameter nor buffer) is alive all along: found at its first use, it raises
    the peak reached before it too."""

    class Table(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.zeros(64, 64)

        def forward(self, x: Any) -> Any:
            wide = x.expand(64, 64) * 2
            return (wide.sum() + self.table[0, 0]).reshape(1)

    x = torch.randn(1, 64)
    peak = measure_peak(Table(), (x,))
    # at the last add: the input, `wide`, the table since the start, the sum and the add's output (one float each)
    assert peak.bytes == (64 + 64 * 64 + 64 * 64 + 2) * F32


def test_element_sizes_follow_the_dtype() -> None:
    model = nn.Linear(16, 16, bias=False).to(torch.bfloat16)
    with torch.no_grad():
        peak = measure_peak(model, (torch.randn(2, 16, dtype=torch.bfloat16),))
    assert peak.bytes == (16 * 16 + 2 * 16 + 2 * 16) * 2


def test_training_keeps_saved_activations_and_adds_gradients() -> None:
    tokens, k, n = 8, 16, 32
    model = nn.Sequential(nn.Linear(k, n), nn.ReLU(), nn.Linear(n, k))
    x = torch.randn(tokens, k)
    with torch.no_grad():
        inference = measure_peak(model, (x,))
    training = measure_peak(model, (x,), training=True)
    assert training.backward
    assert training.bytes > inference.bytes + _param_bytes(model) // 2  # gradients and saved activations


def test_real_execution_follows_the_same_storages() -> None:
    model, x = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)), torch.randn(4, 32)
    assert measure_peak(model, (x,), execution="real") == measure_peak(model, (x,))
    assert measure_peak(model, (x,), training=True, execution="real") == measure_peak(model, (x,), training=True)


def test_the_caller_model_and_the_report_are_unchanged() -> None:
    from pytest_flopbudget import count

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
    x = torch.randn(4, 16)
    plain = count(model, x)
    measure_peak(model, (x,))
    assert count(model, x) == plain
    assert all(not isinstance(p, torch._subclasses.fake_tensor.FakeTensor) for p in model.parameters())


# --- the timeline the peak-memory picture draws -------------------------------------------------------------------


def _argmax(values: Any) -> int:
    return max(range(len(values)), key=lambda index: (values[index], -index))


def test_the_timeline_starts_with_what_is_alive_and_tops_at_the_peak() -> None:
    from pytest_flopbudget import count

    tokens, k, n = 8, 16, 32
    model = nn.Sequential(nn.Linear(k, n), nn.ReLU(), nn.Linear(n, k))
    with torch.no_grad():
        report = count(model, torch.randn(tokens, k))
    timeline = report.memory_timeline
    assert timeline is not None and timeline.backward is None
    assert timeline.live[0] == _param_bytes(model) + tokens * k * F32  # before the first op
    assert max(timeline.live) == report.peak_memory == _param_bytes(model) + tokens * k * F32 + 2 * tokens * n * F32
    assert timeline.layer_at(_argmax(timeline.live)) == report.peak_layer == "1"
    assert [path for _, path in timeline.layers] == ["0", "1", "2"]  # each run of ops in one layer, in order
    # after the last op: its output, and its input (ReLU's output), released only once the op has returned
    assert timeline.live[-1] == _param_bytes(model) + tokens * k * F32 + tokens * k * F32 + tokens * n * F32


def test_a_storage_found_late_raises_every_earlier_sample() -> None:
    """The Table model's plain tensor attribute is first seen by the last ops, but alive from the start: the
    timeline, like the peak, counts it from sample 0."""
    from pytest_flopbudget import count

    class Table(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.zeros(64, 64)

        def forward(self, x: Any) -> Any:
            wide = x.expand(64, 64) * 2
            return (wide.sum() + self.table[0, 0]).reshape(1)

    report = count(Table(), torch.randn(1, 64))
    timeline = report.memory_timeline
    assert timeline is not None
    assert timeline.live[0] == (64 + 64 * 64) * F32  # the input and the table
    assert max(timeline.live) == report.peak_memory == (64 + 64 * 64 + 64 * 64 + 2) * F32


def test_a_training_timeline_marks_its_backward() -> None:
    from pytest_flopbudget import count

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
    report = count(model, torch.randn(8, 16), training=True)
    timeline = report.memory_timeline
    assert timeline is not None and timeline.backward is not None and 0 < timeline.backward < len(timeline.live)
    assert max(timeline.live) == report.peak_memory
    assert timeline.layer_at(_argmax(timeline.live)) == report.peak_layer


def test_the_timeline_stays_out_of_json_and_comparisons() -> None:
    from pytest_flopbudget import count
    from pytest_flopbudget._report import Report

    with torch.no_grad():
        report = count(nn.Linear(4, 4), torch.randn(2, 4))
    read_back = Report.from_dict(report.to_dict())
    assert read_back.memory_timeline is None and report.memory_timeline is not None
    assert read_back == report


# --- against MemTracker on real CPU runs -------------------------------------------------------------------------


def _mem_tracker_peak(model: nn.Module, x: Any, training: bool) -> int:
    """What torch's MemTracker measures for the same call on real CPU tensors (one step: forward, sum, backward).

    The count runs nn.MultiheadAttention's and nn.TransformerEncoderLayer's composite path, never their fused
    inference kernel (the fast path refuses to run under a dispatch mode, real or fake), so MemTracker's run is made
    to take the same path: the two measure the same ops."""
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = MemTracker()
    tracker.track_external(model, x)
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with tracker:
            if training:
                model(x).sum().backward()
            else:
                with torch.no_grad():
                    model(x)
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)
    model.zero_grad(set_to_none=True)
    snapshot = tracker.get_tracker_snapshot("peak")
    return int(snapshot[torch.device("cpu")]["Total"])


def _mlp() -> tuple[nn.Module, Any]:
    return nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10)), (
        torch.randn(32, 128)
    )


def _convnet() -> tuple[nn.Module, Any]:
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )
    return model, torch.randn(4, 3, 32, 32)


def _transformer_block() -> tuple[nn.Module, Any]:
    model = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=256, dropout=0.0, batch_first=True)
    return model, torch.randn(2, 32, 64)


def _gpt() -> tuple[nn.Module, Any]:
    from examples.decoder import gpt_inputs
    from examples.factories import gpt_tiny

    model = gpt_tiny()
    return model, gpt_inputs(model.config, seq=32)[0]


def _llama() -> tuple[nn.Module, Any]:
    from examples.decoder import llama_inputs
    from examples.factories import llama_tiny

    model = llama_tiny()
    return model, llama_inputs(model.config, seq=32)[0]


def _resnet18() -> tuple[nn.Module, Any]:
    from examples.resnet import resnet18

    return resnet18(), torch.randn(2, 3, 32, 32)  # batch 2: training batch norm needs two values per channel


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize(
    "build",
    [_mlp, _convnet, _transformer_block, _gpt, _llama, _resnet18],
    ids=["mlp", "convnet", "transformer", "example-gpt", "example-llama", "example-resnet18"],
)
def test_peak_is_within_three_percent_of_mem_tracker(
    build: Callable[[], tuple[nn.Module, Any]], training: bool
) -> None:
    torch.manual_seed(0)
    model, x = build()
    if training:
        model.train()
        peak = measure_peak(model, (x,), training=True)
    else:
        model.eval()
        with torch.no_grad():
            peak = measure_peak(model, (x,))
    expected = _mem_tracker_peak(model, x, training)
    assert abs(peak.bytes - expected) <= 0.03 * expected, (peak, expected)
    if training:  # the same step to the byte: the output is let go of before the backward, as in `_mem_tracker_peak`
        assert peak.bytes == expected


def _t5(seq: int) -> tuple[nn.Module, dict[str, Any]]:
    """A T5 encoder-decoder from a small config (random weights): relative position buckets computed from integer
    positions whose values the fake count knows, a (seq x seq) bias per attention."""
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(
        vocab_size=64,
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        dropout_rate=0.0,
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    model = transformers.T5Model(config)
    ids = torch.randint(1, 64, (1, seq))
    return model, {"input_ids": ids, "decoder_input_ids": ids.flip(1), "use_cache": False}


@pytest.mark.parametrize("seq", [64, 256])
def test_t5_peak_is_the_real_runs_and_mem_trackers(seq: int) -> None:
    """The integer positions T5 turns into relative position buckets are values the fake count knows; keeping each
    known tensor alive until the count's end made the fake peak 3x-4x the real run's (growing with seq squared)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    model, inputs = _t5(seq)
    model.eval()
    with torch.no_grad():
        fake = measure_peak(model, (), inputs)
        real = measure_peak(model, (), inputs, execution="real")
        tracker = MemTracker()
        tracker.track_external(model, inputs["input_ids"], inputs["decoder_input_ids"])
        with tracker:
            model(**inputs)
    expected = int(tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"])
    assert fake == real
    assert abs(fake.bytes - expected) <= 0.03 * expected, (fake, expected)


def test_a_training_step_with_labels_peaks_as_the_loop_that_backpropagates_its_loss() -> None:
    """A Hugging Face model given `labels` returns its loss: the count's step backpropagates that loss, with the
    output (the logits) let go of before the backward, as the loop MemTracker measures here (and the Trainer's
    `compute_loss` then `backward`). Summing the outputs and keeping them through the backward was 9% over."""
    from torch.distributed._tools.mem_tracker import MemTracker

    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="eager",  # fake and real take one path (SDPA's mask differs under fake tensors)
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).train()
    ids = torch.randint(0, 256, (2, 64))
    inputs = {"input_ids": ids, "labels": ids, "use_cache": False}
    fake = measure_peak(model, (), inputs, training=True)
    assert fake == measure_peak(model, (), inputs, training=True, execution="real")
    tracker = MemTracker()
    tracker.track_external(model, ids)
    with tracker:
        model(**inputs).loss.backward()
    model.zero_grad(set_to_none=True)
    expected = int(tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"])
    assert abs(fake.bytes - expected) <= 0.001 * expected, (fake, expected)


def test_a_transformers_sdpa_model_takes_the_real_runs_mask_path() -> None:
    """transformers skips building a (seq x seq) causal mask for SDPA only where it may read the inputs' values, and
    takes any fake tensor for a traced one whose values cannot be read: the fake count built the mask the real run
    never makes (a Llama at sequence 256: 7.6% over in inference, 27% in training). The count knows those values
    (the token ids, the positions made from them), so transformers reads them as in the real run."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    assert model.config._attn_implementation == "sdpa"
    ids = torch.randint(0, 256, (1, 256))
    inputs = {"input_ids": ids, "labels": ids, "use_cache": False}
    model.eval()
    with torch.no_grad():
        assert measure_peak(model, (), inputs) == measure_peak(model, (), inputs, execution="real")
    model.train()
    assert measure_peak(model, (), inputs, training=True) == measure_peak(
        model, (), inputs, training=True, execution="real"
    )


class _Alarm(BaseException):
    """What the test's SIGALRM handler raises: like KeyboardInterrupt, no `except Exception` may swallow it."""


def test_a_signal_during_a_count_always_ends_it() -> None:
    """A signal's exception raised while a weak-reference callback runs (the peak tracker's, torch's fake-tensor
    tables') was printed and ignored ("Exception ignored in ..."), so a Ctrl-C or a timeout was lost about one time
    in four and the count ran on. Every alarm that fires during a count must end it."""
    import random
    import signal

    from pytest_flopbudget import count

    class Churn(nn.Module):  # thousands of small storages born and freed: many callbacks to land in
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(800):
                x = (x * 2 + 1).relu() - x.sigmoid()
            return x

    fired = []

    def alarm(signum: int, frame: Any) -> None:
        fired.append(signum)
        raise _Alarm

    count(Churn(), torch.zeros(4, 8))  # imports done first: an alarm inside an import would break the module
    previous = signal.signal(signal.SIGALRM, alarm)
    rng = random.Random(0)
    lost = ended = 0
    try:
        for _ in range(24):
            fired.clear()
            signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.01, 0.1))
            try:
                count(Churn(), torch.zeros(4, 8))
                lost += bool(fired)  # the handler raised, and the count went on to its end
            except _Alarm:
                ended += 1
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert lost == 0, f"{lost} of {lost + ended} alarms during a count did not end it"
    assert ended >= 12  # the alarms did fire during the counts
