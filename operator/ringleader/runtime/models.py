"""The models a rank trains, built deterministically from the spec: built-ins in plain torch, or the user's factory.

`worker.py` calls `build(spec.model, spec.data.synthetic, shape)`, where `shape` is what real data
(`datasets.py`) looks like, or asks `input_spec(...)` what batches synthetic data (`data.py`) must make. Built-ins are
CIFAR-sized (3x3 stems, no ImageNet downsampling) and adapt to `imageSize` through adaptive pooling, so tests can run
them on 8x8 images.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ringleader.api import spec

IMAGE = "image"
TOKENS = "tokens"


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What one sample looks like, so data.py can synthesize batches the model accepts."""

    kind: str
    """IMAGE (float inputs, one class label per sample) or TOKENS (int64 tokens, one label per token)."""
    shape: tuple[int, ...]
    """One sample's input shape: (3, H, W) for images, (T,) for tokens."""
    num_classes: int
    """Classes, or the vocabulary size for tokens."""


# ---------------------------------------------------------------------------------------------
# Built-in models


class MLP(nn.Module):
    """Flattened image -> two hidden ReLU layers -> classes: the cheapest model, for tests and comm-bound runs."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 256):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Flatten(),
            nn.Linear(in_features, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):  # x: (B, 3, H, W) -> (B, C)
        return self.layers(x)


class SmallCNN(nn.Module):
    """A downsized-AlexNet-style convnet for CIFAR-sized images, the small model DSSP was first evaluated on."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, ceil_mode=True),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, ceil_mode=True),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, num_classes))

    def forward(self, x):  # x: (B, 3, H, W) -> (B, C)
        return self.classifier(self.features(x))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = _shortcut(in_planes, planes, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.shortcut = _shortcut(in_planes, planes * 4, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def _shortcut(in_planes: int, out_planes: int, stride: int) -> nn.Module:
    if stride == 1 and in_planes == out_planes:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(in_planes, out_planes, 1, stride, bias=False), nn.BatchNorm2d(out_planes))


class ResNet(nn.Module):
    """CIFAR-style ResNet (the common 3x3-stem variant): ResNet-18 and ResNet-50."""

    def __init__(self, block: type[BasicBlock] | type[Bottleneck], blocks: list[int], num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        stages, in_planes = [], 64
        for i, (planes, count) in enumerate(zip((64, 128, 256, 512), blocks)):
            for j in range(count):
                stride = 2 if i > 0 and j == 0 else 1
                stages.append(block(in_planes, planes, stride))
                in_planes = planes * block.expansion
        self.stages = nn.Sequential(*stages)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_planes, num_classes))

    def forward(self, x):  # x: (B, 3, H, W) -> (B, C)
        return self.head(self.stages(self.stem(x)))


