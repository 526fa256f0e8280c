"""framework.testing: each assertion passes on a sound model and names the culprit on a broken one."""

import pytest
import torch
from torch import nn

from conftest import TINY_CONFIG
from framework import testing


def _batch():
    generator = torch.Generator().manual_seed(0)
    return {"data": torch.randn(16, 4, generator=generator), "classes": torch.randint(0, 3, (16,), generator=generator)}


def _train_step(*, model, extern_data, run_ctx, **_kwargs):
    run_ctx.mark_as_loss(
        name="ce", loss=nn.functional.cross_entropy(model(extern_data["data"]), extern_data["classes"])
    )


def _loss_fn(model, batch):  # the plain-function form
    return nn.functional.cross_entropy(model(batch["data"]), batch["classes"])


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body, self.side, self.head = nn.Linear(4, 8), nn.Linear(4, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.body(x).relu())  # 'side' is never used


def test_sound_models_pass_every_assertion():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 3))
    for step in (_train_step, _loss_fn):
        testing.assert_gradients_reach_all_params(model, _batch(), step)
        testing.assert_params_change(model, _batch(), step)
        testing.assert_no_nonfinite(model, _batch(), step)
    testing.assert_output_range(nn.Sequential(model, nn.Softmax(-1)), _batch()["data"], 0.0, 1.0)
    testing.assert_can_overfit(model, _batch(), _train_step)


def test_unconnected_and_frozen_parameters_are_named():
    with pytest.raises(AssertionError, match=r"module 'side' \(Linear\): weight, bias receive no gradient"):
        testing.assert_gradients_reach_all_params(_Net(), _batch(), _train_step)
    testing.assert_gradients_reach_all_params(_Net(), _batch(), _train_step, frozen=["side.*"])
    with pytest.raises(AssertionError, match=r"module 'side' \(Linear\): weight, bias did not change in 1 update"):
        testing.assert_params_change(_Net(), _batch(), _train_step)
    with pytest.raises(AssertionError, match=r"module 'head' \(Linear\): weight, bias changed although frozen"):
        testing.assert_params_change(_Net(), _batch(), _train_step, frozen=["side.*", "head.*"])


def test_a_partly_infinite_output_fails_and_names_the_first_module():
    output = torch.ones(4, 3)
    output[2, 1] = float("inf")
    with pytest.raises(AssertionError, match=r"tensor \(\[4, 3\]\) has 1 of 12 values Inf, first at index \(2, 1\)"):
        testing.assert_no_nonfinite(output)

    class Log(nn.Module):
        def forward(self, x):
            return torch.log(x)  # -inf at 0

    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), Log(), nn.Linear(3, 3))
    with pytest.raises(AssertionError, match=r"module '2' \(Log\) is the first module .* with a NaN/Inf output"):
        testing.assert_no_nonfinite(model, _batch(), _loss_fn)


def test_output_range_names_the_module_and_the_values():
    model = nn.Sequential(nn.Linear(4, 3), nn.Sigmoid(), nn.Linear(3, 3))
    testing.assert_output_range(model, _batch()["data"], 0.0, 1.0, module="1")
    with pytest.raises(AssertionError, match=r"module '\(model\)' output \(\[16, 3\]\) has \d+ of 48 values outside"):
        testing.assert_output_range(model, _batch()["data"], 0.0, 1.0)


def test_can_overfit_fails_for_a_detached_loss():
    def detached(model, batch):
        return _loss_fn(model, batch).detach().requires_grad_()

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    with pytest.raises(AssertionError, match="the model does not overfit one batch: the loss went from"):
        testing.assert_can_overfit(model, _batch(), detached, steps=50)


def test_from_config_gives_model_batch_and_train_step_of_a_config():
    case = testing.from_config(TINY_CONFIG, hidden=5)
    assert case.model[0].out_features == 5 and set(case.batch) == {"data", "classes"}
    assert case.batch["data"].shape == (16, 4)
    testing.assert_gradients_reach_all_params(case.model, case.batch, case.train_step)
