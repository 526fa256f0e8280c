"""Replicas that disagree under torch.distributed (``debug_replica_check_interval``, on by default).

Data-parallel training is right only while every rank holds the same parameters: DDP averages the
gradients, so every rank applies the same update. Whatever breaks this lets the replicas drift
apart without an error, and rank 0 checkpoints just one of them: ``train_step`` calling
``model.module(...)`` (DDP's forward is bypassed, so its backward hooks average nothing), parameters
added, replaced or unfrozen after DDP wrapped the model (DDP averages only the parameters that
required a gradient when it was built), weights loaded or re-initialised on some ranks only, an
update skipped or a parameter changed on one rank.

Each rank reduces every parameter to its sum and sum of squares in float64; one all-reduce (MAX of
``[v, -v]``) gives every rank the largest and smallest value of each, so all ranks reach the same
decision. A check costs about one extra all-reduce of a small vector: on 2 CPU ranks about one step
of a tiny model, so the default interval of 200 updates keeps it near 0.5% of a step (with NCCL on
GPUs, far less). Compared: at the first update of the process (before the optimizer
step, together with the gradients: the earliest evidence that DDP did not average them), every
``debug_replica_check_interval`` updates, and at every epoch end, before rank 0 writes the
checkpoint. Replicas that differ stop the run on every rank with an error that names the first
differing parameter, the ranks, the largest difference and the likely cause: a run whose replicas
differ trains nothing a checkpoint could represent.

Not compared: buffers (DDP broadcasts rank 0's at each forward, so running statistics differ
between ranks after every training forward by design) and, with ``param_sync_step = K``, the
replicas between two averagings (they differ there by design; gradients are not averaged at all).
The interrupted checkpoint is not preceded by a check: a stop request may reach the ranks at
different steps, and a collective on only some of them would hang. Under FSDP there are no replicas
(each rank holds a slice of every parameter), so there is nothing to compare: the check is off.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from framework.base import log
from framework.base.config import Config
from framework.base.errors import FrameworkError
from framework.base.options import register
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_replica_check_interval",
    "int",
    200,
    "torch_distributed: compare parameter checksums across ranks every this many updates, at the first update "
    "(with the gradients) and before every checkpoint; stop when the replicas differ (0: off).",
    __name__,
    range="[0, inf)",
)

# Replicas of a correct run are bitwise equal (the same update from the same averaged gradient), so any
# difference is a finding; the tolerance only absorbs rounding that may differ between ranks (other GPU
# models, nondeterministic kernels: about one float32 unit, 1e-7, per entry). ``disagreement`` never exceeds
# the relative distance |a - b| / |a| of two replicas (to first order), so such rounding cannot trip it, while
# replicas that started apart, or drifted for an update, score 1e-4 and more.
TOLERANCE = 1e-6
OFF = "debug_replica_check_interval = 0 turns this check off"


class ReplicasDiverged(FrameworkError):
    """The ranks of a distributed run hold different parameters (or gradients DDP should have averaged)."""


def checksums(tensors: list[torch.Tensor | None]) -> torch.Tensor:
    """Per tensor its float64 sum, sum of squares and whether it exists (a missing gradient: zeros), stacked
    into one vector on the tensors' device (no host sync)."""
    device = next((t.device for t in tensors if t is not None), torch.device("cpu"))
    zero = torch.zeros((), dtype=torch.float64, device=device)
    sums = [zero if t is None else t.detach().sum(dtype=torch.float64) for t in tensors]
    squares = [zero if t is None else torch.linalg.vector_norm(t.detach(), dtype=torch.float64) ** 2 for t in tensors]
    present = [zero if t is None else zero + 1 for t in tensors]
    # A non-finite entry on one rank must still read as a difference, not as NaN that compares false.
    return torch.nan_to_num(torch.stack(sums + squares + present), nan=1e300, posinf=1e301, neginf=-1e301)


def disagreement(low: torch.Tensor, high: torch.Tensor, numels: list[int]) -> torch.Tensor:
    """Per tensor how far apart the ranks are, from the smallest and largest value of each ``checksums`` entry
    over the ranks: the spread of the sum over sqrt(numel) norm and of the sum of squares over 2 norm² (each at
    most the relative distance |a - b| / |a| of two ranks' tensors, to first order), or 1 where one rank lacks it."""
    n = len(numels)
    spread = high - low
    norm = high[n : 2 * n].clamp_min(0).sqrt() + 1e-30
    size = torch.tensor(numels, dtype=torch.float64).sqrt()
    by_sum = spread[:n] / (size * norm)
    by_squares = spread[n : 2 * n] / (2 * norm.square())
    return torch.maximum(torch.maximum(by_sum, by_squares), spread[2 * n :].clamp_max(1))


