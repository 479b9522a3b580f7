"""ResNet-18 / ResNet-50 written from scratch, layer-for-layer compatible with torchvision.

The plugin's tests report FLOPs per module path (e.g. ``layer4.2.conv2``), so the attribute
names, block layout and parameter counts here deliberately match torchvision's ResNet; that
lets published per-layer numbers be compared directly without depending on torchvision.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet50", "resnet_inputs"]


def conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """3x3 conv without bias: every conv is followed by BatchNorm, whose shift makes a bias redundant."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 conv without bias, used for channel projection in bottlenecks and shortcuts."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convs plus identity shortcut (ResNet-18/34 block).

    ``expansion`` tells ``ResNet`` how many output channels the block produces per "plane".
    """

    expansion: int = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)

        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))

        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 -> 1x1 expand block (ResNet-50/101/152).

    The stride sits on the 3x3 conv ("ResNet v1.5", as in torchvision) rather than the first
    1x1 conv; this changes FLOPs, so it matters for matching reference numbers.
    """

    expansion: int = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        width = planes
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width, stride)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)

        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))

        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """Stem (7x7/2 conv + 3x3/2 max-pool), four residual stages, global average pool, linear head."""

    def __init__(self, block: type[BasicBlock | Bottleneck], layers: Sequence[int], num_classes: int = 1000) -> None:
        super().__init__()
        if len(layers) != 4:
            raise ValueError(f"ResNet needs 4 stage depths, got {list(layers)}")
        self.inplanes = 64

        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)

        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        self._init_weights()

    def _make_layer(
        self, block: type[BasicBlock | Bottleneck], planes: int, blocks: int, stride: int = 1
    ) -> nn.Sequential:
        """Build one stage; only its first block changes resolution/width, so only it needs a projection."""
        out_planes = planes * block.expansion
        downsample: nn.Module | None = None
        if stride != 1 or self.inplanes != out_planes:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, out_planes, stride),
                nn.BatchNorm2d(out_planes),
            )

        stage = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = out_planes
        stage.extend(block(self.inplanes, planes) for _ in range(1, blocks))
        return nn.Sequential(*stage)

    def _init_weights(self) -> None:
        """He init for convs and unit BatchNorm, so a freshly built model produces sane activations."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))

        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)

        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def resnet18(num_classes: int = 1000) -> ResNet:
    """ResNet-18: 11,689,512 parameters with the default 1000-class head."""
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes=num_classes)


def resnet50(num_classes: int = 1000) -> ResNet:
    """ResNet-50 (v1.5): 25,557,032 parameters with the default 1000-class head."""
    return ResNet(Bottleneck, [3, 4, 6, 3], num_classes=num_classes)


def resnet_inputs() -> tuple[torch.Tensor]:
    """One ImageNet-sized image, the resolution reference FLOP numbers are quoted at."""
    return (torch.randn(1, 3, 224, 224),)
