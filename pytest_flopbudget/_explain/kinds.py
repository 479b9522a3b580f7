"""What an op is, whoever names it: `aten.convolution`, fvcore's `conv`, thop's `Conv2d` and calflops' `F.conv2d`
are all a convolution.

Each counter names ops in its own vocabulary (ATen overloads, JIT op names, patched `torch.nn.functional`
functions, module classes); the explanation pairs our ops with a peer's within one layer by this kind, so a
difference is told per op even where the names differ.
"""

from __future__ import annotations

import re

#: Stems (lower case, namespace, `F.` and trailing `_` removed) that name the same kind of op.
_KINDS: dict[str, list[str]] = {
    kind: stems.split()
    for kind, stems in {
        "conv": "convolution conv conv1d conv2d conv3d slow_conv2d_forward cudnn_convolution",
        "conv_transpose": "conv_transpose1d conv_transpose2d conv_transpose3d convtranspose1d convtranspose2d "
        "convtranspose3d",
        "matmul": "addmm mm bmm baddbmm matmul linear einsum addbmm scaled_mm __matmul__",
        "attention": "scaled_dot_product_attention scaled_dot_product_flash_attention "
        "scaled_dot_product_flash_attention_for_cpu scaled_dot_product_efficient_attention "
        "scaled_dot_product_cudnn_attention flash_attention_forward efficient_attention_forward "
        "native_multi_head_attention multiheadattention flex_attention",
        "batch_norm": "batch_norm native_batch_norm native_batch_norm_legit_no_training native_batch_norm_legit "
        "batch_norm_no_update batchnorm1d batchnorm2d batchnorm3d syncbatchnorm",
        "layer_norm": "layer_norm native_layer_norm layernorm",
        "group_norm": "group_norm native_group_norm groupnorm",
        "max_pool": "max_pool1d max_pool2d max_pool3d max_pool1d_with_indices max_pool2d_with_indices "
        "max_pool3d_with_indices maxpool1d maxpool2d maxpool3d adaptive_max_pool1d adaptive_max_pool2d "
        "adaptive_max_pool3d adaptivemaxpool1d adaptivemaxpool2d adaptivemaxpool3d",
        # an adaptive average pool to 1x1 runs as a mean
        "avg_pool": "avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d "
        "avgpool1d avgpool2d avgpool3d adaptiveavgpool1d adaptiveavgpool2d adaptiveavgpool3d mean",
        "add": "add __add__ __iadd__ __radd__",
        "mul": "mul __mul__ __imul__ __rmul__",
        "softmax": "softmax safe_softmax log_softmax",
        "embedding": "embedding",
    }.items()
}
_BY_STEM = {stem: kind for kind, stems in _KINDS.items() for stem in stems}

#: Fused attention kernels: one op for the projections, QK^T, softmax and AV (nn.MultiheadAttention's inference
#: fast path), or for QK^T, softmax and AV (scaled-dot-product attention).
FUSED_ATTENTION = frozenset(
    {
        "aten._native_multi_head_attention",
        "aten._scaled_dot_product_flash_attention_for_cpu",
        "aten._scaled_dot_product_flash_attention",
        "aten._scaled_dot_product_efficient_attention",
        "aten._scaled_dot_product_cudnn_attention",
        "aten._flash_attention_forward",
        "aten._efficient_attention_forward",
    }
)


def stem(name: str) -> str:
    """`aten.max_pool2d_with_indices` -> `max_pool2d_with_indices`; `aten::add_` -> `add`; `F.relu` -> `relu`;
    `Conv2d` -> `conv2d`."""
    base = re.split(r"::|\.", name)[-1]
    if not (base.startswith("__") and base.endswith("__")):
        base = base.strip("_")
    return base.lower()


def kind(name: str) -> str:
    """The kind of op `name` is (`conv`, `matmul`, `batch_norm`, ...), or its stem where no kind groups it."""
    base = stem(name)
    return _BY_STEM.get(base, base)


def is_multiply_accumulate(name: str) -> bool:
    """Convolutions, matmuls and attention: the ops whose FLOPs are 2 per multiply-accumulate (plus a bias add or a
    softmax), which counters in MACs count once."""
    return kind(name) in ("conv", "conv_transpose", "matmul", "attention")
