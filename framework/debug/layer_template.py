"""``debug_print_layer_output_template``: every module's output shape with symbolic dims, at startup.

The model runs ``train_step`` twice on abstract inputs: parameters, buffers and the batch are
``meta`` tensors (shapes and dtypes, no data, no compute, no memory), with two different batch
and time sizes; a dim that follows the batch size prints as ``B``, one that follows the time
size as ``T`` (also ``B*T``, ``2*T``, ``T//2``, ``T-1`` ...), a fixed one as its number.

The same dry run finds device bugs on a CPU-only machine: a tensor created inside ``forward`` on
a fixed device (``torch.randn(*shape)`` without ``device=``) lands on the CPU, while everything
of the model is on ``meta``; the first op mixing the two is reported with module and line. It
also reports shape errors (a layer built with the wrong input size) before any data is loaded.
"""

from __future__ import annotations

import contextlib
import traceback
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from framework.base import log
from framework.base.config import Config
from framework.base.options import register
from framework.base.rng import get_rng_state, set_rng_state
from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.op_checks import op_name
from framework.check_library.probe import model_copy, parameters_kept, unseen
from framework.check_library.tensors import format_frame, iter_tensors, user_frame
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.core.step import run_step

register(
    "debug_print_layer_output_template",
    "bool",
    False,
    "At startup, print every module's output shape/dtype with symbolic dims (meta-device dry run); reports device bugs.",
    __name__,
)

# Two (batch, time) sizes; distinct primes keep B, T and their products apart.
SIZES = ((3, 7), (5, 13))


class DeviceBugError(Exception):
    """A tensor on a fixed device mixes with the model's tensors."""


# Ops that want some arguments on the CPU whatever the device of the rest (the lengths of a packed sequence).
_TAKES_CPU_TENSORS = {"aten._pack_padded_sequence"}


class DeviceCheck(TorchDispatchMode):
    """Raises on the first op that mixes meta (model) tensors with real ones; remembers where real ones came from."""

    def __init__(self, tracker: ModuleTracker):
        super().__init__()
        self.tracker = tracker
        # id -> (weak reference, where); tensors compare elementwise, so they cannot be dict keys
        self.created: dict[int, tuple[weakref.ref, str]] = {}

    def remember(self, tensor: torch.Tensor, where: str) -> None:
        """Name where the real tensor ``tensor`` came from, for the message that blames it."""
        self.created[id(tensor)] = (weakref.ref(tensor), where)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        tensors = list(iter_tensors((args, kwargs)))
        real = [t for t in tensors if t.device.type != "meta" and t.dim() > 0]
        if real and len(real) < len(tensors) and op_name(func) not in _TAKES_CPU_TENSORS:
            stray = real[0]
            origin = self._origin(stray) or "outside the model (e.g. a global tensor of the config)"
            raise DeviceBugError(
                f"in module {self.tracker.current or '(train_step)'}: {op_name(func)} at "
                f"{format_frame(user_frame())} mixes the model's tensors with a tensor on {stray.device} "
                f"[{', '.join(map(str, stray.shape))}] that was created {origin}. On a GPU this is a device "
                f"mismatch. Create or move it on the input's device (device=x.device, .to(x.device), or torch.randn_like(x) / "
                f"x.new_zeros(...))."
            )
        out = func(*args, **(kwargs or {}))
        if not tensors or real:
            # A real tensor derived from another keeps the origin of the first (randn, not the * 0.1 after it).
            inherited = next((o for o in map(self._origin, real) if o), None)
            where = inherited or f"by {op_name(func)} at {format_frame(user_frame())} without a device"
            for t in iter_tensors(out):
                if t.device.type != "meta":
                    self.remember(t, where)
        return out

    def _origin(self, t: torch.Tensor) -> str | None:
        ref, where = self.created.get(id(t), (None, None))
        return where if ref is not None and ref() is t else None


