"""Re-running ``train_step`` before the first step, isolated from the real run: the probe session.

The first-step checks (loss inputs, padding, batch independence, device) look at the first batch by
running the user's step again. A check never changes what the user's code does, so each such run
happens on a fresh copy of the model that shares its parameters and owns everything else (buffers,
and the Python state of every module: step counters, caches, lazy initialisation), with the random
generators, the parameters' gradients, output, log records and warnings as they were, and
TensorBoard summaries discarded. All checks of a run share one ``ProbeSession``; the run on the
unchanged batch happens once for all of them, in training mode like the real step
(``shared_run``). An exception that the user's code raises there is the user's error: it
propagates from the user's frame (``ipython --pdb`` lands there) with a note naming the check. A
run on a changed batch or model (fewer sequences, changed padding, meta tensors, eval mode) that
fails, or a model that cannot be copied, is a limit of that check (``ProbeLimit``): one line says so.

Not isolated: state outside the model (a module-level counter in the config, a file the step
writes) and parameters changed in place during a forward (``nn.Embedding(max_norm=...)``
renormalises the rows it looks up): the parameters are shared, not copied.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from framework.base import log
from framework.base.rng import get_rng_state, set_rng_state
from framework.check_library.sharded import is_sharded
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.core.step import run_step
from framework.core.store import Key

_probing = False
# Warnings attributed to the framework's own files come from its observation of a probe run (a torch function
# mode calling the user's op): not the user's or a library's warnings, never shown.
_FRAMEWORK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


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


class HeldOutput:
    """The log records and warnings of the probe run that the real first step repeats, held back until that step
    ran: then each is shown that the real step did not show itself (a library that warns once, through
    ``logger.warning_once`` or torch's ``TORCH_WARN_ONCE``, or a warning Python shows once per place, would
    not warn again), so that a run shows them as a plain run does: once."""

    def __init__(self) -> None:
        self.records: list[tuple[logging.Handler, logging.LogRecord]] = []
        self.warnings: list[tuple] = []  # showwarning's arguments
        self._seen_records: set[tuple] = set()
        self._seen_warnings: set[tuple] = set()
        self._show: Any = None
        self._filters: dict[logging.Handler, logging.Filter] = {}
        self._released = False  # after release, what a probe run adds is shown at once

    def watch_real_step(self) -> None:
        """From now on until ``release``, note what is logged and warned (all of it still shown)."""
        seen_records, seen_warnings = self._seen_records, self._seen_warnings

        class _Note(logging.Filter):
            def __init__(self, handler: logging.Handler):
                super().__init__()
                self.handler = handler

            def filter(self, record: logging.LogRecord) -> bool:
                if not _probing:  # a probe's record is held back, not shown
                    seen_records.add((self.handler, _record_key(record)))
                return True

        for handler in _all_handlers():
            self._filters[handler] = _Note(handler)
            handler.addFilter(self._filters[handler])
        show = self._show = warnings.showwarning

        def note(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
            seen_warnings.add(_warning_key(message, category, filename, lineno))
            show(message, category, filename, lineno, file, line)

        warnings.showwarning = note

    def release(self) -> None:
        """Stop watching; show what was held back and not shown by the real step since ``watch_real_step``."""
        for handler, note in self._filters.items():
            handler.removeFilter(note)
        self._filters = {}
        if self._show is not None:
            warnings.showwarning, self._show = self._show, None
        for handler, record in self.records:
            if (handler, _record_key(record)) not in self._seen_records:
                self._seen_records.add((handler, _record_key(record)))  # once, also when the run was made twice
                handler.handle(record)
        for args in self.warnings:
            if _warning_key(*args[:4]) not in self._seen_warnings:
                self._seen_warnings.add(_warning_key(*args[:4]))
                warnings.showwarning(*args)
        self.records, self.warnings = [], []
        self._released = True

    def add(self, records: list[tuple[logging.Handler, logging.LogRecord]], shown: list[tuple]) -> None:
        """Hold ``records`` and warnings (showwarning's arguments) of a run that the real step repeats."""
        self.records += records
        self.warnings += shown
        if self._released:
            self.release()


def _record_key(record: logging.LogRecord) -> tuple:
    return record.name, record.levelno, record.getMessage()


def _warning_key(message: Any, category: Any, filename: str, lineno: int) -> tuple:
    return str(message), category, filename, lineno


def _all_handlers() -> set[logging.Handler]:
    handlers = set(logging.root.handlers)
    for logger in list(logging.Logger.manager.loggerDict.values()):
        handlers.update(getattr(logger, "handlers", ()))
    return handlers


class _OtherThreadsOnly(logging.Filter):
    """Holds back the log records of one thread (the probe's), except the framework's own: ``held`` keeps each
    with the handler it was meant for."""

    def __init__(self, handler: logging.Handler, held: list[tuple[logging.Handler, logging.LogRecord]]):
        super().__init__()
        self._thread = threading.get_ident()
        self._handler = handler
        self._held = held

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self._thread or record.name.startswith("framework"):
            return True
        self._held.append((self._handler, record))
        return False


@contextlib.contextmanager
def _logging_held(held: HeldOutput | None) -> Iterator[None]:
    """Within the block, what the user's code and its libraries log from this thread goes to ``held`` (None:
    nowhere)."""
    records: list[tuple[logging.Handler, logging.LogRecord]] = []
    filters = {handler: _OtherThreadsOnly(handler, records) for handler in _all_handlers()}
    for handler, hold in filters.items():
        handler.addFilter(hold)
    try:
        yield
    finally:
        for handler, hold in filters.items():
            handler.removeFilter(hold)
        if held is not None:
            held.add(records, [])


@contextlib.contextmanager
def _warnings_held(held: HeldOutput | None) -> Iterator[None]:
    """Within the block, the warnings this thread shows go to ``held``; with None they are dropped and forgotten:
    Python shows a warning once per place, and a dropped one must not keep the real run from showing it.

    The warning filters stay as they are (changing them would make Python forget which warnings it showed,
    so that the real step shows them again); only what showing does is replaced.
    """
    thread = threading.get_ident()
    show = warnings.showwarning
    shown: list[tuple[tuple, dict | None]] = []

    def hold(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        if threading.get_ident() != thread:
            show(message, category, filename, lineno, file, line)
            return
        shown.append(((message, category, filename, lineno, file, line), _registry(filename, lineno)))

    warnings.showwarning = hold
    try:
        yield
    finally:
        warnings.showwarning = show
        for args, registry in shown:
            if held is not None and not os.path.abspath(args[2]).startswith(_FRAMEWORK_DIR):
                held.add([], [args])
                continue
            text, category, lineno = str(args[0]), args[1], args[3]
            for key in ((text, category, lineno), (text, category, 0)):
                (registry or {}).pop(key, None)
            warnings.onceregistry.pop((text, category), None)


def _registry(filename: str, lineno: int) -> dict | None:
    """The ``__warningregistry__`` in which Python noted a warning it is showing now, from the stack: that of
    the frame at the warning's place."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == filename and frame.f_lineno == lineno:
            return frame.f_globals.get("__warningregistry__")
        frame = frame.f_back
    return None


@contextlib.contextmanager
def unseen(held: HeldOutput | None = None) -> Iterator[None]:
    """Within the block, the user's output, log records and warnings are held back and RNG states kept.

    The log records and warnings go to ``held`` (a run that the real step repeats unchanged: shown
    after that step, see ``HeldOutput``); without it they are dropped. Printed output is dropped
    either way (the real step prints it again).
    """
    global _probing
    rng = get_rng_state()
    previous, _probing = _probing, True
    try:
        with (
            contextlib.redirect_stdout(_ThisThreadSilenced(sys.stdout)),
            contextlib.redirect_stderr(_ThisThreadSilenced(sys.stderr)),
            _logging_held(held),
            _warnings_held(held),
        ):
            yield
    finally:
        _probing = previous
        set_rng_state(rng)


def model_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` to run the user's code on without changing it.

    It shares the parameters (no memory for the weights; their gradients are the caller's to
    restore) and owns everything else: buffers, the Python state of every module, and parameters
    a lazy module has not initialised yet (the copy initialises its own). Tensors a module keeps
    from an earlier forward (a stashed activation, part of a graph) are shared detached, as
    ``deepcopy`` cannot copy them. Raises what ``deepcopy`` raises for a model that cannot be
    copied (e.g. one holding a lock or an open file).
    """
    memo: dict[int, Any] = {
        id(p): p for p in model.parameters() if not isinstance(p, torch.nn.parameter.UninitializedParameter)
    }
    for module in model.modules():
        for value in vars(module).values():
            if isinstance(value, torch.Tensor) and not value.is_leaf:
                memo[id(value)] = value.detach()
    return copy.deepcopy(model, memo)


@contextlib.contextmanager
def in_place_updates_undone(model: torch.nn.Module) -> Iterator[list[str]]:
    """Put back the parameters of ``model`` that take no gradient when user code run on a copy (``model_copy`` shares
    the parameters) updated them in place: an EMA or momentum encoder that ``train_step`` moves. They are kept aside
    only when they are at most twice the size of the trained ones (a frozen base under adapters is not updated in
    place, and too large to keep twice). Yields a list that names, afterwards, the parameters changed in place and
    not put back."""
    named = list(model.named_parameters())
    before = [p._version for _, p in named]
    trained_bytes = sum(p.numel() * p.element_size() for _, p in named if p.requires_grad)
    fixed = [p for _, p in named if not p.requires_grad]
    small = sum(p.numel() * p.element_size() for p in fixed) <= 2 * trained_bytes
    kept = {p: p.detach().clone() for p in fixed} if small else {}
    left: list[str] = []
    try:
        yield left
    finally:
        for (name, p), version in zip(named, before, strict=True):
            if p._version == version:
                continue
            if p in kept:
                # through .data: the put-back values must not count as a change of a tensor that the user's own
                # graph (the real step's, alive across the checks that run between forward and backward) saved
                p.data.copy_(kept[p])
            else:
                left.append(name)


@contextlib.contextmanager
def parameters_kept(model: torch.nn.Module, run: str) -> Iterator[None]:
    """``in_place_updates_undone`` around a diagnostic's own run of the user's code on a copy of ``model`` (``run``
    names it), saying at verbosity 5 what it changed in place and could not put back."""
    with in_place_updates_undone(model) as left:
        yield
    if left:
        log.v5(f"{run} changed parameter {left[0]!r} of the model in place (not undone).")


def replace_parameters(model: torch.nn.Module, transform: Callable[[torch.Tensor], torch.Tensor | None]) -> None:
    """Give ``model`` (a copy: ``model_copy`` shares the parameters) new parameters ``transform(p)`` in place of
    those for which it returns a tensor; the shared originals are never written to."""
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None:
                continue
            with torch.no_grad():
                value = transform(param)
            if value is not None:
                module._parameters[name] = torch.nn.Parameter(value, requires_grad=param.requires_grad)


class ProbeLimit(Exception):
    """A run of a check could not be made or failed for a reason of the check's: it cannot judge this model."""

    def __init__(self, check: str, cause: BaseException):
        super().__init__(f"{check}: {why_not(cause)}")
        self.cause = cause


Observer = Callable[[torch.nn.Module], contextlib.AbstractContextManager]


class _DiscardedSummaries:
    """Where a probe's ``run_ctx.log_scalar`` / ``log_image`` go: nowhere (the real step logs them)."""

    def scalar(self, tag: str, value: float, step: int) -> None:
        pass

    def scalars(self, step: int, values: list[tuple[str, float]]) -> None:
        pass

    def image(self, tag: str, image: Any, step: int, dataformats: str) -> None:
        pass


class ProbeSession:
    """The first step's re-runs of ``train_step``: each on a fresh copy of the model, the run on the unchanged
    batch shared by all checks."""

    def __init__(self, state: RunState):
        self.state = state
        self.runs: list[str] = []  # the check of each run, in order
        self.limits: list[str] = []  # why runs could not be made or failed (ProbeLimit), in order
        self._made = False  # whether the shared run happened (it happens once)
        self._shared: RunCtx | None = None  # its run context, with the graph, until every watcher had it
        self._uncopyable: ProbeLimit | None = None  # set when the model cannot be copied: no check can run
        self._watchers: dict[str, Observer] = {}  # check -> its observer of the shared run, until served
        self._watch_failed: Exception | None = None  # the shared run failed only while observed
        self.held = HeldOutput()  # the shared run's log records and warnings, shown after the real first step

    @contextlib.contextmanager
    def isolated(self, check: str, train: bool = False, held: HeldOutput | None = None) -> Iterator[torch.nn.Module]:
        """A fresh copy of the model (eval mode, or training mode with ``train``); within the block the user's
        output, logging and warnings are swallowed (or held in ``held``: see ``unseen``), afterwards the random
        generators and the parameters' gradients are as they were. A model that cannot be copied raises
        ``ProbeLimit``."""
        if self._uncopyable is not None:
            raise self._uncopyable
        if any(is_sharded(p) for p in self.state.model.parameters()):
            # A copy cannot hold the shards, and a run would gather the parameters: a collective of all ranks.
            cause = RuntimeError(
                "FSDP shards the model, which cannot be copied: run the config in one process or under DDP for these "
                "checks"
            )
            self._uncopyable = self._limit(ProbeLimit("every first-step check", cause))
            raise self._uncopyable
        grads = [(p, p.grad) for p in self.state.model.parameters()]
        try:
            model = model_copy(self.state.model)
        except Exception as exc:  # deepcopy of a lock, a file, a custom __deepcopy__...: no isolated run possible
            cause = RuntimeError(f"the model cannot be copied ({why_not(exc)})")
            self._uncopyable = self._limit(ProbeLimit("every first-step check", cause))
            raise self._uncopyable from exc
        model.train(train)
        # cuDNN's RNN kernels take no backward pass in eval mode; the checks that take gradients through an
        # eval-mode copy would fail where the user's training runs (on a GPU), so that copy uses torch's own.
        rnn_kernels = contextlib.nullcontext() if train else torch.backends.cudnn.flags(enabled=False)
        left: list[str] = []
        try:
            with unseen(held), rnn_kernels, in_place_updates_undone(self.state.model) as left:
                yield model
        finally:
            for p, grad in grads:
                p.grad = grad
            if left:  # shared, not copied: e.g. nn.Embedding(max_norm=...) renormalises the rows it looks up
                self.limits.append(f"{check}: its run changed parameter {left[0]!r} in place (not undone)")

    def watch(self, check: str, observer: Observer) -> None:
        """Enter ``observer`` (a context built on the model copy) during the shared run, whichever check makes it.

        Register before any check asks for the run (at ``STEP_START`` in an earlier ``Order`` than the
        checks); the watching check then gets the run, with its graph, from ``shared_run(check)``.
        """
        if self._made:
            raise RuntimeError(f"{check} watches the shared run after it was made: register in an earlier Order.")
        self._watchers[check] = observer

    def shared_run(self, check: str) -> RunCtx | None:
        """``train_step`` on the unchanged first batch, in training mode as the real step (once per session).

        Every registered observer is active during it. An exception the user's code raises
        propagates as the user's error, with a note naming ``check``; a run that fails only while
        observed is the watchers' limit (``ProbeLimit`` for each of them). Returns the run context
        (with its graph) until every watcher has had it, None after.
        """
        if not self._made:
            self._make_shared_run(check)
        watched = self._watchers.pop(check, None) is not None
        run_ctx = self._shared
        if not self._watchers:  # every watcher served: no graph kept alive through the first step
            self._shared = None
        if watched and self._watch_failed is not None:
            raise ProbeLimit(check, self._watch_failed)
        return run_ctx

    def _make_shared_run(self, check: str) -> None:
        self._made = True
        observers = tuple(self._watchers.values())
        try:
            self._shared = self._run_unchanged(check, observers)
            return
        except Exception as exc:
            if not observers or isinstance(exc, ProbeLimit):
                raise
            failed = exc
        # An observer may be what failed: the unobserved run decides whose error it is (outside the except
        # block, so that the user's error is not shown chained to the observed run's).
        self._shared = self._run_unchanged(check, ())
        self._watch_failed = failed
        self.limits.append(f"the watched run of the first batch failed only while watched ({why_not(failed)})")

    def changed_run(
        self, check: str, model: torch.nn.Module, batch: dict[str, Any], stage: str = "train", optional: bool = False
    ) -> RunCtx:
        """``train_step`` on a changed batch or model (inside ``isolated``); a failure raises ``ProbeLimit``, listed
        in the summary as what could not be checked unless the run is ``optional`` (a variation the step need not
        support, such as longer sequences than the model takes: its failure leaves a question open, no check undone).

        ``stage="eval"`` runs it as the evaluation of a dev set does (``run_ctx.train_flag`` is False)."""
        try:
            return self._run(check, model, batch, stage)
        except Exception as exc:
            limit = ProbeLimit(check, exc)
            raise limit if optional else self._limit(limit) from exc

    def _run_unchanged(self, check: str, observe: tuple[Observer, ...]) -> RunCtx:
        with self.isolated(check, train=True, held=self.held) as model:
            try:
                with contextlib.ExitStack() as stack:
                    for factory in observe:
                        stack.enter_context(factory(model))
                    return self._run(check, model, self.state.batch)
            except Exception as exc:
                if not observe:  # what the real first step runs, the same way: the user's error
                    exc.add_note(
                        f"(Raised while the {check} ran train_step on a copy of the model before the first training "
                        f"step; the first step would raise it too. debug_first_step_reruns = False turns these runs "
                        f"off.)"
                    )
                raise

    def _run(self, check: str, model: torch.nn.Module, batch: dict[str, Any], stage: str = "train") -> RunCtx:
        """One counted run of ``train_step`` on ``model`` with its summaries discarded."""
        state = self.state
        self.runs.append(check)
        return run_step(
            state.config,
            model,
            batch,
            stage,
            epoch=max(state.epoch, 1),
            step=state.global_step,
            summaries=_DiscardedSummaries(),
        )

    def _limit(self, limit: ProbeLimit) -> ProbeLimit:
        self.limits.append(str(limit))
        return limit

    def release(self) -> None:
        """Drop the shared run's graph (when a watcher never came for it)."""
        self._shared = None

    def summary(self) -> str:
        """How many extra runs of train_step the checks made, for which check, and which could not run."""
        counts = {check: self.runs.count(check) for check in dict.fromkeys(self.runs)}
        detail = ", ".join(f"{check} {n}" for check, n in counts.items())
        text = f"train_step ran {len(self.runs)} extra time(s) on copies of the model" + (
            f" ({detail})" if detail else ""
        )
        return text + (f"; could not check: {'; '.join(self.limits)}" if self.limits else "")


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


PROBE_SESSION: Key[ProbeSession] = Key("probe_session", "the first step's ProbeSession")
