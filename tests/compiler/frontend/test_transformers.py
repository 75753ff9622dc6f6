"""Hugging Face `transformers` models as their users have them: built from small config classes (random
weights, nothing downloaded), called with int64 token ids and an int64 attention mask with padding,
through both frontends in their default form (torch.export; the ONNX exporters, TorchScript-based and
dynamo-based) — no rewriting of attention, masks or position ids. Each compiled model is compared
with PyTorch eager on two different inputs, so a mask or position id folded at import by mistake
shows as a wrong second answer."""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
import torch
import transformers

from compiler import graph
from compiler.frontend import from_onnx, from_torch
from compiler.script import from_source

# Third-party models: minutes of building on a 2-core host, run by `make test-slow` (not `make test`).
pytestmark = pytest.mark.slow

SEQUENCE = 7
VOCAB = 100
TOLERANCE = 1e-3


@dataclass(frozen=True)
class Case:
    """A model, the names of its inputs, and a maker of inputs (seeded, so two calls differ)."""

    make: Callable[[], torch.nn.Module]
    names: tuple[str, ...]
    inputs: Callable[[int], tuple[torch.Tensor, ...]]


def tokens(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and a mask whose padding (zeros at the end) depends on the seed."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (1, SEQUENCE), generator=generator)
    mask = torch.ones(1, SEQUENCE, dtype=torch.int64)
    mask[0, SEQUENCE - 1 - seed % 3 :] = 0
    return ids, mask


def pixels(size: int) -> Callable[[int], tuple[torch.Tensor, ...]]:
    return lambda seed: (torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(seed)),)


BERT = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
}
GPT2 = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64)