class ReplicaCheck(Plugin):
    """Compares the parameters (and once the gradients) of all ranks; stops a run whose replicas differ."""

    order = Order.CHECK

    def __init__(self, interval: int):
        self.interval = interval
        self.updates = 0
        self.next_check = interval

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> ReplicaCheck | None:
        interval = config.int("debug_replica_check_interval")
        replicated = state.distributed is not None and state.distributed.fsdp is None
        return cls(interval) if interval and replicated else None

    @on(Event.BEFORE_OPTIMIZER_STEP, once=True)
    def compare_gradients(self, state: RunState) -> None:
        """At an update whose gradients DDP has just averaged (the first of the process, and the first after a
        change of what the optimizer trains): the earliest evidence that gradients are not averaged."""
        with_gradients = state.distributed.param_sync_step is None
        when = "before the first update of this process" if not self.updates else f"before update {self.updates + 1}"
        self._compare(state, f"{when} ({_step(state)})", with_gradients)

    @on(Event.EPOCH_START)
    def model_changed(self, state: RunState) -> None:
        """Parameters trained now that DDP does not average (unfrozen or added in a callback): compare the
        gradients of the next update (a host-side look at the parameters, once per epoch)."""
        if self.updates and state.distributed.param_sync_step is None and not_averaged(state):
            self.callbacks.on(Event.BEFORE_OPTIMIZER_STEP, self.compare_gradients, self.order, once=True)

    @on(Event.AFTER_OPTIMIZER_STEP)
    def periodic(self, state: RunState) -> None:
        self.updates += 1
        if self.updates >= self.next_check and state.distributed.params_in_sync:
            self.next_check = self.updates + self.interval
            self._compare(state, f"after update {self.updates} of this process ({_step(state)})", False)

    @on(Event.EPOCH_END)
    def before_checkpoint(self, state: RunState) -> None:
        if state.distributed.params_in_sync:
            self._compare(state, f"at the end of epoch {state.epoch}, before its checkpoint", False)

    def _compare(self, state: RunState, when: str, with_gradients: bool) -> None:
        """One all-reduce; on a difference (the same decision on every rank) name it and stop every rank."""
        named = list(state.model.named_parameters())
        tensors: list[torch.Tensor | None] = [p for _, p in named]
        if with_gradients:  # of what the optimizer updates: a gradient nothing applies cannot make replicas differ
            updated = {id(p) for group in state.optimizer.param_groups for p in group["params"]}
            tensors += [p.grad if id(p) in updated else None for _, p in named]
        local = checksums(tensors)
        both = torch.cat([local, -local])
        dist.all_reduce(both, op=dist.ReduceOp.MAX)
        both = both.cpu()
        high, low = both[: len(local)], -both[len(local) :]
        numels = [t.numel() if t is not None else 1 for t in tensors]
        differs = (disagreement(low, high, numels) > TOLERANCE).tolist()
        if with_gradients and _ddp_waits_for_unused(state, [p for _, p in named], high):
            differs = differs[: len(named)]  # DDP raises at the next forward, naming them (distributed.py)
        if any(differs):
            error = ReplicasDiverged(self._report(state, when, [n for n, _ in named], tensors, local, differs))
            if state.distributed.rank != 0:  # its report refers to rank 0's: wait for that before exiting
                error.peers_reporting = (0,)
            raise error
        compared = f"{len(named)} parameters" + (" and their gradients" if with_gradients else "")
        log.v5(f"Replica check {when}: {compared} equal on all {state.distributed.size} ranks.")

    def _report(
        self,
        state: RunState,
        when: str,
        names: list[str],
        tensors: list[torch.Tensor | None],
        local: torch.Tensor,
        differs: list[bool],
    ) -> str:
        """The error paragraph: the first differing gradient (else parameter), its ranks and size, the cause.

        Collective like the check itself: every rank takes part; rank 0's text explains, the others' refer to it.
        """
        n = len(names)
        bad_grads = [names[i - n] for i in range(n, len(differs)) if differs[i]]
        bad = bad_grads or [names[i] for i in range(n) if differs[i]]
        first = n + names.index(bad_grads[0]) if bad_grads else names.index(bad[0])
        ranks = _ranks_like_rank_0(local, first, len(tensors))
        largest, scale = _largest_difference(tensors[first], local.device)
        what = f"the {'gradient of ' if bad_grads else ''}parameter {bad[0]!r}"
        more = f" (and {len(bad) - 1} more of {n})" if len(bad) > 1 else ""
        if state.distributed.rank != 0:  # one explanation in the job's output: rank 0's
            return f"The replicas of the model on the ranks differ {when}, first in {what}: all ranks stop; rank 0 says why."
        return (
            f"The replicas of the model on the ranks differ {when}: {what}{more} differs between ranks: {ranks}; the "
            f"largest difference of one entry is {largest:.3g} (the largest entry on rank 0: {scale:.3g}). "
            f"{_cause(state, bad_grads, self.updates)} Rank 0 writes only its own replica into checkpoints, "
            f"so this run stops before writing one. ({OFF}.)"
        )


def _ddp_waits_for_unused(state: RunState, params: list[torch.nn.Parameter], high: torch.Tensor) -> bool:
    """Whether a parameter DDP averages got a gradient on no rank while ``find_unused_parameters`` is off: DDP then
    waits for it and leaves its bucket (possibly all gradients) unaveraged, and its own error follows."""
    if state.distributed.find_unused_parameters:
        return False
    n = len(params)
    present = high[3 * n :]  # gradient presence, the largest over the ranks
    return any(state.distributed.wrapped_params.get(id(p)) and not present[i] for i, p in enumerate(params))


