"""Training on several processes with torch.distributed, started by ``torchrun`` (``torch_distributed``).

    torchrun --nproc_per_node=2 rnn.py config.py      # with torch_distributed = {} in the config

Gradients are synchronized by ``DistributedDataParallel`` (the ``train_step`` gets the wrapped
model; diagnostics keep the plain one, so parameter names do not change), or with
``param_sync_step = K`` the parameters are averaged every K updates. With several optimizers
(``optimizers``: one backward pass per optimizer, which DDP cannot follow) the gradients are averaged
at each update instead. Every rank plans the
same batches for an epoch and takes every N-th, so N ranks with batch B see, step by step, the
sequences that one process with batch N x B sees (a dataset sharded by rank, ``DistributeFilesDataset``
with ``distrib_shard_files``, plans each rank's own batches instead); epoch scores are summed over all ranks. Only
rank 0 writes checkpoints (of the plain model, so any number of ranks can resume from them) and
TensorBoard; the others log to ``<log>.rank<k>``. That the ranks' replicas stay equal (so rank 0's
checkpoint stands for all) is checked by ``framework.debug.replicas``, with what ``prepare`` records.
"""

from __future__ import annotations

import atexit
import datetime
import gc
import os
import re
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from framework.base import log
from framework.base.accelerator import is_accelerator
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.core.events import Event, Order
from framework.datasets.loader import RankPlan
from framework.training import exit_log, fsdp
from framework.training.optim import trainable_parameters

register(
    "torch_distributed",
    "dict | None",
    None,
    "Train on the processes torchrun starts: {} or {'backend': 'gloo'|'nccl', 'find_unused_parameters': bool, "
    "'param_sync_step': K, 'dataset_distribution': 'random_seed_offset'|'shard'}, or with FSDP2 {'fsdp': "
    "{fully_shard options}} (docs/fsdp.rst). dataset_distribution, RETURNN's (its default 'random_seed_offset' for a "
    "RETURNN config): every rank goes through all train sequences in its own order (random_seed_offset + rank x "
    "16127), or 'shard': every rank batches its shard of one order; without it the ranks split one plan's batches.",
    __name__,
)

_ENDED = "framework-rank-ended"  # store key prefix: a rank has reported how it ended


def rank_from_env() -> int:
    """This process's rank as torchrun set it (0 outside torchrun)."""
    return int(os.environ.get("RANK", "0"))


def rank_log_files(files: str | list[str] | None, rank: int) -> list[str]:
    """``<log>.rank<k>`` for a rank other than 0 (rank 0 writes the main log)."""
    files = [files] if isinstance(files, str) else list(files or [])
    return files if rank == 0 else [f"{path}.rank{rank}" for path in files]


def check_reduce_type(options: dict[str, Any]) -> None:
    """RETURNN's ``reduce_type``: "grad" (the default: gradients are averaged, DDP) or "param" (each rank trains on
    its own and the parameters are averaged every ``param_sync_step`` updates)."""
    reduce_type = options.get("reduce_type", "param" if options.get("param_sync_step") else "grad")
    if reduce_type not in ("grad", "param"):
        raise ConfigError(
            f"torch_distributed['reduce_type'] is 'grad' or 'param' (as in RETURNN), got {reduce_type!r}."
        )
    if reduce_type == "param" and not options.get("param_sync_step"):
        raise ConfigError(
            "torch_distributed: reduce_type 'param' averages parameters every param_sync_step updates; set it."
        )
    if reduce_type == "grad" and options.get("param_sync_step"):
        raise ConfigError(
            "torch_distributed: param_sync_step averages parameters (reduce_type 'param'), but reduce_type is 'grad'."
        )