VGG16_LAYERS = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGG16(nn.Module):
    """CIFAR VGG-16 with batch norm: thirteen 3x3 convolutions and one linear classifier."""

    def __init__(self, num_classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for item in VGG16_LAYERS:
            if isinstance(item, str):  # "M"
                # ceil_mode keeps a 1x1 map 1x1, so small test images survive five poolings.
                layers.append(nn.MaxPool2d(2, ceil_mode=True))
            else:
                layers += [nn.Conv2d(channels, item, 3, padding=1), nn.BatchNorm2d(item), nn.ReLU()]
                channels = item
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes))

    def forward(self, x):  # x: (B, 3, H, W) -> (B, C)
        return self.classifier(self.features(x))


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):  # x: (B, T, E)
        B, T, E = x.shape
        q, k, v = self.qkv(x).split(E, dim=2)
        q, k, v = (t.view(B, T, self.n_head, E // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, H, T, E/H)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, E))


class DecoderBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A small GPT-style decoder (nanoGPT's shape): next-token logits for every position."""

    def __init__(self, vocab_size: int, block_size: int, n_layer: int = 4, n_head: int = 4, n_embd: int = 128):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, n_embd)
        self.position_embedding = nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(*(DecoderBlock(n_embd, n_head) for _ in range(n_layer)))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        for name, parameter in self.named_parameters():
            if parameter.dim() >= 2:
                nn.init.normal_(parameter, std=0.02 / (math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 1))

    def forward(self, tokens):  # tokens: (B, T) int64 -> (B, T, V)
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, E)
        return self.lm_head(self.ln_f(self.blocks(x)))


# ---------------------------------------------------------------------------------------------
# Building


class ModelError(ValueError):
    """The model named in the spec cannot be built; the message says what to change."""


def _builtin(name: str, shape: InputSpec) -> nn.Module:
    classes = shape.num_classes
    if name == "mlp":
        return MLP(math.prod(shape.shape), classes)
    if name == "cnn":
        return SmallCNN(classes)
    if name == "resnet18":
        return ResNet(BasicBlock, [2, 2, 2, 2], classes)
    if name == "resnet50":
        return ResNet(Bottleneck, [3, 4, 6, 3], classes)
    if name == "vgg16":
        return VGG16(classes)
    if name == "transformer":
        return GPT(vocab_size=classes, block_size=shape.shape[0])
    raise ModelError(f"unknown built-in model {name!r}: use one of {', '.join(spec.BUILTIN_MODELS)} "
                     "or \"package.module:factory\"")


def _user_code(reference: str, what: str, call):
    """call(), the user's code: whatever way it ends other than returning (an exception, sys.exit) is a
    ModelError naming the factory, so the rank fails with that one line instead of exiting as if done."""
    try:
        return call()
    except SystemExit as exit_:
        raise ModelError(f"model {reference!r}: {what} called sys.exit({exit_.code!r}); "
                         "a factory must return a torch.nn.Module") from None
    except ModelError:
        raise
    except ImportError as error:
        raise ModelError(f"model {reference!r}: {what} failed: cannot import {error.name!r} ({error}); "
                         "install it in the image or put it on PYTHONPATH") from error
    except Exception as error:
        first = (str(error).strip().splitlines() or [""])[0]
        raise ModelError(f"model {reference!r}: {what} raised {type(error).__name__}: {first}") from error


def _factory(reference: str):
    module_name, _, factory_name = reference.partition(":")
    module = _user_code(reference, f"importing {module_name}", lambda: importlib.import_module(module_name))
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise ModelError(f"model {reference!r}: {module_name} has no callable {factory_name!r}")
    return factory


def check_importable(model: spec.ModelSpec) -> None:
    """A ModelError now if a factory's module cannot be imported: ranks check before they join, so that every
    rank fails alike instead of the first to fail taking the rendezvous down under the others."""
    if model.name not in spec.BUILTIN_MODELS:
        _factory(model.name)


def _from_factory(reference: str) -> nn.Module:
    factory = _factory(reference)
    factory_name = reference.partition(":")[2]
    model = _user_code(reference, f"{factory_name}()", factory)
    if not isinstance(model, nn.Module):
        raise ModelError(f"model {reference!r}: {factory_name}() returned {type(model).__name__}, "
                         "not a torch.nn.Module")
    return model


def build(model: spec.ModelSpec, data: spec.SyntheticData, shape: InputSpec | None = None) -> nn.Module:
    """The model of the spec with weights drawn from `data.seed`: every rank builds the same initial weights.

    `shape` is what real data looks like (datasets.describe); None: the synthetic data's (input_spec)."""
    if shape is not None and model.name == "transformer" and shape.kind != TOKENS:
        raise ModelError("model 'transformer' needs token sequences, and real data is images: use mlp, cnn, "
                         "resnet18, resnet50, vgg16 or your own model")
    # A forked RNG keeps the caller's random stream untouched by model construction.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(data.seed)
        if model.name in spec.BUILTIN_MODELS:
            return _builtin(model.name, shape or input_spec(model, data))
        return _from_factory(model.name)


def input_spec(model: spec.ModelSpec, data: spec.SyntheticData, module: nn.Module | None = None) -> InputSpec:
    """What one sample of `model` looks like.

    A user model may say it by carrying `ringleader_input = InputSpec(...)` (or a dict of its fields);
    otherwise it gets images of `data.imageSize` with `data.numClasses` classes."""
    if model.name == "transformer":
        return InputSpec(TOKENS, (data.sequence_length,), data.num_classes)
    declared = getattr(module, "ringleader_input", None)
    if isinstance(declared, InputSpec):
        return declared
    if isinstance(declared, dict):
        return InputSpec(declared["kind"], tuple(declared["shape"]), int(declared["num_classes"]))
    return InputSpec(IMAGE, (3, data.image_size, data.image_size), data.num_classes)


def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross entropy for both kinds: (B, C) with (B,), or (B, T, V) with (B, T)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def parameter_bytes(model: nn.Module) -> int:
    """Bytes of all parameters: M, what one full gradient exchange moves."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def digest(model: nn.Module) -> str:
    """A SHA-256 of all parameter values, in order: equal digests mean bit-identical weights."""
    hasher = hashlib.sha256()
    for parameter in model.parameters():
        hasher.update(parameter.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return hasher.hexdigest()