def _step(state: RunState) -> str:
    return f"epoch {state.epoch}, step {state.step_in_epoch}, global step {state.global_step}"


def _ranks_like_rank_0(local: torch.Tensor, index: int, count: int) -> str:
    """Which ranks agree with rank 0 on tensor ``index`` of ``checksums`` (its sum, square sum and presence)."""
    gathered = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, local)
    entries = [g[[index, count + index, 2 * count + index]].cpu() for g in gathered]
    same = [r for r, e in enumerate(entries) if torch.allclose(e, entries[0], rtol=TOLERANCE, atol=0)]
    other = [r for r in range(len(entries)) if r not in same]
    return f"{_ranks(other)} {'has' if len(other) == 1 else 'have'} other values than {_ranks(same)}"


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _largest_difference(tensor: torch.Tensor | None, device: torch.device) -> tuple[float, float]:
    """The largest entry-wise difference of ``tensor`` to rank 0's over all ranks, and rank 0's largest entry
    (a missing gradient counts as zeros)."""
    reference = torch.zeros((), device=device) if tensor is None else tensor.detach().clone()
    numel = torch.tensor([reference.numel()], device=device)
    dist.all_reduce(numel, op=dist.ReduceOp.MAX)
    if reference.numel() != numel.item():  # a missing gradient here, a real one elsewhere
        reference = torch.zeros(int(numel.item()), device=device)
    reference = reference.reshape(-1).float()
    mine = reference.clone()
    dist.broadcast(reference, src=0)
    largest = (mine - reference).abs().max().reshape(1).double()
    dist.all_reduce(largest, op=dist.ReduceOp.MAX)
    return float(largest.item()), float(reference.abs().max().item())


def not_averaged(state: RunState) -> list[tuple[str, bool]]:
    """The parameters the optimizer trains whose gradients DDP does not average: (name, whether the model had it
    when DDP wrapped it, frozen then) or (name, False: added since)."""
    wrapped = state.distributed.wrapped_params
    trained = {id(p) for group in state.optimizer.param_groups for p in group["params"]}
    return [
        (name, id(p) in wrapped)
        for name, p in state.model.named_parameters()
        if p.requires_grad and id(p) in trained and not wrapped.get(id(p))
    ]


def _cause(state: RunState, bad_grads: list[str], updates: int) -> str:
    """Why the replicas differ, from which gradients differ and how the model changed since it was wrapped."""
    distributed = state.distributed
    named = list(state.model.named_parameters())
    changes = not_averaged(state)
    added = [name for name, was_there in changes if not was_there]
    unfrozen = [name for name, was_there in changes if was_there]
    averaged = [n for n, p in named if distributed.wrapped_params.get(id(p)) and (p.grad is not None or n in bad_grads)]
    if bad_grads and averaged and set(averaged) <= set(bad_grads):
        return (
            "Gradients were never averaged across ranks: train_step did not call the model it was given (DDP's "
            "forward) but model.module(...) or a submodule of it, and without DDP's forward its backward hooks do "
            "not all-reduce, so each rank trains its own replica on its own batches. Call model(...) in train_step; "
            "reach attributes through model.module, but run the forward through the wrapper."
        )
    changed = [f"{_listed(added)} were added to the model after DDP wrapped it"] if added else []
    changed += [f"{_listed(unfrozen)} were frozen when DDP wrapped the model"] if unfrozen else []
    if changed and distributed.param_sync_step is None:
        return (
            f"DDP averages the gradients of exactly the parameters that required a gradient when it wrapped the "
            f"model, but {' and '.join(changed)} (a submodule replaced or converted, parameters created or unfrozen "
            f"in a callback or in train_step): their gradients are not averaged, so every rank updates them "
            f"differently. Build the complete model in get_model with its final requires_grad; to train a part "
            f"later, keep it trainable and give its parameters learning rate 0 until then."
        )
    if bad_grads:
        return (
            "DDP averages gradients into the same values on every rank, so something changed them afterwards on "
            "some ranks only (a gradient hook or callback that depends on the rank or on local data)."
        )
    ddp = distributed.param_sync_step is None
    start = "DDP made the replicas equal when it wrapped the model" if ddp else "The replicas started equal"
    since = "no update ran since" if not updates else "updates keep them equal"
    since += " (the gradients were equal at the first update)" if updates and ddp else ""
    later = "" if not updates else ", or an update skipped or a parameter changed on some ranks only"
    fix = "" if not updates else "; decide to skip an update from values summed over the ranks"
    return (
        f"{start} and {since}, so code changed the parameters of some ranks only: weights loaded or re-initialised "
        f"on some ranks only after the model was wrapped (a load under `if rank == 0`, an init after a seed that "
        f"depends on the rank, in a callback or in train_step){later}. Load and initialise in get_model, the same "
        f"on every rank{fix}."
    )


def _listed(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:4])
    return f"the parameters {shown}" + (f" and {len(names) - 4} more" if len(names) > 4 else "")


PLUGINS = (ReplicaCheck,)
