"""The layer shapes `make bench-peers` tunes with our tuner and with TVM MetaSchedule: real layers of
real models (and a few odd extents), each a workload spec named after where it comes from.

Plain data, so both sides read the same list: our tuner takes a spec as it is, and bench/tvm_peer.py
writes the same computation in TVM's tensor expressions. matmul is A[M, K] @ B[K, N]; a dense layer
(x @ W.T in PyTorch) is the matmul with its weight stored K x N.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PeerShape:
    name: str
    source: str  # where the layer comes from, for the report
    spec: dict[str, Any]


def _conv(C: int, HW: int, K: int, RS: int, stride: int = 1, padding: int = 0) -> dict[str, Any]:
    params = {
        "N": 1,
        "C": C,
        "H": HW,
        "W": HW,
        "K": K,
        "R": RS,
        "S": RS,
        "stride": stride,
        "padding": padding,
    }
    return {"op": "conv2d_nchw", "params": params}


def _conv_kblock(C: int, HW: int, K: int, RS: int, padding: int = 0) -> dict[str, Any]:
    """A conv as the model graph runs it on images of 28x28 and less: output channels in blocks of 16
    (compiler/graph/passes/block_conv_channels.py); TVM tunes the same blocked computation."""
    spec = _conv(C, HW, K, RS, 1, padding)
    return {"op": "conv2d_nchw_kblock", "params": {**spec["params"], "kb": 16}}


def _depthwise(C: int, HW: int, stride: int = 1) -> dict[str, Any]:
    params = {"N": 1, "C": C, "H": HW, "W": HW, "R": 3, "S": 3, "stride": stride, "padding": 1}
    return {"op": "depthwise_conv2d_nchw", "params": params}


def _matmul(M: int, N: int, K: int) -> dict[str, Any]:
    return {"op": "matmul", "params": {"M": M, "N": N, "K": K}}


def _batch_matmul(B: int, M: int, N: int, K: int) -> dict[str, Any]:
    return {"op": "batch_matmul", "params": {"B": B, "M": M, "N": N, "K": K}}


SUITE: tuple[PeerShape, ...] = (
    PeerShape(
        "resnet.stem",
        "ResNet-18/50 stem: 7x7 stride 2, 3 -> 64 channels at 224x224",
        _conv(3, 224, 64, 7, 2, 3),
    ),
    PeerShape("resnet18.conv2_x", "ResNet-18 conv2_x: 3x3, 64 channels at 56x56", _conv(64, 56, 64, 3, 1, 1)),
    PeerShape(
        "resnet18.conv3_x", "ResNet-18 conv3_x: 3x3, 128 channels at 28x28", _conv(128, 28, 128, 3, 1, 1)
    ),
    PeerShape(
        "resnet18.conv4_x", "ResNet-18 conv4_x: 3x3, 256 channels at 14x14", _conv(256, 14, 256, 3, 1, 1)
    ),
    PeerShape("resnet18.conv5_x", "ResNet-18 conv5_x: 3x3, 512 channels at 7x7", _conv(512, 7, 512, 3, 1, 1)),
    PeerShape(
        "resnet18.conv3_x_down",
        "ResNet-18 conv3_x entry: 3x3 stride 2, 64 -> 128 channels from 56x56",
        _conv(64, 56, 128, 3, 2, 1),
    ),
    PeerShape(
        "resnet50.conv2_x_reduce",
        "ResNet-50 conv2_x bottleneck: reduce 1x1, 256 -> 64 at 56x56",
        _conv(256, 56, 64, 1),
    ),
    PeerShape(
        "resnet50.conv4_x_expand",
        "ResNet-50 conv4_x bottleneck: expand 1x1, 256 -> 1024 at 14x14",
        _conv(256, 14, 1024, 1),
    ),
    PeerShape(
        "resnet50.conv5_x_reduce",
        "ResNet-50 conv5_x bottleneck: reduce 1x1, 2048 -> 512 at 7x7",
        _conv(2048, 7, 512, 1),
    ),
    PeerShape(
        "resnet18.conv4_x.kblock",
        "ResNet-18 conv4_x as our model graph runs it: output channels in blocks of 16",
        _conv_kblock(256, 14, 256, 3, 1),
    ),
    PeerShape(
        "resnet18.conv5_x.kblock",
        "ResNet-18 conv5_x as our model graph runs it: output channels in blocks of 16",
        _conv_kblock(512, 7, 512, 3, 1),
    ),
    PeerShape(
        "resnet50.conv5_x_reduce.kblock",
        "ResNet-50 conv5_x reduce 1x1 as our model graph runs it: output channels in blocks of 16",
        _conv_kblock(2048, 7, 512, 1),
    ),
    PeerShape(
        "mobilenetv2.expand",
        "MobileNetV2, second 24-channel block: expansion 1x1, 24 -> 144 at 56x56",
        _conv(24, 56, 144, 1),
    ),
    PeerShape(
        "mobilenetv2.project",
        "MobileNetV2, a 160-channel block: projection 1x1, 960 -> 160 at 7x7",
        _conv(960, 7, 160, 1),
    ),
    PeerShape(
        "mobilenetv2.dw56",
        "MobileNetV2, second 24-channel block: depthwise 3x3, 144 channels at 56x56",
        _depthwise(144, 56),
    ),
    PeerShape(
        "mobilenetv2.dw112_s2",
        "MobileNetV2, first 24-channel block: depthwise 3x3 stride 2, 96 channels at 112x112",
        _depthwise(96, 112, 2),
    ),
    PeerShape(
        "mobilenetv2.dw7",
        "MobileNetV2, a 160-channel block: depthwise 3x3, 960 channels at 7x7",
        _depthwise(960, 7),
    ),
    PeerShape(
        "bert.proj",
        "BERT-base, sequence 128: a Q/K/V or output projection, 768 -> 768",
        _matmul(128, 768, 768),
    ),
    PeerShape("bert.ffn_up", "BERT-base, sequence 128: feed-forward 768 -> 3072", _matmul(128, 3072, 768)),
    PeerShape("bert.ffn_down", "BERT-base, sequence 128: feed-forward 3072 -> 768", _matmul(128, 768, 3072)),
    PeerShape(
        "bert.scores",
        "BERT-base attention scores Q @ K^T: 12 heads, 128 x 128, head size 64",
        _batch_matmul(12, 128, 128, 64),
    ),
    PeerShape(
        "bert.context",
        "BERT-base attention context P @ V: 12 heads, 128 x 64 over 128",
        _batch_matmul(12, 128, 64, 128),
    ),
    PeerShape("resnet.fc", "ResNet-18 classifier, batch 1: dense 512 -> 1000", _matmul(1, 1000, 512)),
    PeerShape("mlp.fc1", "MNIST MLP first layer, batch 1: dense 784 -> 128", _matmul(1, 128, 784)),
    PeerShape("odd.384x1000x257", "odd extents: M 384, N 1000, K 257 (a prime)", _matmul(384, 1000, 257)),
    PeerShape("odd.primes", "prime extents: M 97, N 113, K 127", _matmul(97, 113, 127)),
    PeerShape(
        "square.512",
        "square matmul 512^3, the headline shape (issue 12's AVX2 target: >= 0.9x numpy)",
        _matmul(512, 512, 512),
    ),
)

SHAPES = {shape.name: shape for shape in SUITE}