class Outputs(torch.nn.Module):
    """The model called with keyword inputs, returning its output's tensors in order: what a user
    exports (an HF model returns a ModelOutput, and GPT-2's positional order puts the cache second)."""

    def __init__(self, model: torch.nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(**dict(zip(self.names, args)))
        return tuple(v for v in out.values() if isinstance(v, torch.Tensor))


class DecodeStep(torch.nn.Module):
    """GPT-2 with past key values: one new token, and each layer's keys and values so far in; the
    logits and the grown cache out."""

    def __init__(self) -> None:
        super().__init__()
        self.model = transformers.GPT2LMHeadModel(GPT2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cache = transformers.DynamicCache(config=GPT2)
        for layer in range(GPT2.n_layer):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = self.model(input_ids=ids, attention_mask=mask, cache=cache, use_cache=True)
        grown = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
        return (out.logits, *grown)


def decode_inputs(seed: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    past = 5
    ids = torch.randint(0, VOCAB, (1, 1), generator=generator)
    mask = torch.ones(1, past + 1, dtype=torch.int64)
    heads, size = GPT2.n_head, GPT2.n_embd // GPT2.n_head
    cache = [torch.randn(1, heads, past, size, generator=generator) for _ in range(2 * GPT2.n_layer)]
    return (ids, mask, *cache)


def mobilevit() -> torch.nn.Module:
    """Its default initialization leaves this small config's outputs at exactly zero (a zeroed layer
    before an activation): weights drawn again so that the comparison compares something."""
    config = transformers.MobileViTConfig(
        image_size=64, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 16, 24, 24, 32, 40, 80]
    )
    model = transformers.MobileViTModel(config)
    torch.manual_seed(0)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return model


TEXT = ("input_ids", "attention_mask")
CASES: dict[str, Case] = {
    "bert": Case(lambda: transformers.BertModel(transformers.BertConfig(**BERT)), TEXT, tokens),
    "bert_classifier": Case(
        lambda: transformers.BertForSequenceClassification(transformers.BertConfig(**BERT)), TEXT, tokens
    ),
    "distilbert": Case(
        lambda: transformers.DistilBertModel(
            transformers.DistilBertConfig(
                vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64
            )
        ),
        TEXT,
        tokens,
    ),
    "roberta": Case(lambda: transformers.RobertaModel(transformers.RobertaConfig(**BERT)), TEXT, tokens),
    "gpt2": Case(lambda: transformers.GPT2Model(GPT2), TEXT, tokens),
    "gpt2_lm_head": Case(lambda: transformers.GPT2LMHeadModel(GPT2), TEXT, tokens),
    "t5_encoder": Case(
        lambda: transformers.T5EncoderModel(
            transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
        ),
        TEXT,
        tokens,
    ),
    "vit": Case(
        lambda: transformers.ViTModel(
            transformers.ViTConfig(
                image_size=32,
                patch_size=8,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=64,
            )
        ),
        ("pixel_values",),
        pixels(32),
    ),
    "mobilevit": Case(mobilevit, ("pixel_values",), pixels(64)),
}


def model_of(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "gpt2_past_key_values":
        return DecodeStep().eval()
    case = CASES[name]
    return Outputs(case.make().eval(), case.names).eval()


def inputs_of(name: str, seed: int) -> tuple[torch.Tensor, ...]:
    return decode_inputs(seed) if name == "gpt2_past_key_values" else CASES[name].inputs(seed)


def export_onnx(
    model: torch.nn.Module, args: tuple[torch.Tensor, ...], dynamo: bool, opset: int | None = None
) -> onnx.ModelProto:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporters' deprecation and tracer warnings
        if dynamo:
            return torch.onnx.export(model, args, dynamo=True, verbose=False, opset_version=opset).model_proto
        f = io.BytesIO()
        torch.onnx.export(model, args, f, dynamo=False, opset_version=17)
        return onnx.load_model_from_string(f.getvalue())


def assert_matches_pytorch(module: graph.Module, model: torch.nn.Module, name: str) -> None:
    compiled = graph.build(module)
    for func in compiled.module.funcs.values():  # every fused kernel's TVMScript reads back as itself
        assert from_source(func.script()) == func
    for seed in (1, 2):
        args = inputs_of(name, seed)
        with torch.no_grad():
            want = model(*args)
        got = compiled(*[a.numpy() for a in args])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=TOLERANCE, atol=TOLERANCE)


NAMES = [*CASES, "gpt2_past_key_values"]


@pytest.mark.parametrize("name", NAMES)
def test_from_torch(name: str) -> None:
    model = model_of(name)
    assert_matches_pytorch(from_torch(model, inputs_of(name, 0)), model, name)


@pytest.mark.parametrize("name", NAMES)
def test_from_onnx_torchscript_exporter(name: str) -> None:
    model = model_of(name)
    proto = export_onnx(model, inputs_of(name, 0), dynamo=False)
    assert_matches_pytorch(from_onnx(proto), model, name)


# The dynamo exporter of torch 2.13 fails on T5's encoder itself ("Failed to decompose the FX graph").
@pytest.mark.parametrize("name", [n for n in NAMES if n != "t5_encoder"])
def test_from_onnx_dynamo_exporter(name: str) -> None:
    model = model_of(name)
    proto = export_onnx(model, inputs_of(name, 0), dynamo=True)
    assert_matches_pytorch(from_onnx(proto), model, name)


@pytest.mark.parametrize("name", ["bert", "gpt2", "vit"])
def test_from_onnx_dynamo_exporter_at_opset_23(name: str) -> None:
    """From opset 23 the exporter writes each scaled_dot_product_attention as one Attention node,
    which imports as ONNX's own function body for it."""
    model = model_of(name)
    proto = export_onnx(model, inputs_of(name, 0), dynamo=True, opset=23)
    assert "Attention" in {n.op_type for n in proto.graph.node}
    assert_matches_pytorch(from_onnx(proto), model, name)


def test_token_ids_are_inputs_not_constants() -> None:
    """What the user passes at run time stays a run-time input of the module, in int64."""
    model = model_of("bert")
    module = from_torch(model, inputs_of("bert", 0))
    assert [(i.type.dtype, i.type.shape) for i in module.inputs] == [("int64", (1, SEQUENCE))] * 2


def text_at(length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and a padded mask of any length (`tokens` makes SEQUENCE only)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (1, length), generator=generator)
    mask = torch.ones(1, length, dtype=torch.int64)
    mask[0, length - length // 3 :] = 0
    return ids, mask


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_a_sequence_length_range_through_both_frontends(name: str) -> None:
    """Imported once with the sequence length open (1..64), run at both ends and between: as eager."""
    model = model_of(name)
    length = torch.export.Dim("sequence", min=1, max=64)
    families = [from_torch(model, text_at(SEQUENCE, 0), dynamic_shapes=(({1: length}, {1: length}),))]
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation and tracer warnings
        axes = {n: {1: "sequence"} for n in TEXT}
        torch.onnx.export(
            model,
            text_at(SEQUENCE, 0),
            buffer,
            dynamo=False,
            opset_version=17,
            input_names=list(TEXT),
            dynamic_axes=axes,
        )
    families.append(from_onnx(buffer.getvalue(), dims={"sequence": (1, 64)}))
    for family in families:
        assert isinstance(family, graph.ShapeFamily) and [str(d) for d in family.dims] == [
            "sequence in [1, 64]"
        ]
        compiled = graph.build(family)
        for n in (1, 64, 23):
            args = text_at(n, seed=n)
            with torch.no_grad():
                want = model(*args)
            got = compiled(*[a.numpy() for a in args])
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w.numpy(), rtol=TOLERANCE, atol=TOLERANCE)
