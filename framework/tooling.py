"""What the tools and ``framework.testing`` share: a config's model and batches, without training."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from framework.base.config import load_config, parse_args
from framework.training import checkpoint


@dataclass
class ConfigCase:
    """A config, its model (on the CPU, seeded, optionally with a checkpoint's parameters) and batches."""

    config: Any
    model: nn.Module
    batches: list[dict[str, torch.Tensor]]
    train_step: Any

    @property
    def batch(self) -> dict[str, torch.Tensor]:
        return self.batches[0]

    @property
    def input_key(self) -> str:
        """The batch key a model is called with by default: the first one available for inference."""
        declared = self.config.get("extern_data") or {}
        keys = [k for k in self.batch if not k.endswith(":seq_len")]
        inputs = [k for k in keys if declared.get(k, {}).get("available_for_inference", True)]
        return (inputs or keys)[0]


def load_case(
    files: list[str],
    overrides: dict[str, Any] | None = None,
    *,
    dataset: str | None = "train",
    num_batches: int = 1,
    checkpoint_path: str | None = None,
) -> ConfigCase:
    """Build the model of config ``files`` and the first ``num_batches`` batches of ``dataset`` (epoch 1's order; None: no data)."""
    from framework.base.rng import seed_everything
    from framework.core import build

    config = load_config(files, {"device": "cpu", **(overrides or {})})
    device = torch.device("cpu")
    loaders = build.init_data(config, [dataset], required=dataset, device=device)[1] if dataset is not None else {}
    seed_everything(config.int("random_seed"))
    model = build.build_model(config, device, epoch=1, step=0)
    if checkpoint_path is not None:
        checkpoint.load_model_state(model, checkpoint.load_checkpoint(checkpoint_path)["model"], checkpoint_path)
    batches = []
    if dataset is not None:
        loader = loaders[dataset]
        batches = [batch for _, batch in loader.iterate(loader.plan(1)[:num_batches])]
    return ConfigCase(config, model, batches, config.get("train_step"))


def case_from_argv(argv: list[str], **kwargs: Any) -> ConfigCase:
    """``load_case`` for the ``config.py [more.py] [++key value]`` part of a tool's command line."""
    files, overrides = parse_args(argv)
    return load_case(files, overrides, **kwargs)


def untrained_parameters_note(config: Any) -> str | None:
    """For a tool about to use the model's initial parameters: a note when training saved checkpoints of it."""
    prefix = config.get("model")
    saved = checkpoint.list_checkpoints(prefix) if prefix else {}
    if not saved:
        return None
    return (
        f"NOTE: without --checkpoint the model has its initial, untrained parameters, although training saved "
        f"{len(saved)} checkpoint(s) of it ({prefix}.*.pt); for the trained ones: --checkpoint {saved[max(saved)]}"
    )