class Distributed:
    """The process group of this run and what the engine needs from it."""

    def __init__(self, options: dict[str, Any], device: torch.device):
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            raise ConfigError(
                "torch_distributed is set, but this process was not started by torchrun (no RANK/WORLD_SIZE in "
                "the environment). Run: torchrun --nproc_per_node=N rnn.py config.py"
            )
        known = {"backend", "find_unused_parameters", "param_sync_step", "reduce_type", "fsdp", "dataset_distribution"}
        unknown = set(options) - known
        if unknown:
            raise ConfigError(
                f"torch_distributed: unknown entries {sorted(unknown)}; known: {', '.join(sorted(known))}."
            )
        if options.get("dataset_distribution", "shard") not in ("random_seed_offset", "shard"):
            raise ConfigError(
                f"torch_distributed dataset_distribution = {options['dataset_distribution']!r}: RETURNN takes "
                f"'random_seed_offset' (its default: every rank goes through all sequences in its own order) or "
                f"'shard' (every rank its shard of the sequences)."
            )
        check_reduce_type(options)
        # FSDP2 (framework.training.fsdp): the options of fully_shard, validated before the process group exists.
        self.fsdp = None if options.get("fsdp") is None else fsdp.fully_shard_options(options["fsdp"], device)
        if self.fsdp is not None:
            fsdp.refuse_ddp_options(options)
        self.param_sync_step = options.get("param_sync_step")
        if self.param_sync_step is not None and (not isinstance(self.param_sync_step, int) or self.param_sync_step < 1):
            raise ConfigError(
                f"torch_distributed['param_sync_step'] must be an int >= 1, got {self.param_sync_step!r}."
            )
        try:  # the device's own collective library (nccl on CUDA, xccl on XPU), gloo on the CPU
            backend = options.get("backend") or dist.get_default_backend_for_device(device)
        except ValueError:
            raise ConfigError(
                f"torch_distributed: torch has no process-group backend for device {device}; name one with "
                f"torch_distributed = {{'backend': ...}}, or train on a device that has one (cuda, xpu, cpu)."
            ) from None
        self._store: dist.Store | None = None  # the rendezvous store: it outlives the process group
        if not dist.is_initialized():
            self._store = _init_process_group(backend)
            atexit.register(self._close_at_exit)
            exit_log.when_ending(self._end_after_peers_reported)
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        # Where the ranks agree on a stop: a CPU all-reduce, never a wait for the device.
        self._cpu_group = None if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")
        self._stop_asked: str | None = None  # a signal asked this rank to stop; not yet agreed on by all
        self._requeue_asked = False  # ... and to requeue the job after (requeue_signal)
        self.requeue_agreed = False  # some rank was asked to requeue: known to every rank once they stopped
        self._stop_flags: tuple[Any, torch.Tensor] | None = None  # the last boundary's all-reduce, in flight
        self.device = device
        self.find_unused_parameters = bool(options.get("find_unused_parameters", False))
        self.wrapped_params: dict[int, bool] = {}  # id(parameter) -> requires_grad, when the model was prepared
        # Whether the replicas should be equal now: always with DDP; with param_sync_step right after an averaging.
        self.params_in_sync = True
        self._updates = 0
        self._remainder_said = False  # train_plan said how it shares out the batches that do not split evenly
        self._destroyed_groups: list[Any] = []  # see close

    def train_plan(self, plan: list[np.ndarray]) -> list[np.ndarray]:
        """This rank's batches: every N-th, in whole groups of N so that all ranks take the same number of steps,
        then the sequences of the batches that do not split evenly, every N-th to each rank.

        A plan of this rank's own data (``RankPlan``, from a dataset sharded by rank) is cut to the length of the
        shortest rank's instead: the ranks' plans differ, and a rank that took more steps would wait forever.
        """
        if isinstance(plan, RankPlan):
            steps = torch.tensor([len(plan)], device=self.device)
            dist.all_reduce(steps, op=dist.ReduceOp.MIN)
            steps = int(steps.item())
            if plan.share_rest:
                return self._with_shared_rest(plan, steps)
            if steps < len(plan):
                log.v4(
                    f"Rank {self.rank} leaves out its last {len(plan) - steps} of {len(plan)} batches: every rank "
                    f"takes as many steps as the rank with the fewest batches ({steps})."
                )
            return plan[:steps]
        whole = len(plan) // self.size * self.size
        mine = [plan[step * self.size + self.rank] for step in range(whole // self.size)]
        rest = plan[whole:]
        if not rest:
            return mine
        # The batches that do not split evenly: their sequences are shared out over the ranks for one more step, so
        # that every sequence of the epoch is trained; too few for every rank to get one: the epoch's first ones again.
        sequences = np.concatenate(rest)
        repeated = max(0, self.size - len(sequences))
        if repeated:
            sequences = np.concatenate([sequences, np.resize(np.concatenate(plan), repeated)])
        if not self._remainder_said:
            self._remainder_said = True
            log.v3(
                f"torch_distributed: an epoch has {len(plan)} batches for {self.size} ranks, so the last {len(rest)} "
                f"({sum(map(len, rest))} sequences) are shared out over the ranks for one more step"
                + (f" ({repeated} sequences trained twice, as every rank needs one)" if repeated else "")
                + ": every sequence is trained. RETURNN instead gives each rank every N-th sequence to batch on its "
                "own and ends the sub-epoch when the first rank runs out of batches, leaving out the other ranks' rest."
            )
        return [*mine, sequences[self.rank :: self.size]]

    def _with_shared_rest(self, plan: RankPlan, steps: int) -> list[np.ndarray]:
        """This rank's shard's batches, cut to the fewest any rank has, and one more step with every N-th of the
        sequences the ranks' cut batches held (collected from all ranks): RETURNN's "shard" distribution ends the
        sub-epoch when the first rank runs out and leaves the others' rest untrained; here every sequence of the
        sub-epoch is trained (too few for every rank to get one: the first of the rest again; none at all: none)."""
        rest = np.concatenate(plan[steps:]) if len(plan) > steps else np.zeros(0, dtype=np.int64)
        gathered: list[Any] = [None] * self.size
        dist.all_gather_object(gathered, rest.tolist(), group=self._cpu_group)
        sequences = np.array([i for share in gathered for i in share], dtype=np.int64)
        if len(sequences) == 0:
            return list(plan[:steps])
        repeated = max(0, self.size - len(sequences))
        if repeated:
            sequences = np.concatenate([sequences, np.resize(sequences, repeated)])
        if not self._remainder_said:
            self._remainder_said = True
            log.v3(
                f"torch_distributed dataset_distribution 'shard': the ranks' shards make different numbers of batches "
                f"(the fewest {steps}), so the {len(sequences) - repeated} sequences of the batches beyond that are "
                f"shared out over the ranks for one more step"
                + (f" ({repeated} sequences trained twice, as every rank needs one)" if repeated else "")
                + ": every sequence is trained. RETURNN instead ends the sub-epoch when the first rank runs out of "
                "batches, leaving out the other ranks' rest."
            )
        return [*plan[:steps], sequences[self.rank :: self.size]]

    def eval_plan(self, plan: list[np.ndarray]) -> list[np.ndarray]:
        """This rank's share of an evaluation: every N-th batch, none dropped (scores are summed after)."""
        return plan[self.rank :: self.size]

    def shards_eval(self, num_batches: int) -> bool:
        """Whether the ranks split an evaluation of ``num_batches`` (``eval_plan``) or each scores all of them:
        they split it unless some rank would get none (no scores to sum) or, under FSDP, unless the shares are
        equal (each forward of a sharded model is a collective of all ranks)."""
        return num_batches >= self.size and (self.fsdp is None or num_batches % self.size == 0)

    def prepare(self, model: torch.nn.Module, callbacks: Any, several_optimizers: bool = False) -> torch.nn.Module:
        """The model as the train_step sees it: wrapped in DDP, or (``param_sync_step``) the model itself,
        whose parameters are averaged over the ranks every K updates, or (``several_optimizers``, which DDP cannot
        serve) the model itself, whose gradients are averaged before each update."""
        trainable_parameters(model)  # a model with nothing to train is a config error, not DDP's or FSDP's
        callbacks.on(Event.EXCEPTION, lambda state: _name_unused_parameters(state.exception, model))
        callbacks.on(Event.STEP_END, self.agree_on_stop, Order.TRAINING, owner=__name__)
        # What DDP was built with: it averages the gradients of exactly these, the ones that required a gradient
        # then (a later change of the model is not seen by it). The ids stay valid: DDP holds the parameters.
        self.wrapped_params = {id(p): p.requires_grad for p in model.parameters()}
        if self.fsdp is not None:  # sharded in place: train_step and the diagnostics see the same module
            fsdp.shard(model, self.fsdp)
            return model
        if self.param_sync_step is None and several_optimizers:
            # One backward pass per optimizer, each into its own parameters (inputs=): DDP's reducer waits for every
            # parameter's gradient in each pass and would never finish. The gradients are averaged at the update.
            self._broadcast_parameters(model)
            callbacks.on(Event.BEFORE_OPTIMIZER_STEP, self.average_gradients, Order.TRAINING - 2, owner=__name__)
            return model
        if self.param_sync_step is None:
            device_ids = [model_device(model).index] if is_accelerator(model_device(model)) else None
            return torch.nn.parallel.DistributedDataParallel(
                model, device_ids=device_ids, find_unused_parameters=self.find_unused_parameters
            )
        self._broadcast_parameters(model)
        callbacks.on(Event.AFTER_OPTIMIZER_STEP, self.average, Order.TRAINING, owner=__name__)
        return model

    @staticmethod
    def _broadcast_parameters(model: torch.nn.Module) -> None:
        """Every rank starts from rank 0's parameters (DDP does this itself)."""
        for p in model.parameters():
            dist.broadcast(p.data, src=0)

    def average_gradients(self, state: Any) -> None:
        """Several optimizers: before the update (and before the loss scaler's overflow check, so that every rank
        skips alike), each gradient is the average over the ranks. A parameter that got a gradient on no rank keeps
        none, so that its optimizer leaves it as it is (an alternating update); one that got a gradient on some
        ranks only counts zero on the others, as DDP does for a parameter a rank did not use."""
        params = [p for p in state.model.parameters() if p.requires_grad]
        present = torch.tensor([p.grad is not None for p in params], dtype=torch.int32, device=self.device)
        dist.all_reduce(present)
        dense: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
        for p, count in zip(params, present.tolist(), strict=True):
            if not count:
                continue
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            if p.grad.is_sparse:
                dist.all_reduce(p.grad)
                p.grad /= self.size
            else:
                dense.setdefault((p.grad.device, p.grad.dtype), []).append(p.grad)
        for grads in dense.values():  # one collective per device and dtype, not one per parameter
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat)
            flat /= self.size
            offset = 0
            for g in grads:
                g.copy_(flat[offset : offset + g.numel()].view_as(g))
                offset += g.numel()

    def ask_to_stop(self, reason: str, requeue: bool = False) -> None:
        """A stop asked of this rank (a signal); every rank stops at the first update boundary after all know of it.

        Signals reach the ranks at different moments, and a rank may be a step ahead of another: stopping
        on its own, a rank would leave the others waiting in the next step's collectives for a peer that left.
        """
        self._stop_asked = self._stop_asked or reason
        self._requeue_asked = self._requeue_asked or requeue

    def agree_on_stop(self, state: Any) -> None:
        """At each update boundary, whether any rank was asked to stop by the previous one.

        The flags go round in the background (one all-reduce on the CPU, started at a boundary and read at the
        next, long arrived by then), so no step waits for the slowest rank's flag; every rank reads the same
        result at the same boundary and stops there, one update after the first rank was asked. An epoch's
        last boundary reads its own flags: none is left in flight through evaluation and checkpoint.
        """
        if not state.at_update_boundary():
            return
        flags = [self._stop_flags or self._share_stop_flag()]  # an epoch's first boundary: its own, at once
        if state.step_in_epoch + 1 == state.steps_in_epoch:
            flags.append(self._share_stop_flag())
            self._stop_flags = None
        else:
            self._stop_flags = self._share_stop_flag()
        for work, _ in flags:
            work.wait()
        asked = max(int(flag.item()) for _, flag in flags)  # 0: go on, 1: stop, 2: stop and requeue
        if asked and state.control.stop_reason is None:
            self.requeue_agreed = asked == 2
            other = "a requeue asked of another rank" if self.requeue_agreed else "a stop asked of another rank"
            state.control.stop(self._stop_asked or other)

    def _share_stop_flag(self) -> tuple[Any, torch.Tensor]:
        asked = torch.tensor([2 if self._requeue_asked else int(self._stop_asked is not None)], dtype=torch.int32)
        return dist.all_reduce(asked, op=dist.ReduceOp.MAX, group=self._cpu_group, async_op=True), asked

    def average(self, state: Any) -> None:
        """``param_sync_step``: after every K-th update, every rank's parameters are the average over the ranks."""
        self._updates += 1
        self.params_in_sync = self._updates % self.param_sync_step == 0
        if self.params_in_sync:
            for p in state.model.parameters():
                dist.all_reduce(p.data)
                p.data /= self.size

    def close(self) -> None:
        """Destroy the process group (at the engine's end, else in ``_close_at_exit``)."""
        self._stop_flags = None  # in flight only when a rank failed mid-epoch: its peers never complete it
        if dist.is_initialized():
            # Held until _close_at_exit, so that no DDP reducer ever holds the last reference to a group: the
            # reducer's release keeps the GIL while gloo joins its threads, and a gloo thread still freeing the
            # tensors of the last collective waits for the GIL; the rank hangs (seen 1 in 30 runs on a busy machine;
            # pytorch/pytorch#56297). A group's own Python reference lets go of the GIL while it is destroyed.
            self._destroyed_groups = [dist.group.WORLD, self._cpu_group]
            dist.destroy_process_group()

    def _close_at_exit(self) -> None:
        """``close`` on every exit path (also an error before the engine's task starts), then the groups go, while
        Python is alive (left to interpreter shutdown, gloo's threads can abort the process: SIGABRT), once whatever
        else held them (a DDP wrapper, a copy of the model) has let go: the model is gone by now."""
        self.close()
        gc.collect()
        self._destroyed_groups = []

    def _end_after_peers_reported(self, cause: BaseException | None, grace: float) -> None:
        """Once this rank has reported how it ended: say so in the store, and if it stopped because other ranks
        failed, wait (at most ``grace`` seconds) until they have reported theirs. torchrun ends every rank as soon as
        one exits with an error: without the wait, the ranks that only know "another rank failed" would end the
        rank that is still writing the report of what failed."""
        assert self._store is not None
        try:
            self._store.set(f"{_ENDED}/{self.rank}", "1")
            peers = getattr(cause, "peers_reporting", ())
            if peers:
                self._store.wait([f"{_ENDED}/{rank}" for rank in peers], datetime.timedelta(seconds=grace))
        except (RuntimeError, dist.DistError):  # the wait timed out, or the store went with rank 0: nothing to wait for
            pass

    def gather(self, value: Any) -> list[Any]:
        """``value`` (plain data, CPU tensors) of every rank, in rank order; a collective every rank calls."""
        values: list[Any] = [None] * self.size
        dist.all_gather_object(values, value, group=self._cpu_group)
        return values

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` summed over all ranks."""
        values = values.clone()
        dist.all_reduce(values)
        return values


def _init_process_group(backend: str) -> dist.Store:
    """The process group on the store of torchrun's rendezvous, under a prefix of this attempt; returns the store.

    An elastic restart (``torchrun --max-restarts``) reuses the agent's store, which still holds the
    failed attempt's keys: gloo then connects to the dead workers' addresses ("connectFullMesh ...
    Connection refused"). Keys under ``TORCHELASTIC_RESTART_COUNT`` are this attempt's alone.
    """
    store, rank, size = next(dist.rendezvous("env://"))
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if attempt is not None:  # started by torchrun's agent: earlier attempts' keys are in its store
        store = dist.PrefixStore(f"attempt{attempt}", store)
    dist.init_process_group(backend, store=store, rank=rank, world_size=size)
    return store


def ask_to_stop(state: Any, reason: str, requeue: bool = False) -> None:
    """Stop training with a checkpoint at the next update boundary; under torch.distributed, at the first one
    that every rank stops at (``Distributed.ask_to_stop``), every rank then knowing whether one asked to ``requeue``."""
    if state.distributed is None:
        state.control.stop(reason)
    else:
        state.distributed.ask_to_stop(reason, requeue)


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
