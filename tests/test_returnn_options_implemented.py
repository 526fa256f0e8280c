"""RETURNN options that were refused here and are now implemented with RETURNN's meaning, or classified as RETURNN
itself treats them: each compared against RETURNN's own code where it runs cheaply, and with a short rnn.py run where
it changes training."""

from __future__ import annotations

import types

import pytest
import torch

from framework.base.config import load_config
from framework.base.errors import ConfigError
from framework.training.clipping import GradientClipping


def _returnn_config(options: dict):
    from returnn.config import Config as ReturnnConfig

    return ReturnnConfig(dict(options))


# ------------------------------------------------------------------------------------------------- grad_clip
def test_grad_clip_stops_as_in_returnns_torch_engine_and_is_accepted_at_zero(tmp_path):
    from returnn.torch.updater import Updater

    model = torch.nn.Linear(3, 2)
    with pytest.raises(ValueError, match="option is called gradient_clip_global_norm"):
        Updater(config=_returnn_config({"grad_clip": 5.0}), network=model, device="cpu")
    Updater(config=_returnn_config({"grad_clip": 0}), network=model, device="cpu")  # 0: RETURNN runs

    path = tmp_path / "c.py"
    path.write_text("train = {'class': 'Task12AXDataset'}\ngrad_clip = 5.0\n")
    with pytest.raises(ConfigError, match="option is called gradient_clip_global_norm"):
        load_config([str(path)])
    path.write_text("train = {'class': 'Task12AXDataset'}\ngrad_clip = 0\n")
    assert "grad_clip" in load_config([str(path)]).without_effect


@pytest.mark.parametrize(
    "options", [{"gradient_clip": 0.05, "gradient_clip_global_norm": 0.3}, {"gradient_clip": 0.05}]
)
def test_clipping_clips_the_gradients_as_returnns_updater(options):
    """Per value first, then the global norm of the clipped values: RETURNN's order (the norm first gives others)."""
    from returnn.torch.updater import Updater

    torch.manual_seed(0)
    ours, theirs = torch.nn.Linear(6, 4), torch.nn.Linear(6, 4)
    theirs.load_state_dict(ours.state_dict())
    grads = [torch.randn_like(p) * scale for p, scale in zip(ours.parameters(), (0.2, 1.0), strict=True)]
    for model in (ours, theirs):
        for param, grad in zip(model.parameters(), grads, strict=True):
            param.grad = grad.clone()
    updater = Updater(config=_returnn_config({"optimizer": {"class": "sgd"}, **options}), network=theirs, device="cpu")
    updater.create_optimizer()
    updater.step()  # clips theirs' gradients in place, then updates
    store = types.SimpleNamespace(put=lambda *args, **kwargs: None)
    state = types.SimpleNamespace(model=ours, optimizer=None, store=store, global_step=0)
    GradientClipping(options.get("gradient_clip_global_norm"), options.get("gradient_clip")).clip(state)
    for mine, returnns in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.allclose(mine.grad, returnns.grad, atol=1e-7)
