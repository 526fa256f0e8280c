"""Several optimizers in one training (GANs, actor-critic, parts that learn at their own pace): the ``optimizers``
option.

Each optimizer holds the parameters its ``params`` selects, and every trainable parameter belongs to exactly one.
``train_step`` says which optimizer each loss is for (``run_ctx.mark_as_loss(loss, "g", optimizer="gen")``); the
engine backpropagates each optimizer's losses into that optimizer's parameters only (``torch.autograd.backward``
with ``inputs=``), so the generator's loss never leaves gradients in the discriminator, whatever the graph shares,
and a forgotten ``detach`` costs compute, not correctness. All losses of one step are computed at the same
parameters and every optimizer then steps (simultaneous updates); an optimizer whose losses are not marked in a
step leaves its parameters as they are, which is how alternating updates and n critic steps per generator step
are written: mark the generator's loss only every n-th step.

The set acts as one torch optimizer towards everything else: its ``param_groups`` are all optimizers' groups (each
group says which optimizer it belongs to), so schedules, checks and checkpoints work on it unchanged. The run's
learning-rate schedules drive every optimizer: an optimizer's ``learning_rate`` fixes its ratio to the
``learning_rate`` option (as a parameter group's ``lr_multiplier`` does), and the schedules scale them together;
an optimizer's own ``dynamic_learning_rate`` then sets its rate before every step
(``framework.training.lr_control.OptimizerSchedules``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.core.autocast import amp_settings
from framework.core.run_ctx import RunCtx
from framework.core.state import either
from framework.training import optim

register(
    "optimizers",
    "dict | None",
    None,
    "Several optimizers, instead of 'optimizer': {name: {'params': glob of parameter names | [globs] | "
    "callable(name, param), 'class': ..., 'learning_rate': its rate (default: learning_rate), "
    "'gradient_clip_global_norm': ..., 'gradient_clip': ..., 'dynamic_learning_rate': its own schedule, "
    "'accum_grad_multiple_step': its own accumulation, and what 'optimizer' takes}}. Every trainable parameter "
    "belongs to exactly one; train_step marks each loss for one (run_ctx.mark_as_loss(loss, name, optimizer='gen')), "
    "and it reaches only that optimizer's parameters. See docs/several_optimizers.rst.",
    __name__,
)

# The keys of an optimizer's entry that are not the optimizer's own.
_OWN_KEYS = (
    "params",
    "learning_rate",
    "gradient_clip_global_norm",
    "gradient_clip",
    "dynamic_learning_rate",
    "accum_grad_multiple_step",
)


class OptimizerSet:
    """Named torch optimizers acting as one: steps, zero_grad, state dicts and param groups cover all of them."""

    def __init__(
        self,
        optimizers: dict[str, torch.optim.Optimizer],
        clipping: dict[str, dict[str, float]],
        ratios: dict[str, float] | None = None,
        schedules: dict[str, Callable[..., float]] | None = None,
        accumulation: dict[str, int] | None = None,
    ):
        self.optimizers = optimizers
        self.clipping = clipping  # per optimizer, the clipping options its entry sets (the rest: the run's)
        self.ratios = ratios or dict.fromkeys(optimizers, 1.0)  # per optimizer, its rate over the run's
        self.schedules = schedules or {}  # per optimizer, its own dynamic_learning_rate (lr_control applies them)
        self.params_of = {name: [p for g in opt.param_groups for p in g["params"]] for name, opt in optimizers.items()}
        # per optimizer, the names of the losses marked for it so far (checks name an optimizer no loss trains)
        self.marked_for: dict[str, set[str]] = {name: set() for name in optimizers}
        # Its own accumulation: an optimizer with k > 1 steps at every k-th update of the run, on the mean of the
        # gradients of its window; ``window[name]``: the updates of the run already in its open window.
        self.accumulation = {name: (accumulation or {}).get(name, 1) for name in optimizers}
        self.window = dict.fromkeys(optimizers, 0)
        self._stepped: dict[str, bool] | None = None  # which optimizers stepped at this update (None: no step yet)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.optimizers)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """Every optimizer's groups, in the order of ``optimizers`` (the dicts themselves: setting a rate sets it)."""
        return [group for opt in self.optimizers.values() for group in opt.param_groups]

    @property
    def state(self) -> dict[Any, Any]:
        """The per-parameter states of all optimizers (a merged view, for reading)."""
        return {key: value for opt in self.optimizers.values() for key, value in opt.state.items()}

    def due(self, name: str) -> bool:
        """Whether optimizer ``name`` steps at this update: its accumulation window is complete."""
        return self.window[name] + 1 >= self.accumulation[name]

    def keeps_gradients(self) -> list[torch.nn.Parameter]:
        """The parameters whose gradients are kept across updates now: those of optimizers with an open window."""
        return [p for name, params in self.params_of.items() if self.window[name] for p in params]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of the optimizers that stepped at this update; an optimizer whose window is still
        open keeps them. Without a step before it (at the start, or an update the run skipped) all are cleared and
        every window starts again."""
        stepped, self._stepped = self._stepped, None
        for name, opt in self.optimizers.items():
            if stepped is None or stepped[name]:
                opt.zero_grad(set_to_none=set_to_none)
                self.window[name] = 0
            else:
                self.window[name] += 1

    def step(self) -> None:
        """Every optimizer steps; one whose parameters got no gradient (no loss of its in the update) changes
        nothing, as torch's optimizers skip parameters without a gradient."""
        for opt in self.optimizers.values():
            opt.step()

    def step_unless(self, skip: torch.Tensor | None, by_optimizer: dict[str, torch.Tensor]) -> None:
        """``step()``, each optimizer skipped where the device flag ``skip`` or its own flag in ``by_optimizer`` is
        true (``optim.step_unless`` per optimizer): as torch's GradScaler, an overflow in one optimizer's gradients
        skips that optimizer's update only."""
        self._stepped = {name: self.due(name) for name in self.optimizers}
        for name, opt in self.optimizers.items():
            if not self._stepped[name]:
                continue
            optim.step_unless(opt, either(skip, by_optimizer.get(name)))

    def state_dict(self) -> dict[str, Any]:
        """Every optimizer's state, and the open accumulation windows with the gradients gathered in them."""
        open_windows = {name: count for name, count in self.window.items() if count}
        return {
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
            "windows": open_windows,
            "window_gradients": {
                name: [None if p.grad is None else p.grad.detach().clone() for p in self.params_of[name]]
                for name in open_windows
            },
        }

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        states = saved.get("optimizers")
        if states is None or set(states) != set(self.optimizers):
            written = "one optimizer" if states is None else f"optimizers {', '.join(states)}"
            raise ValueError(f"it holds {written}, the config declares optimizers {', '.join(self.optimizers)}")
        for name, opt in self.optimizers.items():
            opt.load_state_dict(states[name])
        for name, count in saved.get("windows", {}).items():  # a window that was open: it goes on
            self.window[name] = count
            for p, grad in zip(self.params_of[name], saved["window_gradients"][name], strict=True):
                p.grad = None if grad is None else grad.to(p.device, p.dtype)

    def parts(self) -> Iterator[tuple[str, list[torch.nn.Parameter], dict[str, float]]]:
        """(name, parameters, its clipping options) per optimizer."""
        for name in self.optimizers:
            yield name, self.params_of[name], self.clipping[name]

    def backward(self, run_ctx: RunCtx, weights: dict[str, float] | None, loss_scale: torch.Tensor | None) -> None:
        """Backpropagate the step's losses, each into the parameters of the optimizers it is marked for only.
        ``weights``: per loss, how much it counts in its accumulation window (None: fully)."""
        totals: dict[tuple[str, ...], torch.Tensor] = {}
        for marked, term in run_ctx.weighted_terms(weights):
            key = marked.optimizer or ()
            windows = {self.accumulation[name] for name in key}
            if len(windows) > 1:
                raise ValueError(
                    f"loss {marked.name!r} is marked for optimizers {', '.join(key)}, which accumulate over different "
                    f"numbers of updates ({', '.join(str(self.accumulation[n]) for n in key)}); give them one "
                    f"accum_grad_multiple_step, or mark the loss for one of them"
                )
            if windows and (k := windows.pop()) > 1:
                term = term / k  # the optimizer steps on the mean over its window
            totals[key] = term if key not in totals else totals[key] + term
            for name in key:
                self.marked_for[name].add(marked.name)
        for index, (names, total) in enumerate(totals.items()):
            inputs = [p for name in names for p in self.params_of[name]]
            if loss_scale is not None:
                total = total * loss_scale
            torch.autograd.backward(total, inputs=inputs, retain_graph=index < len(totals) - 1)


