"""The symmetric-initialisation check: a layer whose units start equal and stay equal trains as one unit."""

from __future__ import annotations

from devkit.doc_commands import assert_documented
from torch import nn

from framework.assembly import Engine
from framework.base.config import Config


def _train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))


def _train(get_model) -> None:
    clusters = {"class": "GaussianClustersDataset", "num_seqs": 64, "dim": 4}
    config = {
        "train": {**clusters, "split": "train"},
        "batch_size": 16,
        "num_epochs": 1,
        "learning_rate": 1e-2,
        "get_model": get_model,
        "train_step": _train_step,
    }
    Engine(Config.from_dict(config)).run("train")


def _constant_init(**_):
    """As a torch beginner writes it: one init function applied to every layer."""

    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, 0.1)
            nn.init.zeros_(m.bias)

    model = nn.Sequential(nn.Linear(4, 32), nn.Sigmoid(), nn.Linear(32, 32), nn.Sigmoid(), nn.Linear(32, 3))
    model.apply(init_weights)
    return model


def _zero_output_layer(**_):
    """Standard: a zero-initialised last layer; its units get different gradients at once."""
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 3))
    nn.init.zeros_(model[2].weight)
    nn.init.zeros_(model[2].bias)
    return model


def test_a_constant_initialisation_of_every_layer_is_named_layer_by_layer(output):
    _train(_constant_init)
    text = output()
    lines = [line for line in text.splitlines() if line.startswith("WARNING symmetric init:")]
    assert len(lines) == 1, text
    assert "0 (Linear, 32 units), 2 (Linear, 32 units)" in lines[0] and "4 (Linear" not in lines[0]
    assert "nn.init.constant_" in lines[0]
    assert_documented(text, "docs/health.rst", "WARNING symmetric init: the output units")


def test_a_zero_initialised_output_layer_is_quiet(output):
    _train(_zero_output_layer)
    assert "symmetric init" not in output()
