"""The model zoo the graph level is measured on, in plain PyTorch (torchvision has no CPU build here):
the MLC course's MLP, ResNet-18, MobileNetV2, a BERT-base encoder layer and BERT's embeddings.

Weights are random but deterministic (a seeded generator, forked so the caller's random state is
untouched) and realistic in scale: convolutions get Kaiming-normal weights as torchvision initializes
them, linears normal weights of std 1/sqrt(fan_in), and every BatchNorm random scales and shifts and
the running statistics its activations have on random images, so inference-mode BatchNorm neither
blows activations up nor shrinks them through 18 layers, and folding it into convolutions is tested
with statistics that are not 0 and 1. Outputs have a standard deviation between 0.5 and 5. Every model
is returned in eval mode; each `*_inputs` function gives its example inputs (batch 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

SEED = 0


def _seeded_init(model: nn.Module, seed: int) -> None:
    """Kaiming-normal convolutions (fan-out, as torchvision), linears of std 1/sqrt(fan_in), small
    random biases, random norm affines; embeddings normal with std 1."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(
                    module.weight, mode="fan_out", nonlinearity="relu", generator=generator
                )
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=1 / math.sqrt(module.in_features), generator=generator)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, generator=generator)
            elif isinstance(module, (nn.LayerNorm, nn.BatchNorm2d)):
                nn.init.uniform_(module.weight, 0.5, 1.5, generator=generator)
                nn.init.normal_(module.bias, std=0.1, generator=generator)
            if isinstance(module, (nn.Conv2d, nn.Linear)) and module.bias is not None:
                nn.init.normal_(module.bias, std=0.1, generator=generator)


def _calibrate_batch_norm(model: nn.Module, images: torch.Tensor) -> None:
    """Running statistics of the activations `images` produce, as training would leave them (one
    batch, cumulative average: the batch's statistics). The model is left in eval mode."""
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
    model.train()
    with torch.no_grad():
        model(images)
    for norm in norms:
        norm.momentum = 0.1
    model.eval()


def _random(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _build(make: Callable[[], nn.Module], calibration_shape: tuple[int, ...] | None = None) -> nn.Module:
    """`make()` with seeded weights, in eval mode. Its layers' default initialization draws from the
    global generator, which is forked so that the caller's random state is untouched."""
    with torch.random.fork_rng(devices=[]):
        model = make()
    _seeded_init(model, SEED)
    if calibration_shape is not None:
        _calibrate_batch_norm(model, _random(calibration_shape, SEED + 1))
    return model.eval()


def image_inputs(size: int = 224) -> tuple[torch.Tensor]:
    """One normalized RGB image (random), NCHW."""
    return (_random((1, 3, size, size), SEED + 2),)


# --- MLP (the MLC course's) ---


def mlp() -> nn.Module:
    """784 -> 128 -> ReLU -> 10: a flattened 28x28 image to 10 class scores."""
    return _build(lambda: nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)))


def mlp_inputs() -> tuple[torch.Tensor]:
    return (_random((1, 784), SEED + 2),)


# --- ResNet-18 (torchvision's layout and parameter names) ---


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride, bias=False), nn.BatchNorm2d(channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
        for i, (cin, cout, stride) in enumerate(widths, start=1):
            setattr(
                self, f"layer{i}", nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1))
            )
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(num_classes: int = 1000) -> nn.Module:
    return _build(lambda: ResNet18(num_classes), calibration_shape=(4, 3, 64, 64))


# --- MobileNetV2 (width 1.0, torchvision's layout) ---


def _conv_bn_relu6(
    in_channels: int, out_channels: int, kernel: int, stride: int, groups: int = 1
) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU6(inplace=True),
    )


class InvertedResidual(nn.Module):
    """Expand (1x1, ReLU6), depthwise 3x3 (ReLU6), project (1x1, linear); residual when shapes match."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = in_channels * expand_ratio
        self.use_residual = stride == 1 and in_channels == out_channels
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(_conv_bn_relu6(in_channels, hidden, 1, 1))
        layers += [
            _conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_residual else self.conv(x)


# (expansion t, output channels c, repeats n, first stride s), the paper's Table 2.
MOBILENET_V2_SETTINGS = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [_conv_bn_relu6(3, 32, 3, 2)]
        channels = 32
        for t, c, n, s in MOBILENET_V2_SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(channels, c, s if i == 0 else 1, t))
                channels = c
        layers.append(_conv_bn_relu6(channels, 1280, 1, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2(num_classes: int = 1000) -> nn.Module:
    return _build(lambda: MobileNetV2(num_classes), calibration_shape=(4, 3, 64, 64))


# --- BERT-base: one encoder layer and the embeddings ---


class SelfAttention(nn.Module):
    """Multi-head attention written out (Linear, matmul, softmax), as BERT's reference code does:
    nn.MultiheadAttention's fused fast path would export as operators we do not need."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, d_model // heads
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (self._split_heads(proj(x)) for proj in (self.query, self.key, self.value))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        batch, _, seq, _ = context.shape
        return context.transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim)


class EncoderLayer(nn.Module):
    """BERT's post-norm layer: x = LN(x + attn(x)); x = LN(x + FFN(x)), FFN = Linear-GELU-Linear."""

    def __init__(self, d_model: int, heads: int, ffn: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.attention = SelfAttention(d_model, heads)
        self.attention_output = nn.Linear(d_model, d_model)
        self.attention_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.intermediate = nn.Linear(d_model, ffn)
        self.output = nn.Linear(ffn, d_model)
        self.output_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.dropout(self.attention_output(self.attention(x))))
        hidden = F.gelu(self.intermediate(x))
        return self.output_norm(x + self.dropout(self.output(hidden)))


def transformer_encoder_layer(d_model: int = 768, heads: int = 12, ffn: int = 3072) -> nn.Module:
    return _build(lambda: EncoderLayer(d_model, heads, ffn))


def transformer_inputs(seq: int = 128, d_model: int = 768) -> tuple[torch.Tensor]:
    """Hidden states of one sequence, roughly unit scale as LayerNorm leaves them."""
    return (_random((1, seq, d_model), SEED + 2),)


class Embeddings(nn.Module):
    """BERT's embeddings for one segment: word (gathered by the token ids, a model input) + position
    + token type 0, then LayerNorm. Positions are the first `seq` rows of the position table (BERT's
    position ids are 0..seq-1) and token type 0 is row 0, both sliced from the weights."""

    def __init__(self, vocab: int, max_positions: int, d_model: int) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d_model)
        self.position_embeddings = nn.Embedding(max_positions, d_model)
        self.token_type_embeddings = nn.Embedding(2, d_model)
        self.norm = nn.LayerNorm(d_model, eps=1e-12)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        seq = token_ids.shape[1]
        positions = self.position_embeddings.weight[:seq]
        x = self.word_embeddings(token_ids) + positions + self.token_type_embeddings.weight[0]
        return self.norm(x)


def bert_embedding(vocab: int = 30522, max_positions: int = 512, d_model: int = 768) -> nn.Module:
    return _build(lambda: Embeddings(vocab, max_positions, d_model))


def token_inputs(seq: int = 128, vocab: int = 30522) -> tuple[torch.Tensor]:
    """One sequence of random token ids (int64)."""
    return (torch.randint(vocab, (1, seq), generator=torch.Generator().manual_seed(SEED + 2)),)
