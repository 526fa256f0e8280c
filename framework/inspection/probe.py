"""Re-running ``train_step`` before the first step, isolated from the real run: the probe session.

The first-step checks (loss inputs, padding, batch independence, device) look at the first batch by
running the user's step again. A check never changes what the user's code does, so each such run
happens on a copy of the model that shares its parameters and owns everything else (buffers, and
the Python state of every module: step counters, caches, lazy initialisation), in eval mode, with
the random generators, the parameters' gradients, output and warnings as they were. All checks of
a run share one ``ProbeSession``; the run on the unchanged batch happens once for all of them
(``real_run``). An exception that the user's code raises there is the user's error: it propagates
from the user's frame (``ipython --pdb`` lands there) with a note naming the check. A run on a
changed batch or model (fewer sequences, changed padding, meta tensors) that fails is a limit of
that probe: the check says so in one line.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from framework.core.rng import get_rng_state, set_rng_state
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.core.step import run_step
from framework.inspection.tensors import floating_tensors

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


def model_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` to run the user's code on without changing it: it shares the parameters (no memory
    for the weights; their gradients are the caller's to restore) and owns everything else (buffers, the
    Python state of every module)."""
    return copy.deepcopy(model, {id(p): p for p in model.parameters()})


class ProbeLimit(Exception):
    """A changed-batch or changed-model run of a check failed: the check cannot judge this model."""

    def __init__(self, check: str, cause: BaseException):
        super().__init__(f"{check}: {why_not(cause)}")
        self.cause = cause


@dataclass
class ProbeRun:
    """One run of ``train_step`` on a copy of the model."""

    model: torch.nn.Module  # the copy it ran on
    run_ctx: RunCtx
    outputs: list[torch.Tensor]  # the floating-point tensors the model's forward returned, detached


Observer = Callable[[torch.nn.Module], contextlib.AbstractContextManager]


class ProbeSession:
    """The first step's re-runs of ``train_step``: each isolated, the unchanged-batch run shared by all checks."""

    def __init__(self, state: RunState):
        self.state = state
        self.runs: list[str] = []  # the check of each run, in order
        self._real: ProbeRun | None = None

    @contextlib.contextmanager
    def isolated(self) -> Iterator[torch.nn.Module]:
        """A fresh copy of the model in eval mode; within the block the user's output and warnings are
        swallowed, afterwards the random generators and the parameters' gradients are as they were."""
        grads = [(p, p.grad) for p in self.state.model.parameters()]
        model = model_copy(self.state.model)
        model.eval()
        try:
            with unseen():
                yield model
        finally:
            for p, grad in grads:
                p.grad = grad

    def real_run(self, check: str, observe: tuple[Observer, ...] = ()) -> ProbeRun:
        """``train_step`` on the unchanged first batch (once per session: later calls get the same run).

        ``observe`` (contexts built on the copy of the model, active during the run) only take
        effect for the check whose call makes the run. An exception from the user's code
        propagates, as the user's error, with a note naming ``check``.
        """
        if self._real is None:
            with self.isolated() as model:
                outputs: list[torch.Tensor] = []
                handle = model.register_forward_hook(
                    lambda _m, _a, out: outputs.extend(t.detach().clone() for t in floating_tensors(out))
                )
                try:
                    with contextlib.ExitStack() as stack:
                        for factory in observe:
                            stack.enter_context(factory(model))
                        run_ctx = self._run(check, model, self.state.batch, changed=False)
                finally:
                    handle.remove()
            self._real = ProbeRun(model, run_ctx, outputs)
        return self._real

    def changed_run(self, check: str, model: torch.nn.Module, batch: dict[str, Any]) -> RunCtx:
        """``train_step`` on a changed batch or model (inside ``isolated``); a failure raises ``ProbeLimit``."""
        return self._run(check, model, batch, changed=True)

    def _run(self, check: str, model: torch.nn.Module, batch: dict[str, Any], changed: bool) -> RunCtx:
        state = self.state
        self.runs.append(check)
        try:
            return run_step(state.config, model, batch, "train", epoch=max(state.epoch, 1), step=state.global_step)
        except Exception as exc:
            if changed or raised_by_framework(exc):
                raise ProbeLimit(check, exc) from exc
            exc.add_note(
                f"(Raised while the {check} ran train_step on a copy of the model before the first training step; "
                f"the first step would raise it too. debug_first_step_reruns = False turns these runs off.)"
            )
            raise

    def release(self) -> None:
        """Drop the shared run (its graph and the model copy)."""
        self._real = None

    def summary(self) -> str:
        """How many extra runs of train_step the checks made, and for which check."""
        counts = {check: self.runs.count(check) for check in dict.fromkeys(self.runs)}
        detail = ", ".join(f"{check} {n}" for check, n in counts.items())
        return f"train_step ran {len(self.runs)} extra time(s) on copies of the model" + (
            f" ({detail})" if detail else ""
        )


def raised_by_framework(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc`` is the framework's own code (a check's limit, not the user's error)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(_PACKAGE)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


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
