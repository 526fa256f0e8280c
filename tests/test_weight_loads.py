"""Pretrained weights that a non-strict load did not load (debug_weight_loads), in process: a checkpoint saved from a
wrapper ('model.' in front of every key) or of a submodule is named with the prefix; a fine-tuning load that leaves
a new head out, and strict loads, are not."""

import re

import pytest
from torch import nn

from framework.assembly import Engine
from framework.base.config import Config


class _Net(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 16), nn.ReLU())
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.body(x))


class _Wrapper(nn.Module):
    """A training module whose network is its attribute 'model'."""

    def __init__(self):
        super().__init__()
        self.model = _Net(classes=5)


def _train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))


def _run(get_model) -> None:
    data = {"class": "GaussianClustersDataset", "num_seqs": 64, "dim": 4}
    Engine(
        Config.from_dict(
            {
                "train": {**data, "split": "train"},
                "batch_size": 16,
                "num_epochs": 1,
                "get_model": get_model,
                "train_step": _train_step,
            }
        )
    ).run("train")


def _wrapped_checkpoint(**_):
    model = _Net()
    model.load_state_dict(_Wrapper().state_dict(), strict=False)
    return model


def _submodule_state(**_):
    model = _Net()
    model.load_state_dict(_Net().body.state_dict(), strict=False)
    return model


def _filtered_by_a_missing_prefix(**_):
    model = _Net()
    state = {k: v for k, v in _Wrapper().state_dict().items() if k.startswith("body.")}  # its keys start 'model.'
    model.load_state_dict(state, strict=False)
    return model


def _children_reused(**_):
    backbone = _Net()
    backbone.load_state_dict(_Wrapper().state_dict(), strict=False)
    return nn.Sequential(*list(backbone.children())[:-1], nn.Linear(16, 3))  # the body kept, a new head


def _new_head(**_):
    pretrained = {k: v for k, v in _Wrapper().model.state_dict().items() if not k.startswith("head.")}
    pretrained["classifier.weight"] = pretrained["body.0.weight"][:1].clone()  # the old task's head, renamed
    model = _Net()
    model.load_state_dict(pretrained, strict=False)
    return model


def _strict(**_):
    model = _Net()
    model.load_state_dict(_Net().state_dict())
    return model


WARNED = {
    "a wrapper's checkpoint ('model.' in front)": (
        _wrapped_checkpoint,
        r"WARNING sanity check \(model\): _Net\.load_state_dict\(\.\.\., strict=False\) loaded 0 of the 4 tensors it "
        r"was given: .* 4 of the unexpected keys are missing ones with 'model\.' in front: .* The call: "
        r".*test_weight_loads\.py:\d+ in _wrapped_checkpoint",
    ),
    "the body's state loaded into the whole model": (
        _submodule_state,
        r"WARNING sanity check \(model\): _Net\.load_state_dict\(\.\.\., strict=False\) loaded 0 of the 2 tensors .* "
        r"2 of the missing keys are unexpected ones with 'body\.' in front: the state dict is of the submodule 'body'",
    ),
    "a wrapper's checkpoint loaded into a model whose children are then reused": (
        _children_reused,
        r"WARNING sanity check \(model\): _Net\.load_state_dict\(\.\.\., strict=False\) loaded 0 of the 4 tensors .* "
        r"'model\.' in front",
    ),
    "a state dict filtered by a prefix no key has (empty)": (
        _filtered_by_a_missing_prefix,
        r"WARNING sanity check \(model\): _Net\.load_state_dict\(\.\.\., strict=False\) loaded 0 of the 0 tensors it "
        r"was given: the state dict is empty .*, and 4 of its parameters and buffers got no value",
    ),
}


@pytest.mark.parametrize("name", list(WARNED))
def test_a_load_that_loaded_nothing_or_missed_a_prefix_is_named(output, name):
    get_model, pattern = WARNED[name]
    _run(get_model)
    assert re.search(pattern, output()), output()


@pytest.mark.parametrize("get_model", [_new_head, _strict])
def test_a_fine_tuning_load_without_the_old_head_and_a_strict_load_are_quiet(output, get_model):
    _run(get_model)
    assert [line for line in output().splitlines() if "WARNING" in line] == []
