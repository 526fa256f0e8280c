"""Training on several processes with torch.distributed, started by ``torchrun`` (``torch_distributed``).

    torchrun --nproc_per_node=2 rnn.py config.py      # with torch_distributed = {} in the config

Gradients are synchronized by ``DistributedDataParallel`` (the ``train_step`` gets the wrapped
model; diagnostics keep the plain one, so parameter names do not change), or with
``param_sync_step = K`` the parameters are averaged every K updates. Every rank plans the
same batches for an epoch and takes every N-th, so N ranks with batch B see, step by step, the
sequences that one process with batch N x B sees; epoch scores are summed over all ranks. Only
rank 0 writes checkpoints (of the plain model, so any number of ranks can resume from them) and
TensorBoard; the others log to ``<log>.rank<k>``. That the ranks' replicas stay equal (so rank 0's
checkpoint stands for all) is checked by ``framework.debug.replicas``, with what ``prepare`` records.
"""

from __future__ import annotations

import atexit
import gc
import os
import re
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from framework.core.events import Event, Order
from framework.errors import ConfigError


def rank_from_env() -> int:
    """This process's rank as torchrun set it (0 outside torchrun)."""
    return int(os.environ.get("RANK", "0"))


def rank_log_files(files: str | list[str] | None, rank: int) -> list[str]:
    """``<log>.rank<k>`` for a rank other than 0 (rank 0 writes the main log)."""
    files = [files] if isinstance(files, str) else list(files or [])
    return files if rank == 0 else [f"{path}.rank{rank}" for path in files]


class Distributed:
    """The process group of this run and what the engine needs from it."""

    def __init__(self, options: dict[str, Any], device: torch.device):
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            raise ConfigError(
                "torch_distributed is set, but this process was not started by torchrun (no RANK/WORLD_SIZE in "
                "the environment). Run: torchrun --nproc_per_node=N rnn.py config.py"
            )
        unknown = set(options) - {"backend", "find_unused_parameters", "param_sync_step"}
        if unknown:
            raise ConfigError(
                f"torch_distributed: unknown entries {sorted(unknown)}; known: backend, find_unused_parameters, "
                f"param_sync_step."
            )
        self.param_sync_step = options.get("param_sync_step")
        if self.param_sync_step is not None and (not isinstance(self.param_sync_step, int) or self.param_sync_step < 1):
            raise ConfigError(
                f"torch_distributed['param_sync_step'] must be an int >= 1, got {self.param_sync_step!r}."
            )
        backend = options.get("backend") or ("nccl" if device.type == "cuda" else "gloo")
        if not dist.is_initialized():
            dist.init_process_group(backend)
            # Every exit path, also an error before the engine's task starts: gloo left alone aborts at exit.
            atexit.register(self.close)
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.find_unused_parameters = bool(options.get("find_unused_parameters", False))
        self.wrapped_params: dict[int, bool] = {}  # id(parameter) -> requires_grad, when the model was prepared
        # Whether the replicas should be equal now: always with DDP; with param_sync_step right after an averaging.
        self.params_in_sync = True
        self._updates = 0

    def train_plan(self, plan: list[np.ndarray]) -> list[np.ndarray]:
        """This rank's batches: every N-th, in whole groups of N so that all ranks take the same number of steps."""
        steps = len(plan) // self.size
        return [plan[step * self.size + self.rank] for step in range(steps)]

    def eval_plan(self, plan: list[np.ndarray]) -> list[np.ndarray]:
        """This rank's share of an evaluation: every N-th batch, none dropped (scores are summed after)."""
        return plan[self.rank :: self.size]

    def prepare(self, model: torch.nn.Module, callbacks: Any) -> torch.nn.Module:
        """The model as the train_step sees it: wrapped in DDP, or (``param_sync_step``) the model itself,
        whose parameters are averaged over the ranks every K updates."""
        callbacks.on(Event.EXCEPTION, lambda state: _name_unused_parameters(state.exception, model))
        # What DDP was built with: it averages the gradients of exactly these, the ones that required a gradient
        # then (a later change of the model is not seen by it). The ids stay valid: DDP holds the parameters.
        self.wrapped_params = {id(p): p.requires_grad for p in model.parameters()}
        if self.param_sync_step is None:
            device_ids = [model_device(model).index] if model_device(model).type == "cuda" else None
            return torch.nn.parallel.DistributedDataParallel(
                model, device_ids=device_ids, find_unused_parameters=self.find_unused_parameters
            )
        for p in model.parameters():  # start equal (DDP does this itself)
            dist.broadcast(p.data, src=0)
        callbacks.on(Event.AFTER_OPTIMIZER_STEP, self.average, Order.TRAINING, owner=__name__)
        return model

    def average(self, state: Any) -> None:
        """``param_sync_step``: after every K-th update, every rank's parameters are the average over the ranks."""
        self._updates += 1
        self.params_in_sync = self._updates % self.param_sync_step == 0
        if self.params_in_sync:
            for p in state.model.parameters():
                dist.all_reduce(p.data)
                p.data /= self.size

    def close(self) -> None:
        """Destroy the process group. Left to interpreter exit, gloo's threads can abort the process (SIGABRT)."""
        if dist.is_initialized():
            dist.destroy_process_group()
            # Whatever still holds the process group (a DDP wrapper, a copy of the model) lets go now, while
            # Python is alive: gloo's threads released during interpreter shutdown abort the process.
            gc.collect()

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` summed over all ranks."""
        values = values.clone()
        dist.all_reduce(values)
        return values


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _name_unused_parameters(exc: BaseException | None, model: torch.nn.Module) -> None:
    """DDP names unused parameters by index; add their names to its error."""
    found = re.search(r"Parameter indices which did not receive grad for rank (\d+): ([\d ]+)", str(exc or ""))
    if not found:
        return
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    unused = [names[int(i)] for i in found.group(2).split() if int(i) < len(names)]
    exc.add_note(
        f"[framework] parameters that got no gradient on rank {found.group(1)}: {', '.join(unused)}. Remove or use "
        f"them, list them in frozen_params and call requires_grad_(False), or set torch_distributed = "
        f"{{'find_unused_parameters': True}}."
    )