@contextlib.contextmanager
def on_meta(model: nn.Module) -> Iterator[None]:
    """Within the block, the model's parameters and buffers are meta tensors of the same shapes and dtypes."""
    saved = _swap_to_meta(model)
    try:
        yield
    finally:
        for store, name, value in saved:
            store[name] = value


def _swap_to_meta(model: nn.Module) -> list[tuple[dict, str, Any]]:
    """Replace parameters and buffers by meta tensors in place; return what to put back."""
    saved = []
    meta: dict[int, Any] = {}
    for module in model.modules():
        for store in (module._parameters, module._buffers):
            for name, value in store.items():
                if value is None:
                    continue
                if id(value) not in meta:
                    fake = torch.empty_like(value, device="meta")
                    meta[id(value)] = (
                        nn.Parameter(fake, value.requires_grad) if isinstance(value, nn.Parameter) else fake
                    )
                saved.append((store, name, value))
                store[name] = meta[id(value)]
    return saved


def _fake_batch(extern_data: dict, batch: int, time: int, device: torch.device | str) -> dict[str, torch.Tensor]:
    """A batch of the declared shapes: meta tensors, or zeros on a real device (zero is a valid class id too)."""
    fake = {}
    for key, declared in extern_data.items():
        shape = (batch,) + tuple(time if d is None else d for d in declared.shape)
        fake[key] = torch.zeros(shape, dtype=getattr(torch, declared.dtype), device=device)
        if declared.variable:
            fake[key + ":seq_len"] = torch.full((batch,), time, dtype=torch.int64)  # on the CPU, as the loader gives it
    return fake


