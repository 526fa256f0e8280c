"""The contenders of tools/benchmark-step.py: each model as the framework trains it and as a hand-written loop does.

Per model, an ``*_engine`` function builds the framework's engine (seeded, so the initial parameters are fixed) and a
hand-written loop class trains the same model from the same initial parameters on the same batches in the same order.
On an accelerator both run there: the framework through its ``device`` option, the hand-written loop with its model on
the device and each batch copied there as PyTorch users write it (``.to(device, non_blocking=True)``).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from devkit.benchmarking import BUG_CHECKS_OFF, STEPS_ONLY
from framework.assembly import Engine
from framework.base.accelerator import is_accelerator
from framework.base.config import Config, load_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The diagnostics that are on by default, switched off.
ALL_OFF = {
    "debug_sanity_check": False,
    "debug_grad_health": False,
    "debug_leak_check": False,
    "debug_loss_window": 0,
    "debug_dev_divergence_epochs": 0,
    "stop_on_nonfinite_train_score": False,
    **BUG_CHECKS_OFF,
}


def make_mlp(hidden: int = 512) -> nn.Module:
    return nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def mlp_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch["data"]), batch["classes"])


class TransformerLM(nn.Module):
    """A decoder-only language model as people write it: token embedding plus learned positions, pre-norm
    ``nn.TransformerEncoder`` layers under a causal mask, a final LayerNorm and an output head tied to the embedding."""

    def __init__(self, vocab: int, dim: int, heads: int, layers: int, max_len: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(max_len, dim)
        layer = nn.TransformerEncoderLayer(
            dim, heads, dim_feedforward=4 * dim, dropout=0.1, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)  # no nested tensors pre-norm
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight
        nn.init.normal_(self.embed.weight, std=1 / math.sqrt(dim))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        time = tokens.shape[1]
        positions = torch.arange(time, device=tokens.device)
        mask = nn.Transformer.generate_square_subsequent_mask(time, device=tokens.device)
        hidden = self.encoder(self.embed(tokens) + self.position(positions), mask=mask, is_causal=True)
        return self.head(self.norm(hidden))


def lm_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Cross-entropy of each next token given the ones before it."""
    window = batch["data"]
    logits = model(window[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), window[:, 1:].reshape(-1))


def train_step_of(loss: Callable) -> Callable:
    """The config's ``train_step`` for a loss function shared with the hand-written loop."""

    def train_step(*, model, extern_data, run_ctx, **_kwargs):
        run_ctx.mark_as_loss(name="ce", loss=loss(model, extern_data))

    return train_step


# Transformer sizes per place: on the CPU a round takes about a second; on an accelerator the device is busy, so
# the framework's fixed cost per step shows in a realistic proportion.
TRANSFORMER_SIZES = {
    "cpu": {"vocab": 1024, "dim": 128, "heads": 4, "layers": 2, "seq_len": 64, "batch": 16, "steps": 8},
    "accelerator": {"vocab": 8192, "dim": 512, "heads": 8, "layers": 6, "seq_len": 256, "batch": 32, "steps": 40},
}


def transformer_sizes(device: torch.device) -> dict[str, int]:
    return TRANSFORMER_SIZES["accelerator" if is_accelerator(device) else "cpu"]


def framework_engine(options: dict, all_off: bool, device: torch.device, amp: str | None, compile: bool) -> Engine:
    """The engine of a run with these ``options``, ready to train (its model initialized under seed 0)."""
    torch.manual_seed(0)
    config = Config.from_dict(
        {
            "num_epochs": 10**6,
            "optimizer": {"class": "adam"},
            "learning_rate": 1e-3,
            "device": device.type,
            # A checkpoint prefix, as real runs have: what a run writes beside its checkpoints per step is timed too.
            "model": os.path.join(tempfile.mkdtemp(prefix="benchmark-step-"), "model"),
            "torch_amp": amp,
            "torch_compile": compile,
            **options,
            **(ALL_OFF if all_off else {}),
        }
    )
    engine = Engine(config)
    engine.init_train()
    return engine


