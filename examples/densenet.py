"""DenseNet-121 written from scratch, layer-for-layer compatible with torchvision.

Module names (`features.denseblock3.denselayer24.conv2`, `features.transition2.conv`, `classifier`), the
concatenating dense blocks and the parameter count (7,978,856) match torchvision's `densenet121`, so its published
figure (2.83 GMACs at 224x224, quoted as "GFLOPS") can be checked directly. DenseNet is the benchmark's second
cold-count case because its many concatenations make many small ops per layer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["DenseNet", "densenet121", "densenet_inputs"]


class _DenseLayer(nn.Module):
    """BN-ReLU-1x1 conv (to `bn_size * growth_rate` channels), then BN-ReLU-3x3 conv (to `growth_rate`).

    It takes the list of every earlier feature map of its block and concatenates them first, as torchvision does.
    """

    def __init__(self, num_input_features: int, growth_rate: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1, stride=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False)

    def forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        concatenated = torch.cat(inputs, 1)
        bottleneck = self.conv1(self.relu1(self.norm1(concatenated)))
        return self.conv2(self.relu2(self.norm2(bottleneck)))


class _DenseBlock(nn.ModuleDict):
    """`num_layers` dense layers, each adding `growth_rate` channels to the running concatenation."""

    def __init__(self, num_layers: int, num_input_features: int, bn_size: int, growth_rate: int) -> None:
        super().__init__()
        for i in range(num_layers):
            layer = _DenseLayer(num_input_features + i * growth_rate, growth_rate, bn_size)
            self.add_module(f"denselayer{i + 1}", layer)

    def forward(self, init_features: torch.Tensor) -> torch.Tensor:
        features = [init_features]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    """BN-ReLU-1x1 conv that halves the channels, then a 2x2 average pool that halves the resolution."""

    def __init__(self, num_input_features: int, num_output_features: int) -> None:
        super().__init__()
        self.add_module("norm", nn.BatchNorm2d(num_input_features))
        self.add_module("relu", nn.ReLU(inplace=True))
        self.add_module("conv", nn.Conv2d(num_input_features, num_output_features, kernel_size=1, bias=False))
        self.add_module("pool", nn.AvgPool2d(kernel_size=2, stride=2))


class DenseNet(nn.Module):
    """Stem (7x7/2 conv, BN, ReLU, 3x3/2 max-pool), dense blocks joined by transitions, final BN, linear head."""

    def __init__(
        self,
        growth_rate: int = 32,
        block_config: Sequence[int] = (6, 12, 24, 16),
        num_init_features: int = 64,
        bn_size: int = 4,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict(
                [
                    ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3, bias=False)),
                    ("norm0", nn.BatchNorm2d(num_init_features)),
                    ("relu0", nn.ReLU(inplace=True)),
                    ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
                ]
            )
        )
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            block = _DenseBlock(num_layers, num_features, bn_size, growth_rate)
            self.features.add_module(f"denseblock{i + 1}", block)
            num_features += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", _Transition(num_features, num_features // 2))
                num_features //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        """torchvision's initialisation: He-normal convs, unit BatchNorm, zero linear bias."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight)
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.features(x), inplace=True)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        return self.classifier(torch.flatten(out, 1))


def densenet121(num_classes: int = 1000) -> DenseNet:
    """DenseNet-121: 7,978,856 parameters with the default 1000-class head."""
    return DenseNet(32, (6, 12, 24, 16), 64, num_classes=num_classes)


def densenet_inputs() -> tuple[torch.Tensor]:
    """One ImageNet-sized image, the resolution the published figure is quoted at."""
    return (torch.randn(1, 3, 224, 224),)
