"""Running ``train_step`` on a changed copy of a batch without touching the run.

The checks of the first step (device dry run, padding, batch independence) run the model a few
extra times. Such a run leaves no trace: what the user's code prints is swallowed, warnings it
raises are neither shown nor remembered (the real step shows them), ``debug_shell`` calls do
nothing, and random generators, parameter gradients, buffers and the train/eval mode are as they
were.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from framework.core.rng import get_rng_state, set_rng_state
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.core.step import run_step

_probing = False


class _ThisThreadSilenced:
    """A stream that drops what the current thread writes and passes on the other threads' output.

    ``sys.stdout`` is global: stack dumps relayed by a thread, or a progress thread, must still
    come through while the user's prints in a probe run are swallowed.
    """

    def __init__(self, stream: Any):
        self._stream = stream
        self._thread = threading.get_ident()

    def write(self, text: str) -> int:
        if threading.get_ident() == self._thread:
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def probing() -> bool:
    """Whether a probe run is in progress (user-facing side effects such as shells should not happen)."""
    return _probing


@contextlib.contextmanager
def unseen() -> Iterator[None]:
    """Within the block, output and warnings of the user's code are swallowed and RNG states kept."""
    global _probing
    rng = get_rng_state()
    previous, _probing = _probing, True
    try:
        with (
            contextlib.redirect_stdout(_ThisThreadSilenced(sys.stdout)),
            contextlib.redirect_stderr(_ThisThreadSilenced(sys.stderr)),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        _probing = previous
        set_rng_state(rng)


@contextlib.contextmanager
def side_effect_free(state: RunState) -> Iterator[None]:
    """Within the block the model is in eval mode and unseen; afterwards gradients, buffers and mode are restored."""
    model = state.model
    grads = [(p, p.grad) for p in model.parameters()]
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    was_training = model.training
    model.eval()
    try:
        with unseen():
            yield
    finally:
        model.train(was_training)
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
        for p, grad in grads:
            p.grad = grad


def probe_step(state: RunState, batch: dict[str, torch.Tensor]) -> RunCtx:
    """``train_step`` on ``batch`` (call inside ``side_effect_free``)."""
    return run_step(state.config, state.model, batch, "train", epoch=max(state.epoch, 1), step=state.global_step)


def why_not(exc: BaseException) -> str:
    """A one-line reason for a probe that could not run."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text if len(text) <= 120 else text[:117] + '...'}"


def real_frames(batch: dict[str, Any], key: str) -> torch.Tensor | None:
    """[B, T] True at the real frames of a variable-length key, False at its padding (None: no ``:seq_len``)."""
    lengths = batch.get(key + ":seq_len")
    if lengths is None or batch[key].dim() < 2:
        return None
    values = batch[key]
    return torch.arange(values.shape[1], device=values.device)[None, :] < lengths.to(values.device)[:, None]


def padding_mask(batch: dict[str, Any], key: str) -> torch.Tensor | None:
    """[B, T] True at the padded frames of a variable-length key (None: no padding in this batch)."""
    real = real_frames(batch, key)
    return ~real if real is not None and not bool(real.all()) else None