def mlp_engine(batch_size: int, hidden: int, all_off: bool, device: torch.device, amp: str | None, compile: bool):
    options = {
        "train": {"class": "MnistDataset", "split": "train"},
        "extern_data": {"data": {"shape": (784,)}, "classes": {"shape": (), "sparse_dim": 10}},
        "batch_size": batch_size,
        "get_model": lambda **_: make_mlp(hidden),
        "train_step": train_step_of(mlp_loss),
    }
    return framework_engine(options, all_off, device, amp, compile)


def transformer_engine(all_off: bool, device: torch.device, amp: str | None, compile: bool) -> Engine:
    """The language model on random tokens (uniform: a benchmark times steps, it need not learn)."""
    size = transformer_sizes(device)
    tokens = np.random.default_rng(0).integers(0, size["vocab"], (size["steps"] * size["batch"], size["seq_len"] + 1))
    options = {
        "train": {"class": "NumpyDataset", "arrays": {"data": tokens}, "sparse_dims": {"data": size["vocab"]}},
        "extern_data": {"data": {"shape": (size["seq_len"] + 1,), "dtype": "int64", "sparse_dim": size["vocab"]}},
        "batch_size": size["batch"],
        "get_model": lambda **_: TransformerLM(
            size["vocab"], size["dim"], size["heads"], size["layers"], size["seq_len"]
        ),
        "train_step": train_step_of(lm_loss),
    }
    return framework_engine(options, all_off, device, amp, compile)


def lstm_engine(all_off: bool, device: torch.device) -> Engine:
    overrides = {**STEPS_ONLY, "device": device.type, **(ALL_OFF if all_off else {})}
    torch.manual_seed(0)
    engine = Engine(load_config([os.path.join(ROOT, "configs/task12ax_lstm.py")], overrides))
    engine.init_train()
    return engine


class HandWrittenLoop:
    """The loop a PyTorch user writes by hand: index the data, copy the batch to the device, forward, backward, step."""

    def __init__(
        self,
        engine: Engine,
        initial_state: dict,
        model: nn.Module,
        loss: Callable,
        amp: str | None,
        compile: bool,
    ):
        self.dataset = engine.state.loaders["train"].dataset
        self.arrays = {key: torch.from_numpy(np.asarray(array)) for key, array in self.dataset.arrays.items()}
        self.device = engine.state.device
        self.copy = is_accelerator(self.device)  # on the CPU the batch is where it belongs
        self.model = model.to(self.device)
        self.model.load_state_dict(initial_state)
        self.loss = loss
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3, fused=True)
        self.forward = torch.compile(self.model) if compile else self.model
        self.dtype = getattr(torch, amp) if amp else None
        self.scaler = torch.amp.GradScaler(self.device.type) if amp else None
        self.batch_size = engine.config.int("batch_size")

    def epoch(self, epoch: int) -> int:
        order = torch.from_numpy(self.dataset.get_seq_order(epoch))
        steps = 0
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            batch = {key: array[idx] for key, array in self.arrays.items()}
            if self.copy:
                batch = {key: t.to(self.device, non_blocking=True) for key, t in batch.items()}
            self.optimizer.zero_grad(set_to_none=True)
            with torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype is not None):
                loss = self.loss(self.forward, batch)
            if self.scaler is None:
                loss.backward()
                self.optimizer.step()
            else:
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            steps += 1
        return steps


