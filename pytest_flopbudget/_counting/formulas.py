"""Shape math shared by the PyTorch and ONNX backends: what a FLOP and a MAC are, written once.

Every function takes plain integers (shapes and op arguments, never tensors) and returns a `Cost`. The per-element
constants below are the project's counting conventions; the README repeats them. Both backends call these
functions so that a convolution costs the same whether it came from `aten.convolution` or from ONNX `Conv`.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil, floor, prod
from typing import NamedTuple

from pytest_flopbudget._metrics import FLOPS, INT_OPS, MACS, Metric


class Cost(NamedTuple):
    """What one op call costs: floating-point FLOPs and MACs, and `int_ops`, the arithmetic it does on integer
    tensors (quantized matmuls and convolutions: 2 per integer MAC, like FLOPs), which FLOPs and MACs leave out."""

    flops: int
    macs: int
    int_ops: int = 0

    def __repr__(self) -> str:
        """`Cost(flops=6, macs=3)`: integer ops only when there are some, as most costs have none."""
        int_ops = f", int_ops={self.int_ops!r}" if self.int_ops else ""
        return f"Cost(flops={self.flops!r}, macs={self.macs!r}{int_ops})"

    def __eq__(self, other: object) -> bool:
        """A cost without integer ops equals its `(flops, macs)` pair, as it did before costs had a third field."""
        if isinstance(other, tuple) and not isinstance(other, Cost) and len(other) == 2:
            return not self.int_ops and (self.flops, self.macs) == other
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.flops, self.macs)) if not self.int_ops else tuple.__hash__(self)

    def __add__(self, other: object) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(self.flops + other.flops, self.macs + other.macs, self.int_ops + other.int_ops)

    def times(self, n: int) -> Cost:
        return Cost(self.flops * n, self.macs * n, self.int_ops * n)

    def values(self) -> dict[Metric, int]:
        """The figures keyed by metric, as a `Tally` adds them."""
        return {FLOPS: self.flops, MACS: self.macs, INT_OPS: self.int_ops}

    def in_integers(self) -> Cost:
        """The same arithmetic done on integer tensors: every FLOP of it is an integer op, and it has no
        floating-point MACs (`int_ops` already counts them twice)."""
        return Cost(0, 0, self.flops + self.int_ops)


def on_integers(cost: Cost, integer: bool) -> Cost:
    """The rule both backends apply to every priced op: an op that multiply-accumulates (a matmul, a convolution)
    and whose output is an integer tensor does integer arithmetic, so its whole cost is `int_ops`. Elementwise ops
    (no MACs) count FLOPs whatever their dtype, as they always did."""
    return cost.in_integers() if integer and cost.macs else cost


#: A call that costs nothing this time (dropout in inference, nearest interpolation): still recorded as a call.
#: Ops that never cost anything are `registry.FREE` instead, and are not recorded at all.
ZERO = Cost(0, 0)

#: One FLOP per output element for plain elementwise arithmetic, comparisons, activations and transcendental
#: functions (add, mul, exp, relu, gelu, sigmoid, ...). A fused kernel counts the arithmetic it fuses.
ELEMENTWISE = 1
#: softmax / log_softmax per element: max, subtract, exp, sum, divide (log_softmax: log instead of divide).
SOFTMAX = 5
#: Normalisation per element: statistics (mean: add; variance: subtract, square, add) ...
NORM_STATS = 4
#: ... normalising (subtract mean, multiply by inverse std) ...
NORM_APPLY = 2
#: ... and the affine transform, 1 per element for the weight and 1 for the bias.
NORM_AFFINE_EACH = 1
#: RMS norm statistics per element: square and add (no mean subtraction); applying it: 1 multiply.
RMS_STATS = 2
RMS_APPLY = 1
#: Reductions (sum, mean, max, argmax, norm, ...) per *input* element; variance/std per input element.
REDUCTION = 1
VARIANCE = 3
#: Backward of a normalisation, per element: twice its forward per-element cost.
NORM_BACKWARD_FACTOR = 2
#: Softmax backward per element: multiply, sum, subtract, multiply.
SOFTMAX_BACKWARD = 4


def elementwise(numel: int, per_element: int = ELEMENTWISE) -> Cost:
    return Cost(numel * per_element, 0)


def matmul(m: int, n: int, k: int, batch: int = 1) -> Cost:
    """(M x K) @ (K x N): M*N*K MACs, 2*M*N*K FLOPs, `batch` times."""
    macs = batch * m * n * k
    return Cost(2 * macs, macs)


def linear(rows: int, in_features: int, out_features: int, bias: bool) -> Cost:
    """A dense layer on `rows` vectors; the bias add is 1 FLOP per output element (TensorFlow's 7425 case)."""
    cost = matmul(rows, out_features, in_features)
    return cost + elementwise(rows * out_features) if bias else cost


def conv(
    batch: int,
    in_channels: int,
    out_channels: int,
    out_spatial: Sequence[int],
    kernel: Sequence[int],
    groups: int = 1,
    bias: bool = False,
) -> Cost:
    """Each output element is a dot product over (in_channels / groups) * kernel taps."""
    out_elements = batch * out_channels * prod(out_spatial)
    macs = out_elements * (in_channels // groups) * prod(kernel)
    cost = Cost(2 * macs, macs)
    return cost + elementwise(out_elements) if bias else cost


def conv_transpose(
    batch: int,
    in_channels: int,
    out_channels: int,
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    groups: int = 1,
    bias: bool = False,
    out_spatial: Sequence[int] = (),
) -> Cost:
    """Every *input* element is scattered through (out_channels / groups) * kernel taps.

    The cost follows the input's spatial size, not the output's: counters that reuse the forward-conv formula on
    the output shape over-count by stride**dims.
    """
    macs = batch * in_channels * prod(in_spatial) * (out_channels // groups) * prod(kernel)
    cost = Cost(2 * macs, macs)
    if bias:
        cost = cost + elementwise(batch * out_channels * prod(out_spatial))
    return cost


def attention(
    batch_heads: int, q_len: int, kv_len: int, head_dim: int, v_dim: int | None = None, masked: bool = False
) -> Cost:
    """Scaled dot-product attention: QK^T and AV matmuls, the scale, an additive mask, the softmax.

    A causal mask does not reduce the count: the kernels compute (or at least schedule) the dense product, and a
    dense rule keeps the count independent of which kernel ran. The rule is stated in the README.
    """
    v_dim = head_dim if v_dim is None else v_dim
    scores = batch_heads * q_len * kv_len
    cost = matmul(q_len, kv_len, head_dim, batch_heads) + matmul(q_len, v_dim, kv_len, batch_heads)
    per_score = ELEMENTWISE + SOFTMAX + (ELEMENTWISE if masked else 0)  # scale, softmax, mask add
    return cost + elementwise(scores, per_score)


def attention_backward(batch_heads: int, q_len: int, kv_len: int, head_dim: int, v_dim: int | None = None) -> Cost:
    """dV = P^T dO, dP = dO V^T, dS = softmax', dQ = dS K, dK = dS^T Q: four matmuls, plus recomputing S."""
    v_dim = head_dim if v_dim is None else v_dim
    scores = batch_heads * q_len * kv_len
    cost = (
        matmul(q_len, kv_len, head_dim, batch_heads)  # recompute S = QK^T
        + matmul(kv_len, v_dim, q_len, batch_heads)  # dV
        + matmul(q_len, kv_len, v_dim, batch_heads)  # dP
        + matmul(q_len, head_dim, kv_len, batch_heads)  # dQ
        + matmul(kv_len, head_dim, q_len, batch_heads)  # dK
    )
    return cost + elementwise(scores, SOFTMAX_BACKWARD + ELEMENTWISE)


def norm(numel: int, *, stats: bool, weight: bool, bias: bool) -> Cost:
    per = NORM_APPLY + (NORM_STATS if stats else 0)
    per += NORM_AFFINE_EACH * (int(weight) + int(bias))
    return elementwise(numel, per)


def rms_norm(numel: int, *, weight: bool) -> Cost:
    return elementwise(numel, RMS_STATS + RMS_APPLY + (NORM_AFFINE_EACH if weight else 0))


def softmax(numel: int) -> Cost:
    return elementwise(numel, SOFTMAX)


def reduction(input_numel: int, per_element: int = REDUCTION) -> Cost:
    return elementwise(input_numel, per_element)


#: Selection, sorting, searching and histogram ops (topk, sort, median, unique, searchsorted, histc, bincount, ...)
#: compare and count values rather than compute with them. They follow the one rule the comparisons already follow
#: (`lt`, `eq`: 1 per element; max/argmax: 1 per input element; max pooling: 1 per window element): **every
#: comparison is 1 FLOP, and no op of this kind is free or skipped**. Their count depends on shapes only, never on
#: the values or the kernel that runs (a radix sort makes no comparisons; the convention counts those of a
#: comparison sort).


def log2_ceil(n: int) -> int:
    """ceil(log2(n)) for n >= 1: comparisons to tell n outcomes apart (0 for n = 1)."""
    return max(n - 1, 0).bit_length()


def selection(input_numel: int) -> Cost:
    """Picking values by rank (max-like selection: top-k, k-th value, median): one comparison per input element,
    as max/argmax, whatever k is."""
    return elementwise(input_numel)


def comparison_sort(rows: int, length: int) -> Cost:
    """Sorting `rows` independent rows of `length`: length * ceil(log2(length)) comparisons per row (merge sort's
    bound, rounded up; a row of one element is sorted already)."""
    return elementwise(rows * length * log2_ceil(length))


def binary_search(values: int, boundaries: int) -> Cost:
    """Placing each value among `boundaries` sorted boundaries (searchsorted, bucketize): ceil(log2(B + 1))
    comparisons per value, since B boundaries leave B + 1 places."""
    return elementwise(values * log2_ceil(boundaries + 1))


def pool(out_numel: int, window: int) -> Cost:
    """Max and average pooling: one compare or add per window element per output (avg: the divide replaces one add)."""
    return elementwise(out_numel * window)


def adaptive_window_total(in_size: int, out_size: int) -> int:
    """Sum over outputs of the window each covers, for one dimension of an adaptive pool (PyTorch's start/end rule)."""
    total = 0
    for i in range(out_size):
        start = floor(i * in_size / out_size)
        end = ceil((i + 1) * in_size / out_size)
        total += end - start
    return total


def adaptive_pool(outer: int, in_spatial: Sequence[int], out_spatial: Sequence[int]) -> Cost:
    """`outer` is batch * channels; the window sizes of adaptive pools vary per output position."""
    windows = prod(adaptive_window_total(i, o) for i, o in zip(in_spatial, out_spatial))
    return elementwise(outer * windows)


#: Interpolation FLOPs per output element: nearest is a gather (free); linear modes weigh 2**d neighbours
#: (2**d multiplies, 2**d - 1 adds); cubic weighs 4**d neighbours.
def interpolate(out_numel: int, mode: str, spatial_dims: int) -> Cost:
    if mode in ("nearest", "nearest-exact", "nearest_exact"):
        return ZERO
    taps = 4**spatial_dims if mode in ("cubic", "bicubic") else 2**spatial_dims
    return elementwise(out_numel, 2 * taps - 1)


def rnn_cell(batch: int, input_size: int, hidden: int, gates: int, bias: bool) -> Cost:
    """One time step of an RNN/GRU/LSTM cell: `gates` input and recurrent matmuls, then gate arithmetic.

    Gate arithmetic per hidden unit and gate: the bias adds and the activation (3 elementwise), plus for LSTM the
    cell update (4) and GRU the reset/update blend (5); RNN (gates=1) has none beyond its activation.
    """
    cost = matmul(batch, gates * hidden, input_size) + matmul(batch, gates * hidden, hidden)
    per_unit = gates * ((2 if bias else 0) + 1 + 1)  # biases, the input+recurrent add, activation
    per_unit += {1: 0, 3: 5, 4: 4}.get(gates, 0)
    return cost + elementwise(batch * hidden, per_unit)


#: Quantising (divide by the scale, add the zero point) or dequantising (subtract the zero point, multiply by the
#: scale) costs 2 FLOPs per element; rounding and saturation are part of the same instruction and not counted.
QUANTIZE = 2


def scaled_add(elements: int, *, has_addend: bool, alpha: float = 1.0, beta: float = 1.0) -> Cost:
    """`beta*C + alpha*(A@B)` on top of a product: the add, plus a multiply for each scale that is not 1.

    The same rule as `aten.addmm` in the PyTorch backend, so ONNX `Gemm` and `torch.addmm` agree.
    """
    if not has_addend or beta == 0:
        return elementwise(elements * int(alpha != 1))
    return elementwise(elements * (1 + int(beta != 1) + int(alpha != 1)))


def gemm(m: int, n: int, k: int, *, has_addend: bool, alpha: float = 1.0, beta: float = 1.0) -> Cost:
    """(M x K) @ (K x N) plus an optional addend: a dense layer with bias costs 2*M*N*K + M*N."""
    return matmul(m, n, k) + scaled_add(m * n, has_addend=has_addend, alpha=alpha, beta=beta)


def variadic(out_numel: int, operands: int, per_element: int = ELEMENTWISE) -> Cost:
    """Sum/Max/Min of n operands: n - 1 binary operations per output element (a single operand is a copy)."""
    return elementwise(out_numel * max(operands - 1, 0), per_element)


#: Local response normalisation per element, after the window sum: scale by alpha/size, add the bias, raise to
#: beta, divide the input by the result.
LRN_APPLY = 4


def lrn_window_total(channels: int, size: int) -> int:
    """Sum over channels c of the window ONNX LRN sums for c: channels [c - floor((size-1)/2), c + ceil((size-1)/2)]
    clipped to [0, channels - 1] (the spec truncates the window at the borders; nothing is padded)."""
    below, above = (size - 1) // 2, -(-(size - 1) // 2)
    return sum(min(channels - 1, c + above) - max(0, c - below) + 1 for c in range(channels))


def local_response_norm(outer: int, channels: int, size: int) -> Cost:
    """LRN on `outer` = batch * prod(spatial) positions of `channels` channels.

    Per element: 1 to square it (each square is computed once and reused by the windows that contain it), its
    window's elements summed (the pooling rule: window size per output, with the window truncated at the
    channel borders as the ONNX spec defines it), then LRN_APPLY (4) to turn the sum into the output.
    """
    numel = outer * channels
    return elementwise(numel, ELEMENTWISE + LRN_APPLY) + elementwise(outer * lrn_window_total(channels, size))


def cross_entropy(score_numel: int, targets: int) -> Cost:
    """Softmax cross-entropy: log_softmax over the scores (SOFTMAX per score element) plus the NLL step at
    1 FLOP per target, the PyTorch backend's rule for `nll_loss`, so `F.cross_entropy` (log_softmax + nll_loss)
    and ONNX SoftmaxCrossEntropyLoss cost the same. Class weights, ignore_index masking and the reduction are
    part of that 1 per target."""
    return softmax(score_numel) + elementwise(targets)