def symbolic_dim(a: int, b: int) -> str:
    """Name a dim that is ``a`` in the first dry run and ``b`` in the second."""
    (b1, t1), (b2, t2) = SIZES
    if a == b:
        return str(a)
    candidates = {"B": (b1, b2), "T": (t1, t2), "B*T": (b1 * t1, b2 * t2)}
    for k in range(2, 9):
        candidates.update({f"{k}*T": (k * t1, k * t2), f"{k}*B": (k * b1, k * b2), f"T//{k}": (t1 // k, t2 // k)})
    for name, values in candidates.items():
        if (a, b) == values:
            return name
    if a - t1 == b - t2:
        return f"T{a - t1:+d}"
    return f"?({a}|{b})"


def _dry_run(
    state: RunState, model: nn.Module, batch: int, time: int, device: torch.device | str
) -> tuple[dict[str, list], str | None]:
    """One dry run; returns {module path: [(shapes, dtypes) per call]} and why it stopped early, if it did."""
    outputs: dict[str, list] = {}

    def record(path: str, module: nn.Module, args: tuple, output: Any) -> None:
        if output is None:  # the hook also runs when forward raised; the dry run stopped inside this module
            outputs.setdefault(path, []).append(None)
            return
        tensors = list(iter_tensors(output))
        outputs.setdefault(path, []).append(([tuple(t.shape) for t in tensors], [t.dtype for t in tensors]))

    tracker = ModuleTracker(model, post_hook=record)
    fake = _fake_batch(state.extern_data, batch, time, device)
    try:
        # an EMA that the training step moves in place (the copy shares the parameters) is put back
        with tracker, DeviceCheck(tracker), parameters_kept(state.model, "The layer template's dry run"):
            run_step(state.config, model, fake, "train", epoch=max(state.epoch, 1), step=state.global_step)
    except DeviceBugError as exc:
        return outputs, f"DEVICE BUG {exc}"
    except Exception as exc:  # shape errors and code that needs real data end the dry run; report, don't crash
        where = format_frame(user_frame(traceback.extract_tb(exc.__traceback__)))
        module = f" in module {tracker.current}" if tracker.current else ""
        reason = str(exc).split("\n")[0].split(". ")[0]
        return outputs, f"{type(exc).__name__}: {reason}{module} at {where}"
    return outputs, None


def layer_output_template(state: RunState) -> str:
    """Run the dry runs and format the template, with any device bug or error that stopped them."""
    runs = _dry_runs(state, "meta")
    header = "dry run on the meta device: no data, no compute"
    stopped = runs[0][1]
    if stopped and not stopped.startswith("DEVICE BUG"):
        # Code that needs real values (.item(), a boolean mask: Hugging Face models check their masks) cannot run on
        # meta tensors: the same dry runs with zeros on the run's device, unseen, get through such code.
        real = _dry_runs(state, state.device)
        if len(real[0][0]) > len(runs[0][0]) or real[0][1] is None:
            runs, header = real, f"dry run with zero-valued inputs on {state.device}, as the model needs real values"
    (first, stopped), (second, _) = runs
    lines = [f"Layer output template ({header}; B = batch, T = time):"]
    for key, declared in state.extern_data.items():
        dims = ", ".join(["B"] + ["T" if d is None else str(d) for d in declared.shape])
        sparse = f" sparse_dim={declared.sparse_dim}" if declared.sparse_dim is not None else ""
        lines.append(f"  extern_data {key}: [{dims}] {declared.dtype}{sparse}")
    width = max((len(p or "(model)") for p, _ in state.model.named_modules()), default=10)
    for path, module in state.model.named_modules():
        path = path or "(model)"
        calls_a, calls_b = first.get(path), second.get(path)
        if not calls_a:
            lines.append(f"  {path:<{width}}  {type(module).__name__}: not called")
            continue
        if calls_a[0] is None:
            lines.append(f"  {path:<{width}}  {type(module).__name__}: the dry run stopped inside it")
            continue
        shapes_a, dtypes = calls_a[0]
        shapes_b = calls_b[0][0] if calls_b and calls_b[0] is not None else shapes_a
        outs = ", ".join(
            f"[{', '.join(symbolic_dim(x, y) for x, y in zip(sa, sb, strict=False))}] {str(dt).removeprefix('torch.')}"
            for sa, sb, dt in zip(shapes_a, shapes_b, dtypes, strict=False)
        )
        repeat = f"  (called {len(calls_a)} times)" if len(calls_a) > 1 else ""
        lines.append(f"  {path:<{width}}  {type(module).__name__} -> {outs or 'no tensor output'}{repeat}")
    if stopped and stopped.startswith("DEVICE BUG"):
        lines.append(f"  {stopped}")
    elif stopped:
        lines.append(
            f"  The dry run stopped early: {stopped}. Modules after that point are shown as not called; "
            f"code that needs real values (.item(), boolean masks) cannot run on meta tensors."
        )
    return "\n".join(lines)


def _dry_runs(state: RunState, device: torch.device | str) -> list[tuple[dict[str, list], str | None]]:
    """The dry runs of ``SIZES``, each on a fresh copy of the model (the user's modules never see them), with the
    RNG states kept; on a real device without gradients, and what the model prints, logs or warns swallowed."""
    rng = get_rng_state()
    runs = []
    try:
        for b, t in SIZES:
            model = model_copy(state.model).train()
            isolation = on_meta(model) if device == "meta" else _unseen_without_gradients()
            with isolation:
                runs.append(_dry_run(state, model, b, t, device))
    finally:
        set_rng_state(rng)
    return runs


@contextlib.contextmanager
def _unseen_without_gradients() -> Iterator[None]:
    with torch.no_grad(), unseen():
        yield


class LayerOutputTemplate(Plugin):
    """``debug_print_layer_output_template``: prints the template at startup."""

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> LayerOutputTemplate | None:
        return cls() if config.bool("debug_print_layer_output_template") else None

    @on(Event.STARTUP)
    def print_template(self, state: RunState) -> None:
        log.v1(layer_output_template(state))


PLUGINS = (LayerOutputTemplate,)
