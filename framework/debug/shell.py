"""Interactive shells: anywhere (``debug_shell``), before a training step, and post mortem.

IPython is used when it is installed, else ``code.interact``. A shell needs a terminal: without
one (a batch job) a log line says why none opened, and the run goes on.
"""

from __future__ import annotations

import code
import signal
import sys
import threading
import traceback
import types
from typing import Any

from framework.base import log
from framework.base.config import Config
from framework.base.options import register
from framework.base.rng import get_rng_state, set_rng_state
from framework.check_library import probe
from framework.check_library.tensors import is_user_file
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.core.step import run_step

register(
    "debug_shell_in_runner",
    "bool | int | list[int]",
    False,
    "Open a shell right before training steps: True (every step), a global step, or a list of them. SIGUSR2: next step.",
    __name__,
)

register(
    "debug_shell_on_exception", "bool", False, "On an exception, open a shell in the frame that raised it.", __name__
)


class _Namespace:
    """A module stand-in whose ``__dict__`` is the given globals dict (IPython's embed wants a module)."""

    def __init__(self, global_ns: dict[str, Any]):
        self.__dict__ = global_ns


def debug_shell(
    user_ns: dict[str, Any] | None = None,
    user_global_ns: dict[str, Any] | None = None,
    exit_afterwards: bool = False,
    header: str = "",
) -> None:
    """Open an interactive shell with the caller's (or the given) namespaces; return when it is left.

    Call it from a config or a model: ``framework.debug.debug_shell(user_ns=locals(),
    user_global_ns=globals())``. ``exit_afterwards=True`` ends the process when the shell closes.
    """
    if probe.probing():  # a check re-running the step before the first one: the real step opens the shell
        return
    caller = sys._getframe(1)
    user_ns = caller.f_locals if user_ns is None else user_ns
    user_global_ns = caller.f_globals if user_global_ns is None else user_global_ns
    if not sys.stdin or not sys.stdin.isatty():
        log.v2(
            f"debug shell requested{': ' + header.splitlines()[0] if header else ''}, but standard input is "
            f"not a terminal; no shell opened."
        )
    else:
        try:
            from IPython.terminal.embed import InteractiveShellEmbed
        except ImportError:
            InteractiveShellEmbed = None  # noqa: N806
        if InteractiveShellEmbed is not None:
            shell = InteractiveShellEmbed.instance(banner1="", exit_msg="")
            shell(header=header, local_ns=user_ns, module=_Namespace(user_global_ns), stack_depth=2)
        else:
            namespace = {**user_global_ns, **user_ns}
            try:
                code.interact(
                    banner=header + "\n(IPython is not installed: plain Python shell; Ctrl-D leaves)",
                    local=namespace,
                    exitmsg="",
                )
            except SystemExit:
                pass  # exit() leaves the shell, as in IPython
    if exit_afterwards:
        sys.exit(1)


class ShellInRunner(Plugin):
    """``debug_shell_in_runner``: a shell right before chosen training steps, and on SIGUSR2.

    The option is True (every step), a global step number, or a list of them. SIGUSR2 opens a shell
    before the next step in any case. Leaving the shell continues training as if it had not been
    opened: gradients, RNG state and the step's run context are restored.
    """

    def __init__(self, when: Any):
        self.when = when
        self.requested = False
        self.subscribed = False
        self.previous_handler: Any = None

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> ShellInRunner:
        return cls(config.get("debug_shell_in_runner"))

    @on(Event.STARTUP)
    def listen(self, state: RunState) -> None:
        """Subscribe when steps are chosen; listen for SIGUSR2 (main thread only)."""
        if self.when is not None and self.when is not False:  # 0 is a step number, not False
            self._subscribe()
        if hasattr(signal, "SIGUSR2") and threading.current_thread() is threading.main_thread():
            self.previous_handler = signal.signal(signal.SIGUSR2, lambda signum, frame: self._request())

    @on(Event.CLOSE)
    def stop_listening(self, state: RunState) -> None:
        if self.previous_handler is not None:
            signal.signal(signal.SIGUSR2, self.previous_handler)
            self.previous_handler = None

    def _subscribe(self) -> None:
        if not self.subscribed:
            self.callbacks.on(Event.STEP_START, self.maybe_open, self.order)
            self.subscribed = True

    def _request(self) -> None:
        self.requested = True
        self._subscribe()

    def _chosen(self, step: int) -> bool:
        if self.when is True:
            return True
        if isinstance(self.when, int) and not isinstance(self.when, bool):
            return step == self.when
        return isinstance(self.when, (list, tuple)) and step in self.when

    def maybe_open(self, state: RunState) -> None:
        if not (self.requested or self._chosen(state.global_step)):
            return
        self.requested = False
        open_step_shell(state)


def open_step_shell(state: RunState) -> None:
    """A shell before the current step with model, batch, run_ctx, step, epoch, state, config."""
    grads = {p: p.grad for p in state.model.parameters()}
    rng = get_rng_state()
    run_ctx = state.run_ctx

    def run_step_by_hand() -> RunCtx:
        """Run train_step on this batch by hand (a scratch run context; returned with its losses)."""
        return run_step(state.config, state.model, state.batch, "train", epoch=state.epoch, step=state.global_step)

    namespace = {
        "model": state.model,
        "extern_data": state.batch,
        "run_ctx": run_ctx,
        "step": state.global_step,
        "epoch": state.epoch,
        "state": state,
        "config": state.config,
        "run_step": run_step_by_hand,
        "stop": lambda: state.control.stop("stop() in the debug shell"),
    }
    header = (
        f"Debug shell before training step {state.global_step} (epoch {state.epoch}, step "
        f"{state.step_in_epoch} of {state.steps_in_epoch}). In scope: model, extern_data, run_ctx, step, "
        f"epoch, state, config; run_step() runs train_step on this batch; stop() ends training after this "
        f"step with a checkpoint. Leave the shell (exit or Ctrl-D) to continue training."
    )
    try:
        debug_shell(namespace, state.config.namespace, header=header)
    finally:
        for p, grad in grads.items():
            p.grad = grad
        set_rng_state(rng)
        run_ctx.losses.clear()
        run_ctx.outputs.clear()


def innermost_user_frame(tb: types.TracebackType | None) -> types.FrameType | None:
    """The deepest traceback frame in user code (else the deepest frame)."""
    frames = [frame for frame, _ in traceback.walk_tb(tb)]
    for frame in reversed(frames):
        if is_user_file(frame.f_code.co_filename):
            return frame
    return frames[-1] if frames else None


def post_mortem_shell(exc: BaseException) -> None:
    """``debug_shell_on_exception``: a shell in the frame where ``exc`` was raised (``%debug`` works there)."""
    frame = innermost_user_frame(exc.__traceback__)
    if frame is None:
        return
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, exc.__traceback__
    debug_shell(
        frame.f_locals,
        frame.f_globals,
        header=f"Post-mortem shell in {frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name}) after "
        f"{type(exc).__name__}: {exc}\nThe frame's variables are in scope; %debug opens the debugger "
        f"(IPython). Leave the shell to end the run.",
    )


PLUGINS = (ShellInRunner,)
