"""Which tensors of a real run would sit on the model's device and which on a fixed one (the device check).

On a CPU-only machine every tensor is on the CPU, so ``.device`` cannot tell a device bug from
correct code. ``DeviceTracker`` (a torch function mode, active during one real run of
``train_step``) follows where each tensor *would* be on a GPU instead:

- on the run device: the model's parameters and buffers (``model.to(device)`` moves them), the
  batch (the engine moves it), and what is computed from them; a tensor created with an
  explicit ``device=`` (``device=x.device``, ``torch.arange(n, device=...)``), moved with
  ``.to(x.device)`` / ``.to(x)`` / ``.type_as(x)``, or made by ``x.new_zeros(...)``,
  ``torch.zeros_like(x)``;
- on a fixed device (the CPU): a tensor made by a factory without ``device=`` (``torch.randn(n)``,
  ``torch.tensor([...])``; unless torch's default device is set to another one), moved by
  ``.cpu()``, a plain tensor attribute of a module or a global tensor of the config (``model.to``
  does not move them), the ``:seq_len`` lengths (on the CPU by design, as in RETURNN), and what
  is computed from these alone.

The first call that mixes the two is the finding, with the line that made the fixed tensor and
the line that mixes it; on a GPU that call fails with "Expected all tensors to be on the same
device". Scalars (0-dim tensors) mix with any device, as in torch; so do the calls that take
tensors of other devices on purpose (indices of ``x[idx]``, ``copy_``, ``.to``, the lengths of
``pack_padded_sequence``), and the arguments that torch accepts on the CPU (``ctc_loss``'s targets
and lengths). Tensors of unknown origin (``torch.from_numpy``, a custom autograd
function's aliases) count as neither: the tracker never guesses. It never changes what the
user's code computes (``.cpu()`` of a CPU tensor gives an alias instead of the same object, so
that the two can be told apart) and never raises: a failure of its own stops the tracking.
"""

from __future__ import annotations

import traceback
import weakref
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from framework.check_library.loss_contracts import cpu_side
from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.tensors import calling_user_frame, format_frame, is_user_class