class HandWrittenSequenceLoop:
    """The 12AX LSTM by hand: the same batches padded with ``pad_sequence``, the config's model and
    train_step (its losses summed as the config marks them), backward, clipping, step."""

    def __init__(self, engine: Engine, initial_state: dict):
        config = engine.config
        self.loader = engine.state.loaders["train"]
        dataset = self.loader.dataset
        seqs = [dataset.get_seq(i) for i in range(dataset.num_seqs)]
        self.data = [torch.from_numpy(seq["data"].astype(np.int64)) for seq in seqs]
        self.classes = [torch.from_numpy(seq["classes"].astype(np.int64)) for seq in seqs]
        self.device = engine.state.device
        self.copy = is_accelerator(self.device)
        self.model = config.get("get_model")(epoch=1, step=0).to(self.device)
        self.model.load_state_dict(initial_state)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=config.float("learning_rate"), eps=1e-8, fused=True
        )
        self.train_step = config.get("train_step")
        self.clip = config.float("gradient_clip_global_norm")

    def epoch(self, epoch: int) -> int:
        plan = self.loader.plan(epoch)
        for indices in plan:
            batch = {
                "data": pad_sequence([self.data[i] for i in indices], batch_first=True),
                "classes": pad_sequence([self.classes[i] for i in indices], batch_first=True),
            }
            if self.copy:
                batch = {key: t.to(self.device, non_blocking=True) for key, t in batch.items()}
            batch["classes:seq_len"] = torch.tensor([len(self.classes[i]) for i in indices])  # lengths stay on the CPU
            self.optimizer.zero_grad(set_to_none=True)
            losses = _Losses()
            self.train_step(model=self.model, extern_data=batch, run_ctx=losses)
            losses.total.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.optimizer.step()
        return len(plan)


class _Losses:
    """What a hand-written loop does with the losses train_step marks: sum the optimized ones, normalized."""

    def __init__(self) -> None:
        self.total = 0

    def mark_as_loss(self, *, name, loss, custom_inv_norm_factor=None, as_error=False, **_kwargs):
        if not as_error:
            self.total = self.total + (loss if custom_inv_norm_factor is None else loss / custom_inv_norm_factor)


def gan_engine(all_off: bool, device: torch.device) -> Engine:
    """The GAN of configs/gan_ring.py: two optimizers, two losses each backpropagated into its own network."""
    overrides = {**STEPS_ONLY, "device": device.type, **(ALL_OFF if all_off else {})}
    torch.manual_seed(0)
    engine = Engine(load_config([os.path.join(ROOT, "configs/gan_ring.py")], overrides))
    engine.init_train()
    return engine


class HandWrittenGanLoop:
    """The GAN by hand: the config's model and train_step, each player's loss backpropagated into its own
    parameters (``inputs=``), then both Adam steps, as a PyTorch user writes simultaneous updates."""

    def __init__(self, engine: Engine, initial_state: dict):
        config = engine.config
        self.loader = engine.state.loaders["train"]
        self.data = torch.from_numpy(np.asarray(self.loader.dataset.arrays["data"]))
        self.model = config.get("get_model")(epoch=1, step=0).to(engine.state.device)
        self.model.load_state_dict(initial_state)
        lr = config.float("learning_rate")
        self.params = {name: list(getattr(self.model, name).parameters()) for name in ("discriminator", "generator")}
        self.optimizers = [
            torch.optim.Adam(params, lr=lr, betas=(0.5, 0.999), fused=True) for params in self.params.values()
        ]
        self.train_step = config.get("train_step")

    def epoch(self, epoch: int) -> int:
        plan = self.loader.plan(epoch)
        for indices in plan:
            batch = {"data": self.data[torch.from_numpy(indices)]}
            for optimizer in self.optimizers:
                optimizer.zero_grad(set_to_none=True)
            losses = _PlayerLosses()
            self.train_step(model=self.model, extern_data=batch, run_ctx=losses)
            last = len(losses.by_optimizer) - 1
            for index, (name, loss) in enumerate(losses.by_optimizer.items()):
                torch.autograd.backward(loss, inputs=self.params[name], retain_graph=index < last)
            for optimizer in self.optimizers:
                optimizer.step()
        return len(plan)


class _PlayerLosses:
    """What a hand-written loop of several players does with the losses train_step marks: a sum per optimizer."""

    train_flag = True

    def __init__(self) -> None:
        self.by_optimizer: dict[str, torch.Tensor] = {}

    def mark_as_loss(self, loss, name, *, optimizer=None, as_error=False, **_kwargs):
        if not as_error:
            previous = self.by_optimizer.get(optimizer)
            self.by_optimizer[optimizer] = loss if previous is None else previous + loss
