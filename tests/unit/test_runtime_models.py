"""Built-in models take the synthetic inputs, are reproducible from the seed, and user factories fail clearly."""

import pytest
import torch

from ringleader.api import spec as spec_
from ringleader.runtime import data, models

SMALL_IMAGES = spec_.SyntheticData(imageSize=8, numClasses=5, samples=64, sequenceLength=12, seed=3)


def forward(name: str, batch: int = 2) -> tuple[torch.nn.Module, torch.Tensor, models.InputSpec]:
    model_spec = spec_.ModelSpec(name=name)
    model = models.build(model_spec, SMALL_IMAGES)
    shape = models.input_spec(model_spec, SMALL_IMAGES, model)
    inputs, _ = data.SyntheticDataset(SMALL_IMAGES, shape).batch(0, batch)
    return model, model(inputs), shape


@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet18", "vgg16"])
def test_image_models_give_one_logit_per_class(name):
    _, logits, shape = forward(name)
    assert shape == models.InputSpec(models.IMAGE, (3, 8, 8), 5)
    assert logits.shape == (2, 5)


def test_resnet50_is_a_bottleneck_resnet_of_cifar_size():
    model = models.build(spec_.ModelSpec(name="resnet50"), spec_.SyntheticData(numClasses=10))
    # ResNet-50 for CIFAR-10 (3x3 stem, no ImageNet head) has 23.5 M parameters.
    assert 23_400_000 < models.parameter_count(model) < 23_600_000
    assert model(torch.randn(2, 3, 8, 8)).shape == (2, 10)


def test_resnet18_and_vgg16_have_their_usual_sizes():
    cifar = spec_.SyntheticData(numClasses=10)
    assert 11_100_000 < models.parameter_count(models.build(spec_.ModelSpec(name="resnet18"), cifar)) < 11_200_000
    assert 14_700_000 < models.parameter_count(models.build(spec_.ModelSpec(name="vgg16"), cifar)) < 14_800_000


def test_transformer_predicts_the_next_token_at_every_position():
    _, logits, shape = forward("transformer")
    assert shape == models.InputSpec(models.TOKENS, (12,), 5)
    assert logits.shape == (2, 12, 5)


def test_parameter_bytes_are_four_per_float32_parameter():
    model = models.build(spec_.ModelSpec(name="mlp"), SMALL_IMAGES)
    expected = (3 * 8 * 8 + 1) * 256 + (256 + 1) * 256 + (256 + 1) * 5
    assert models.parameter_count(model) == expected
    assert models.parameter_bytes(model) == 4 * expected


def test_same_seed_builds_the_same_weights_and_another_seed_does_not():
    first = models.build(spec_.ModelSpec(name="cnn"), SMALL_IMAGES)
    again = models.build(spec_.ModelSpec(name="cnn"), SMALL_IMAGES)
    other = models.build(spec_.ModelSpec(name="cnn"), SMALL_IMAGES.model_copy(update={"seed": 4}))
    assert models.digest(first) == models.digest(again)
    assert models.digest(first) != models.digest(other)


def test_building_does_not_disturb_the_callers_random_stream():
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    models.build(spec_.ModelSpec(name="mlp"), SMALL_IMAGES)
    assert torch.equal(torch.rand(3), expected)


def test_loss_flattens_tokens_and_images_alike():
    logits = torch.zeros(2, 3, 4)
    assert (models.loss(logits, torch.zeros(2, 3, dtype=torch.long)).item()
            == pytest.approx(torch.log(torch.tensor(4.0)).item()))


USER_MODULE = '''
import torch
from ringleader.runtime import models

def tiny():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 3))
    model.ringleader_input = {"kind": "image", "shape": [1, 2, 3], "num_classes": 3}
    return model

def plain():
    return torch.nn.Linear(2, 2)

def not_a_model():
    return 42

def exits():
    import sys
    sys.exit(0)

def raises():
    raise RuntimeError("no weights here\\nsecond line")

def imports_a_missing_dependency():
    import nosuchdependency
'''


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    (tmp_path / "userpkg").mkdir()
    (tmp_path / "userpkg" / "__init__.py").write_text("")
    (tmp_path / "userpkg" / "nets.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "userpkg.nets"


def test_a_user_factory_is_imported_called_and_may_declare_its_input(user_package):
    model_spec = spec_.ModelSpec(name=f"{user_package}:tiny")
    model = models.build(model_spec, SMALL_IMAGES)
    shape = models.input_spec(model_spec, SMALL_IMAGES, model)
    assert shape == models.InputSpec(models.IMAGE, (1, 2, 3), 3)
    inputs, labels = data.SyntheticDataset(SMALL_IMAGES, shape).batch(0, 4)
    assert model(inputs).shape == (4, 3) and labels.max() < 3


def test_a_user_model_without_a_declaration_gets_the_spec_images(user_package):
    model_spec = spec_.ModelSpec(name=f"{user_package}:plain")
    shape = models.input_spec(model_spec, SMALL_IMAGES, models.build(model_spec, SMALL_IMAGES))
    assert shape == models.InputSpec(models.IMAGE, (3, 8, 8), 5)


@pytest.mark.parametrize("reference, message", [
    ("nosuchpackage.nets:tiny", "importing nosuchpackage.nets failed: cannot import 'nosuchpackage'"),
    ("userpkg.nets:missing", "has no callable 'missing'"),
    ("userpkg.nets:not_a_model", "returned int, not a torch.nn.Module"),
    # A factory that ends the process as if done, or fails, is a failed build naming the factory.
    ("userpkg.nets:exits", "model 'userpkg.nets:exits': exits() called sys.exit(0); a factory must return"),
    ("userpkg.nets:raises", "model 'userpkg.nets:raises': raises() raised RuntimeError: no weights here"),
    ("userpkg.nets:imports_a_missing_dependency",
     "imports_a_missing_dependency() failed: cannot import 'nosuchdependency'"),
])
def test_a_broken_user_factory_says_what_to_fix(user_package, reference, message):
    with pytest.raises(models.ModelError) as error:
        models.build(spec_.ModelSpec(name=reference), SMALL_IMAGES)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_factory_that_cannot_be_found_is_caught_before_the_ranks_join_without_running_it(user_package):
    for reference in ("nosuchpackage.nets:tiny", "userpkg.nets:missing"):
        with pytest.raises(models.ModelError):
            models.check_importable(spec_.ModelSpec(name=reference))
    # Only the import is checked: the factory runs once, when the rank builds its model.
    models.check_importable(spec_.ModelSpec(name="userpkg.nets:exits"))
    models.check_importable(spec_.ModelSpec(name="mlp"))