# Tensor methods that move a tensor to an accelerator: tensor.cuda(), .xpu(), ... (and a PrivateUse1 backend's).
_TO_ACCELERATOR = {"cuda", "xpu", "mps", "hpu", "mtia"}
# Calls that take tensors of different devices on purpose: they are never a mix.
_TAKES_OTHER_DEVICES = _TO_ACCELERATOR | {
    "to",
    "type_as",
    "copy_",
    "cpu",
    "new_tensor",
    "__setitem__",
    "index_put",
    "index_put_",
    "set_",
    "_pack_padded_sequence",
    "pack_padded_sequence",
}
# Reflected and in-place operators, and the operators whose aten op has another name.
_OPERATOR_NAMES = {
    "truediv": "div",
    "floordiv": "floor_divide",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
    "invert": "bitwise_not",
    "getitem": "index",
    "setitem": "index_put_",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
_REFLECTED = {"radd", "rsub", "rmul", "rtruediv", "rfloordiv", "rmatmul", "rpow", "rmod", "rand", "ror", "rxor"}
_PYTHON_FACTORIES = {"tensor", "as_tensor", "from_numpy", "asarray", "frombuffer"}


def op_label(func: Any) -> str:
    """``aten.add`` for ``x + y``, ``aten.randn`` for ``torch.randn``, ``torch.tensor`` for ``torch.tensor``."""
    name = getattr(func, "__name__", None) or type(func).__name__
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
        if name in _REFLECTED:
            name = name[1:]
        elif name.startswith("i") and name[1:] in ("add", "sub", "mul", "truediv", "floordiv", "and", "or", "xor"):
            name = _OPERATOR_NAMES.get(name[1:], name[1:]) + "_"
        name = _OPERATOR_NAMES.get(name, name)
    return f"torch.{name}" if name in _PYTHON_FACTORIES else f"aten.{name}"


def _moves_to_accelerator(name: str) -> bool:
    """Whether tensor method ``name`` moves a tensor to an accelerator (``.cuda()``, ``.xpu()``, a renamed
    PrivateUse1 backend's method, registered after this module was imported)."""
    return name in _TO_ACCELERATOR or name == torch._C._get_privateuse1_backend_name()


def _tensors_in(value: Any, found: list[torch.Tensor], depth: int = 0) -> list[torch.Tensor]:
    """Add the tensors in a call's arguments to ``found`` (nested lists, tuples, dicts; long lists of numbers are
    not searched)."""
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif depth > 3:
        pass
    elif isinstance(value, (list, tuple)):
        if len(value) <= 32 or isinstance(value[0], torch.Tensor):
            for item in value:
                if isinstance(item, torch.Tensor):
                    found.append(item)
                elif isinstance(item, (list, tuple, dict)):
                    _tensors_in(item, found, depth + 1)
    elif isinstance(value, dict):
        _tensors_in(list(value.values()), found, depth + 1)
    return found


class DeviceTracker(TorchFunctionMode):
    """Follows the logical device of every tensor of one run; ``finding`` is the first call that mixes them."""

    def __init__(
        self,
        model: nn.Module,
        batch: dict[str, Any],
        tracker: ModuleTracker,
        namespace: dict[str, Any] | None = None,
    ):
        super().__init__()
        self.tracker = tracker
        # Where a factory without device= puts its tensor (torch.set_default_device): not the CPU is the run device.
        self._default_is_cpu = torch.get_default_device().type == "cpu"
        self.finding: str | None = None
        # The culprit of ``finding`` as a finding's ``where`` and ``evidence`` (module, op, line; the stray tensor).
        self.where: dict[str, Any] = {}
        self.evidence: dict[str, Any] = {}
        self.broken: str | None = None  # why the tracking stopped (a failure of its own)
        # id -> weak reference (tensors compare elementwise, so they cannot be dict keys)
        self._on_run: dict[int, weakref.ref] = {}
        self._fixed: dict[int, tuple[weakref.ref, str]] = {}
        for t in [*model.parameters(), *model.buffers()]:
            self._mark_run(t)
        for key, value in batch.items():
            if not isinstance(value, torch.Tensor):
                continue
            if key.endswith(":seq_len"):
                self._mark_fixed(
                    value, f"created as extern_data[{key!r}], whose lengths stay on the CPU (as in RETURNN)"
                )
            else:
                self._mark_run(value)
        self._scan_attributes(model)
        for name, value in (namespace or {}).items():
            if isinstance(value, torch.Tensor) and not self._known(value):
                self._mark_fixed(value, f"kept in the config's global {name!r}, which model.to(device) does not move")

    def _scan_attributes(self, model: nn.Module) -> None:
        """Plain tensor attributes (instance or class) that ``model.to(device)`` leaves where they are, of the modules
        whose class the user wrote. A library's module (a Hugging Face attention's rotary table) moves its own on
        its first call, after comparing devices, which on this machine are all the CPU: not a bug the user can fix,
        and one the library's GPU users would have met."""
        internal = {"_parameters", "_buffers", "_modules"}
        for path, module in model.named_modules():
            if not is_user_class(type(module)):
                continue
            where = f"module {path!r}" if path else "the model"
            owners = [(vars(module), ""), (vars(type(module)), "class ")]
            for attributes, kind in owners:
                for name, value in attributes.items():
                    if name in internal:
                        continue
                    for t in _tensors_in(value, [], depth=2):
                        if isinstance(t, nn.Parameter) or self._known(t):
                            continue
                        self._mark_fixed(
                            t,
                            f"kept in the plain tensor {kind}attribute {name!r} of {where}, which model.to(device) "
                            f"does not move (register it as a buffer: self.register_buffer({name!r}, ...), or move it "
                            f"in forward)",
                        )

    # -- labels ---------------------------------------------------------------------------------------------------

    def _mark_run(self, t: torch.Tensor) -> None:
        self._fixed.pop(id(t), None)
        self._on_run[id(t)] = weakref.ref(t)

    def _mark_fixed(self, t: torch.Tensor, origin: str) -> None:
        self._on_run.pop(id(t), None)
        self._fixed[id(t)] = (weakref.ref(t), origin)

    def _is_run(self, t: torch.Tensor) -> bool:
        ref = self._on_run.get(id(t))
        return ref is not None and ref() is t

    def origin(self, t: torch.Tensor) -> str | None:
        """Where a tensor on a fixed device came from (None: it is not known to be on one)."""
        ref, where = self._fixed.get(id(t), (None, None))
        return where if ref is not None and ref() is t else None

    def _known(self, t: torch.Tensor) -> bool:
        return self._is_run(t) or self.origin(t) is not None

    # -- the mode -------------------------------------------------------------------------------------------------

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.broken is not None:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name == "__get__":  # an attribute: .shape, .device, .data, .T (a tensor keeps its label)
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor) and args and isinstance(args[0], torch.Tensor):
                self._guarded(self._inherit, out, args[0])
            return out
        try:
            inputs = _tensors_in(args, [])
            if kwargs:
                _tensors_in(kwargs, inputs)
            mix = self._mix(func, name, args, kwargs, inputs) if self.finding is None else None
        except Exception as exc:  # never break the user's run
            self._stop(exc)
            return func(*args, **kwargs)
        if mix is not None:
            self.finding = mix
        try:
            out = func(*args, **kwargs)
        except Exception as exc:  # on a GPU, the mix itself fails
            if mix is not None:
                exc.add_note(f"(The device check found this first: device bug {mix})")
            raise
        try:
            return self._label(func, name, args, kwargs, inputs, out)
        except Exception as exc:
            self._stop(exc)
            return out

    def _guarded(self, function: Any, *args: Any) -> None:
        try:
            function(*args)
        except Exception as exc:
            self._stop(exc)

    def _stop(self, exc: Exception) -> None:
        frame = traceback.extract_tb(exc.__traceback__)[-1:] or [None]
        self.broken = f"{type(exc).__name__}: {exc} (at {format_frame(frame[0]) if frame[0] else '?'})"

    def _inherit(self, out: torch.Tensor, source: torch.Tensor) -> None:
        if out is source or self._known(out):
            return
        origin = self.origin(source)
        if origin is not None:
            self._mark_fixed(out, origin)
        elif self._is_run(source):
            self._mark_run(out)

    def _mix(self, func: Any, name: str, args: tuple, kwargs: dict, inputs: list[torch.Tensor]) -> str | None:
        """The finding, if this call mixes a (non-scalar) tensor on a fixed device with one on the run device."""
        if name in _TAKES_OTHER_DEVICES or len(inputs) < 2:
            return None
        allowed = cpu_side(func, args, kwargs)  # e.g. ctc_loss's lengths: torch takes (cuDNN wants) them on the CPU
        inputs = [t for t in inputs if not any(t is a for a in allowed)]
        if name == "__getitem__":  # x[idx]: indices may live on the CPU; a CPU tensor indexed by device indices may not
            base = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if base is None or base.dim() == 0 or self.origin(base) is None:
                return None
            if not any(self._is_run(t) for t in inputs if t is not base):
                return None
            stray = base
        else:
            stray = next((t for t in inputs if t.dim() > 0 and self.origin(t) is not None), None)
            if stray is None or not any(self._is_run(t) for t in inputs):
                return None
        line = format_frame(calling_user_frame())
        self.where = {"module": self.tracker.current or "(train_step)", "op": op_label(func), "line": line}
        self.evidence = {"stray_device": str(stray.device), "stray_shape": list(stray.shape)}
        return (
            f"in module {self.tracker.current or '(train_step)'}: {op_label(func)} at "
            f"{line} mixes the model's tensors with a tensor on {stray.device} "
            f"[{', '.join(map(str, stray.shape))}] that was {self.origin(stray)}. On a GPU this is a device "
            f"mismatch. Create or move it on the input's device (device=x.device, .to(x.device), or "
            f"torch.randn_like(x) / x.new_zeros(...))."
        )

    def _label(self, func: Any, name: str, args: tuple, kwargs: dict, inputs: list[torch.Tensor], out: Any) -> Any:
        """Label the call's new tensors; returns ``out`` (an alias where a device change returned the same object)."""
        if isinstance(out, torch.Tensor):
            outputs = [out]
        elif isinstance(out, (list, tuple)):
            outputs = [t for t in out if isinstance(t, torch.Tensor)]
        else:
            return out
        if not outputs:
            return out
        this = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if (
            (name in ("cpu", "to", "type_as") or _moves_to_accelerator(name))
            and this is not None
            and isinstance(out, torch.Tensor)
        ):
            return self._moved(name, this, args, kwargs, out)
        if not inputs:  # a factory
            explicit = kwargs.get("device") is not None or not self._default_is_cpu
            if explicit:
                for t in outputs:
                    self._mark_run(t)
            else:
                origin = f"created by {op_label(func)} at {format_frame(calling_user_frame())} without a device"
                for t in outputs:
                    self._mark_fixed(t, origin)
            return out
        if name.endswith("_") and out is this:  # in place: the tensor stays where it is
            return out
        fresh = [t for t in outputs if not any(t is i for i in inputs)]
        if any(self._is_run(t) for t in inputs):
            for t in fresh:
                self._mark_run(t)
            return out
        origin = next((o for o in map(self.origin, inputs) if o is not None), None)
        if origin is not None:
            for t in fresh:
                self._mark_fixed(t, origin)
        return out

    def _moved(self, name: str, this: torch.Tensor, args: tuple, kwargs: dict, out: torch.Tensor) -> torch.Tensor:
        """``.cpu()``, ``.to(...)``, ``.type_as(...)``: the result's device is the target's."""
        target: str | None  # "run", "fixed" or None (as ``this``)
        origin = None
        other = next((a for a in (*args[1:], *kwargs.values()) if isinstance(a, torch.Tensor)), None)
        if name == "cpu":
            target, origin = "fixed", self.origin(this)
            if origin is None:
                origin = f"moved to the CPU by .cpu() at {format_frame(calling_user_frame())}"
        elif _moves_to_accelerator(name):
            target = "run"
        elif other is not None:  # .to(x), .type_as(x): x's device
            origin = self.origin(other)
            target = "fixed" if origin is not None else ("run" if self._is_run(other) else None)
        elif kwargs.get("device") is not None or any(isinstance(a, (str, torch.device, int)) for a in args[1:2]):
            target = "run"  # an explicit device is taken as meant (device=x.device, or the run's device)
        else:  # a dtype, memory format or copy flag only
            target = None
        if target is None:
            if out is not this:
                self._inherit(out, this)
            return out
        if (
            target == ("fixed" if self.origin(this) is not None else "run" if self._is_run(this) else "")
            and out is this
        ):
            return out
        if out is this:  # the same object (no copy was needed on this machine): an alias, so the two stay apart
            out = out.view_as(out)
        if target == "run":
            self._mark_run(out)
        else:
            self._mark_fixed(out, origin or "moved to the CPU")
        return out