def create_optimizers(
    config: Config, model: torch.nn.Module, distributed: Any = None
) -> torch.optim.Optimizer | OptimizerSet:
    """The ``optimizers`` option's set, or the ``optimizer`` option's one optimizer when it is not set.
    ``distributed``: the run's ``Distributed`` (None: one process)."""
    specs = config.get("optimizers")
    if specs is None:
        return optim.create_optimizer(config, model)
    if not isinstance(specs, dict) or not specs or not all(isinstance(s, dict) for s in specs.values()):
        raise ConfigError(
            f"optimizers must be a dict {{name: {{'params': ..., 'class': ...}}}} with at least one entry, got "
            f"{specs!r}."
        )
    if distributed is not None and distributed.fsdp is not None:
        raise ConfigError(
            "optimizers: several optimizers do not run under FSDP (torch_distributed['fsdp']), which expects one "
            "backward pass per step; train them with gradient averaging (torch_distributed = {}) or parameter "
            "averaging ({'param_sync_step': K})."
        )
    base_lr = config.float("learning_rate")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    owner: dict[int, str] = {}
    optimizers, clipping, ratios, schedules, accumulation = {}, {}, {}, {}, {}
    for name, spec in specs.items():
        option = f"optimizers[{name!r}]"
        if "params" not in spec:
            raise ConfigError(
                f"{option} has no 'params': give a glob of parameter names (e.g. 'generator.*'), a list of globs or "
                f"a callable(name, param) selecting the parameters it updates."
            )
        chosen = [(n, p) for n, p in named if optim.selects(spec["params"], n, p)]
        if not chosen:
            raise ConfigError(
                f"{option}['params'] = {spec['params']!r} selects no trainable parameter; the model's parameters "
                f"are named like {', '.join(n for n, _ in named[:4])}."
            )
        twice = [n for n, p in chosen if id(p) in owner]
        if twice:
            first = owner[id(dict(chosen)[twice[0]])]
            raise ConfigError(
                f"{option} and optimizers[{first!r}] both select {', '.join(twice[:3])}"
                f"{' and more' if len(twice) > 3 else ''}: a parameter updated by two optimizers moves by both "
                f"updates each step. Make the 'params' of each select its own parameters."
            )
        owner.update((id(p), name) for _, p in chosen)
        lr = float(spec.get("learning_rate", base_lr))
        if base_lr == 0 and lr != 0:
            raise ConfigError(f"{option}: learning_rate = 0 leaves no rate to scale its learning_rate {lr:g} by.")
        kwargs = {k: v for k, v in spec.items() if k not in _OWN_KEYS}
        opt = optim.build_optimizer(kwargs, model, lr, option, only={id(p) for _, p in chosen})
        ratio = lr / base_lr if base_lr else 1.0
        for group in opt.param_groups:  # the schedules scale every optimizer's rate alike
            group["lr_multiplier"] = group.get("lr_multiplier", 1.0) * ratio
            group["optimizer"] = name
        optimizers[name] = opt
        clipping[name] = {k: spec[k] for k in ("gradient_clip_global_norm", "gradient_clip") if k in spec}
        ratios[name] = ratio
        if spec.get("dynamic_learning_rate") is not None:
            if not callable(spec["dynamic_learning_rate"]):
                raise ConfigError(
                    f"{option}['dynamic_learning_rate'] must be a function (RETURNN's arguments: global_train_step, "
                    f"epoch, epoch_continuous, learning_rate) returning this optimizer's rate, got "
                    f"{spec['dynamic_learning_rate']!r}."
                )
            schedules[name] = spec["dynamic_learning_rate"]
        if spec.get("accum_grad_multiple_step", 1) != 1:
            accumulation[name] = _own_accumulation(config, option, spec["accum_grad_multiple_step"])
        log.v4(f"{option}: {type(opt).__name__} over {len(chosen)} parameter tensors at learning rate {lr:g}")
    left = [n for n, p in named if id(p) not in owner]
    if left:
        raise ConfigError(
            f"optimizers: no optimizer selects {', '.join(left[:4])}{' and more' if len(left) > 4 else ''}, so "
            f"they would never be trained. Select them in one optimizer's 'params', or freeze them "
            f"(requires_grad_(False)) in get_model."
        )
    return OptimizerSet(optimizers, clipping, ratios, schedules, accumulation)


