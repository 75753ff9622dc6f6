"""bench.layer_peers: the heavy layers of both runtimes come out in execution order with their output
shapes, so that they pair up; everything else is summed apart."""

import torch
from torch import nn

from bench import layer_peers
from bench.model_latency import onnx_bytes
from compiler import frontend, graph


class TwoConvsAndDense(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, 8, 3, padding=1)
        self.second = nn.Conv2d(8, 12, 1, stride=2)
        self.dense = nn.Linear(12 * 5 * 5, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.second(torch.relu(self.first(x))))
        return self.dense(torch.flatten(y, 1))


def test_both_sides_list_the_same_layers_in_the_same_order():
    torch.manual_seed(0)
    model, args = TwoConvsAndDense().eval(), (torch.randn(1, 3, 9, 9),)
    onnx = onnx_bytes(model, args)
    inputs = [a.numpy() for a in args]

    theirs, _ = layer_peers.ort_layers(onnx, inputs, threads=1, runs=3)
    ours, _ = layer_peers.our_layers(graph.build(graph.optimize(frontend.from_torch(model, args))), inputs, 3)

    # ORT runs the convs in its NCHWc layout, channels padded to its block: compare the images
    assert [t.shape[2:4] for t in theirs[:2]] == [(9, 9), (5, 5)] and theirs[2].shape == (1, 10)
    assert len(ours) == 3 and ours[2].shape == (1, 10)
    assert all(layer.ms > 0 for layer in ours + theirs)
