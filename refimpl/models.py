"""Small model zoo for tests, benchmarks and the CLI, with no dependency beyond torch.

``resnet18`` builds the same network as ``torchvision.models.resnet18()`` (same modules, same
names, same shapes), so FLOP counts and per-module attribution match torchvision's. refimpl
carries it because torchvision's PyPI wheels are CUDA builds whose C extension does not load
next to a CPU-only torch.
"""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    """conv3x3-bn-relu-conv3x3-bn, plus the (optionally downsampled) identity, then relu."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision's ResNet layout for BasicBlock stacks (resnet18/34)."""

    def __init__(self, layers: tuple[int, ...] = (2, 2, 2, 2), num_classes: int = 1000,
                 width: int = 64) -> None:
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(width, layers[0])
        self.layer2 = self._make_layer(width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8, num_classes)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(num_classes: int = 1000) -> ResNet:
    """torchvision.models.resnet18() with random weights."""
    return ResNet((2, 2, 2, 2), num_classes)


class TransformerBlock(nn.Module):
    """Pre-norm block: x + attn(ln(x)), then x + mlp(ln(x)); attention through SDPA."""

    def __init__(self, dim: int = 64, heads: int = 4, mlp_ratio: int = 4) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim={dim} must be divisible by heads={heads}")
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(),
                                 nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        attn = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


def transformer(blocks: int = 2, dim: int = 64, heads: int = 4) -> nn.Sequential:
    """A stack of ``blocks`` TransformerBlocks."""
    return nn.Sequential(*[TransformerBlock(dim, heads) for _ in range(blocks)])


def mlp(layers: int = 4, dim: int = 64) -> nn.Sequential:
    """``layers`` x (Linear, ReLU)."""
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [nn.Linear(dim, dim), nn.ReLU()]
    return nn.Sequential(*mods)


MODELS = {"resnet18": resnet18, "transformer": transformer, "mlp": mlp}