def _own_accumulation(config: Config, option: str, k: Any) -> int:
    """An optimizer's own ``accum_grad_multiple_step``, checked against what it cannot be combined with."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"{option}['accum_grad_multiple_step'] must be an int >= 1, got {k!r}.")
    if config.int("accum_grad_multiple_step") != 1:
        raise ConfigError(
            f"{option}['accum_grad_multiple_step'] = {k} and the run's accum_grad_multiple_step = "
            f"{config.int('accum_grad_multiple_step')}: give the accumulation either to the run (every optimizer) or "
            f"to single optimizers, not both."
        )
    if amp_settings(config)[1] is not None:
        raise ConfigError(
            f"{option}['accum_grad_multiple_step'] = {k} under loss scaling (torch_amp float16 with its grad_scaler): "
            f"the scale may change inside this optimizer's window, and its gradients would mix scales. Use bfloat16 "
            f"(no loss scale), or the run's accum_grad_multiple_step."
        )
    return k


def declares_several(config: Config) -> bool:
    """Whether the config trains with several optimizers (an ``OptimizerSet``)."""
    return config.get("optimizers") is not None


def optimizer_names(optimizer: Any) -> tuple[str, ...] | None:
    """The names a loss may be marked for: those of an ``OptimizerSet``, () for one optimizer, None for none."""
    if optimizer is None:
        return None
    return optimizer.names if isinstance(optimizer, OptimizerSet) else ()
