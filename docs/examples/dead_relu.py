"""A diagnostic plugin: warn once per layer when a ReLU outputs only zeros (a "dead" layer)."""

import torch

from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import Plugin, on

register("debug_dead_relu_interval", "int", 0, "Check ReLU outputs every N steps (0: off).", __name__, range="[0, inf)")


_OFF = "debug_dead_relu_interval = 0"  # the setting that turns the check off, named in every finding


class DeadReLU(Plugin):
    def __init__(self, model: torch.nn.Module, interval: int):
        self.interval, self.step, self.checking, self.warned = interval, 0, False, set()
        relus = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.ReLU)]
        self.hooks = [m.register_forward_hook(self._hook(name)) for name, m in relus]

    @classmethod
    def from_config(cls, config, state):
        interval = config.int("debug_dead_relu_interval")
        return cls(state.model, interval) if interval else None  # off: declines, costs nothing

    def _hook(self, name):
        def hook(module, args, output):  # a host sync per ReLU, only in checked training steps
            if self.checking and name not in self.warned and not output.any():
                self.warned.add(name)
                message = f"'{name}' output only zeros in training step {self.step}."
                report(Finding("warning", "dead ReLU", message, where={"module": name}, option=_OFF))

        return hook

    @on(Event.STEP_START)
    def start_step(self, state):
        self.step, self.checking = state.global_step, state.global_step % self.interval == 0

    @on(Event.AFTER_FORWARD)
    def end_forward(self, state):
        self.checking = False

    @on(Event.CLOSE)
    def remove_hooks(self, state):
        for hook in self.hooks:
            hook.remove()


PLUGINS = (DeadReLU,)
