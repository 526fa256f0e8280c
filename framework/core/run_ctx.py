"""The run context handed to ``train_step`` / ``forward_step``: where losses and outputs go.

``framework.get_run_ctx()`` returns the context of the step that is running.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from framework.base.config import get_global_config
from framework.base.errors import ConfigError
from framework.base.host_syncs import host_value
from framework.base.returnn_options import is_returnn_config


def returnn_convention() -> bool:
    """Whether the running config is a RETURNN config (``backend`` or ``behavior_version`` set): its losses and its
    gradient accumulation then follow RETURNN's torch engine where this framework's own convention differs."""
    try:
        return is_returnn_config(get_global_config())
    except ConfigError:  # no config loaded: a step run by a test or a tool
        return False


@dataclass
class MarkedLoss:
    """One loss of a step, as given to ``mark_as_loss``."""

    name: str
    loss: torch.Tensor
    scale: float
    as_error: bool
    custom_inv_norm_factor: torch.Tensor | float | None
    optimize_sum: bool = False  # RETURNN's use_normalized_loss=False: the optimizer sees the sum
    optimizer: tuple[str, ...] | None = None  # the optimizers (of several) whose parameters it trains
    _read: tuple[float, float | None] | None = field(default=None, repr=False, compare=False)

    def host_values(self) -> tuple[float, float | None]:
        """The loss and its normalization factor as Python numbers, read once per step (the guard and the epoch
        scores both need them). Only where they are CPU tensors: a read waits for nothing there."""
        if self._read is None:
            norm = self.custom_inv_norm_factor
            self._read = host_value(self.loss), host_value(norm) if isinstance(norm, torch.Tensor) else norm
        return self._read

    def normalized(self) -> torch.Tensor:
        """The loss divided by its normalization factor (RETURNN convention: loss is a sum then)."""
        if self.custom_inv_norm_factor is None:
            return self.loss
        return self.loss / self.custom_inv_norm_factor

    def optimized(self) -> torch.Tensor:
        """What the optimizer minimizes (before ``scale``): the sum or the normalized loss."""
        return self.loss if self.optimize_sum else self.normalized()


@dataclass
class MarkedOutput:
    """One output of a forward step, as given to ``mark_as_output``."""

    name: str
    tensor: torch.Tensor
    seq_len: torch.Tensor | None


class RunCtx:
    """Collects the losses (training, evaluation) or outputs (forward) of one step."""

    def __init__(
        self,
        *,
        stage: str,
        epoch: int,
        step: int,
        batch: dict[str, Any] | None = None,
        summaries: Any = None,
        autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
        optimizers: tuple[str, ...] | None = None,
    ):
        """``optimizers``: the names of the run's optimizers (the ``optimizers`` option), () for the one
        ``optimizer``, None where unknown (then ``mark_as_loss`` does not check its ``optimizer`` argument)."""
        self.stage = stage
        self.optimizers = optimizers
        self.epoch = epoch
        self.step = step
        self.batch = batch
        self.summaries = summaries
        self.autocast = autocast  # entered around the step function (torch_amp)
        self.losses: dict[str, MarkedLoss] = {}
        self.outputs: dict[str, MarkedOutput] = {}

    @property
    def train_flag(self) -> bool:
        """True while training (as opposed to evaluating or forwarding)."""
        return self.stage == "train"

    def mark_as_loss(
        self,
        loss: torch.Tensor,
        name: str,
        *,
        scale: float = 1.0,
        as_error: bool = False,
        use_normalized_loss: bool | None = None,
        custom_inv_norm_factor: torch.Tensor | float | None = None,
        optimizer: str | tuple[str, ...] | None = None,
    ) -> None:
        """Register a loss. ``as_error`` losses (e.g. frame error rate) are reported, not optimized.

        A scalar ``loss`` is used as it is; with ``custom_inv_norm_factor`` (RETURNN's convention) it
        is a sum, and the reported value is ``loss / custom_inv_norm_factor``; so is the optimized one,
        except in a RETURNN config (``returnn_convention``), where the optimizer sees the sum unless
        ``use_normalized_loss=True``, as RETURNN's ``Loss.get_scaled_reduced_loss`` gives it.

        A loss of any other shape (per frame, per sequence) is RETURNN's: it is summed, and reported
        divided by its number of entries (or by ``custom_inv_norm_factor``), so epoch scores average
        over all frames of the dataset; the optimizer sees the sum, or the normalized value with
        ``use_normalized_loss=True``. Booleans (frame errors) count as 0/1.

        With several optimizers (the ``optimizers`` option), ``optimizer`` names the one (or a tuple: the ones)
        whose parameters this loss trains; it reaches no other parameters.
        """
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"mark_as_loss(name={name!r}): loss must be a torch.Tensor, got {type(loss).__name__}")
        if name in self.losses:
            raise ValueError(f"mark_as_loss: a loss named {name!r} was already marked in this step")
        optimizers = self._optimizers_of(name, optimizer, as_error)
        if isinstance(custom_inv_norm_factor, torch.Tensor) and custom_inv_norm_factor.dim() > 0:
            custom_inv_norm_factor = custom_inv_norm_factor.sum()
        per_entry = loss.dim() != 0
        if per_entry:
            if not loss.is_floating_point():
                loss = loss.float()
            if custom_inv_norm_factor is None:
                custom_inv_norm_factor = loss.numel()
            loss = loss.sum()
        # RETURNN optimizes the sum unless use_normalized_loss; a scalar keeps our documented normalized default,
        # except in a RETURNN config, whose scalar is optimized as given, as in RETURNN
        optimize_sum = use_normalized_loss is False or (
            use_normalized_loss is None and (per_entry or returnn_convention())
        )
        self.losses[name] = MarkedLoss(
            name, loss, float(scale), bool(as_error), custom_inv_norm_factor, optimize_sum, optimizers
        )

    def _optimizers_of(
        self, name: str, optimizer: str | tuple[str, ...] | None, as_error: bool
    ) -> tuple[str, ...] | None:
        """``mark_as_loss``'s ``optimizer`` as a tuple of names, checked against the run's optimizers."""
        names = (optimizer,) if isinstance(optimizer, str) else tuple(optimizer) if optimizer is not None else None
        declared = self.optimizers
        if declared is None or (names is None and (as_error or not declared)):
            return names
        if not declared:
            raise ValueError(
                f"mark_as_loss(name={name!r}, optimizer={optimizer!r}): the config has one optimizer (the "
                f"'optimizer' option); to train parts of the model with their own optimizers, declare them in "
                f"optimizers = {{name: {{'params': ..., 'class': ...}}}}"
            )
        if names is None:
            raise ValueError(
                f"mark_as_loss(name={name!r}): the config declares several optimizers ({', '.join(declared)}); "
                f"say which one this loss trains: mark_as_loss(..., optimizer={declared[0]!r})"
            )
        unknown = [n for n in names if n not in declared]
        if unknown:
            raise ValueError(
                f"mark_as_loss(name={name!r}, optimizer={optimizer!r}): no optimizer named "
                f"{', '.join(map(repr, unknown))}; the config declares {', '.join(declared)}"
            )
        return names

    def mark_as_output(self, tensor: torch.Tensor, name: str, *, seq_len: torch.Tensor | None = None) -> None:
        """Register a forward output [batch, ...]; ``seq_len`` gives the lengths of its axis 1 if variable."""
        if name in self.outputs:
            raise ValueError(f"mark_as_output: an output named {name!r} was already marked in this step")
        self.outputs[name] = MarkedOutput(name, tensor, seq_len)

    def mark_as_default_output(self, tensor: torch.Tensor, *, seq_len: torch.Tensor | None = None) -> None:
        """RETURNN's ``mark_as_default_output``: ``mark_as_output(tensor, "output")``.

        Outputs are [batch, ...] tensors, so RETURNN's ``shape`` (its dims) has no counterpart; give
        ``seq_len`` (e.g. ``extern_data["data:seq_len"]``) when axis 1 has a variable length.
        """
        self.mark_as_output(tensor, "output", seq_len=seq_len)

    def log_image(self, name: str, image: torch.Tensor, *, dataformats: str = "CHW") -> None:
        """Log an image (values in [0, 1]) to TensorBoard, e.g. reconstructions; needs ``tensorboard_dir``."""
        self._summary().image(f"{self.stage}/{name}", image, self.step, dataformats)

    def log_scalar(self, name: str, value: float | torch.Tensor) -> None:
        """Log a scalar of your own to TensorBoard; needs ``tensorboard_dir``."""
        self._summary().scalar(f"{self.stage}/{name}", float(value), self.step)

    def _summary(self) -> Any:
        if self.summaries is None:
            raise RuntimeError("run_ctx.log_image/log_scalar need TensorBoard: set tensorboard_dir in the config")
        return self.summaries

    def __enter__(self) -> RunCtx:
        """Within the block, ``get_run_ctx()`` returns this context; after it, the one before again."""
        global _current
        self._previous, _current = _current, self
        return self

    def __exit__(self, *exc: Any) -> None:
        global _current
        _current = self._previous

    def total_loss(self, weights: dict[str, float] | None = None) -> torch.Tensor:
        """Sum of scale * normalized loss over the losses that are optimized, each also times ``weights[name]``
        when given (how much each loss of a micro-batch counts in its accumulation window)."""
        total = None
        for _, term in self.weighted_terms(weights):
            total = term if total is None else total + term
        return total

    def weighted_terms(self, weights: dict[str, float] | None = None) -> list[tuple[MarkedLoss, torch.Tensor]]:
        """Per optimized loss, what it adds to the total: scale * normalized loss (times ``weights[name]`` when
        given). ValueError when the step marked no loss to optimize."""
        optimized = [m for m in self.losses.values() if not m.as_error]
        if not optimized:
            names = ", ".join(self.losses) or "none"
            raise ValueError(
                f"train_step marked no loss to optimize (marked: {names}); call "
                f"run_ctx.mark_as_loss(loss, name) with as_error=False for at least one loss"
            )
        terms = []
        for marked in optimized:
            factor = marked.scale * (weights[marked.name] if weights is not None else 1.0)
            terms.append((marked, marked.optimized() if factor == 1.0 else marked.optimized() * factor))
        return terms


_current: RunCtx | None = None


def get_run_ctx() -> RunCtx:
    """The run context of the step that is running."""
    if _current is None:
        raise RuntimeError("get_run_ctx() called outside of a train/forward step")
    return _current
