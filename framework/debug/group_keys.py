"""Param groups set apart by a key that nothing applies (``debug_group_keys``, on by default).

Code that builds an optimizer's param groups often tags them with a factor for the learning rate or the weight decay
of a part of the model (``lr_mult`` for a pretrained backbone, ``decay_mult`` for norms), in the spelling of the
library it came from. torch.optim reads only its own options; a key it does not know is kept in the group and
ignored. When nothing else reads it (the schedule here reads ``lr_multiplier``; a user's scheduler could read its
own key), the groups the key was meant to set apart train alike, and nothing fails.

Configured against applied, after epoch 1 (the schedules and the user's callbacks have had their turn), for torch's
own optimizer classes (a class of the user's may read its own keys in its step): a numeric key that the optimizer
does not read and that holds different values in two groups that agree in every option the optimizer does read. The
groups differ in what was configured and not in what was applied. A key that is applied (a scheduler that sets each group's rate from it, a builder that computed each group's
``lr`` from it) leaves its trace in those options, and is not reported.
"""

from __future__ import annotations

import difflib
import numbers
from collections import Counter
from typing import Any

import torch

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import Order, Plugin, on
from framework.core.state import RunState

register(
    "debug_group_keys",
    "bool",
    True,
    "After epoch 1: param groups that carry different values of a key the optimizer does not read (an lr_mult of "
    "another library), while every option it reads is the same in all of them: the key changes nothing.",
    __name__,
)

# keys of a param group that the framework or torch's schedulers read or write
READ_HERE = {"params", "lr_multiplier", "optimizer", "initial_lr", "max_lr", "min_lr", "base_momentum", "max_momentum"}


def optimizers_of(optimizer: Any) -> dict[str, torch.optim.Optimizer]:
    """The torch optimizers of a run: one, or the ``optimizers`` option's set by name."""
    several = getattr(optimizer, "optimizers", None)
    if isinstance(several, dict):
        return {name: opt for name, opt in several.items() if isinstance(opt, torch.optim.Optimizer)}
    return {"": optimizer} if isinstance(optimizer, torch.optim.Optimizer) else {}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and bool(torch.equal(a, b))
    return a == b


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class GroupKeys(Plugin):
    """Finds, after epoch 1, a param-group key whose different values changed none of the optimizer's options."""

    bug_check = ("debug_group_keys",)

    order = Order.OBSERVE

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> GroupKeys | None:
        return cls() if config.bool("debug_group_keys") else None

    @on(Event.EPOCH_END, once=True)
    def judge(self, state: RunState) -> None:
        for name, opt in optimizers_of(state.optimizer).items():
            finding = self._unapplied(name, opt)
            if finding is not None:
                report(finding)

    @staticmethod
    def _unapplied(name: str, opt: torch.optim.Optimizer) -> Finding | None:
        groups = opt.param_groups
        # a class of the user's (or a library's) may read its own keys in its step: only torch's are known not to
        if len(groups) < 2 or not type(opt).__module__.startswith("torch."):
            return None
        options = [o for o in opt.defaults if o not in READ_HERE]
        keys = [k for k in dict.fromkeys(k for g in groups for k in g) if k not in READ_HERE and k not in opt.defaults]
        for key in keys:
            values = [g.get(key) for g in groups if key in g]
            if not all(_number(v) for v in values) or len(set(values)) < 2:
                continue
            # two groups that the key sets apart but that agree in every option the optimizer reads (their other
            # options may set other groups apart: weight decay and no decay, as layer-wise decay builders split them)
            alike = next(
                (
                    (i, j)
                    for i, a in enumerate(groups)
                    for j, b in enumerate(groups[i + 1 :], i + 1)
                    if key in a and key in b and a[key] != b[key] and all(_same(a.get(o), b.get(o)) for o in options)
                ),
                None,
            )
            if alike is None:
                continue
            i, j = alike
            counts = Counter(values)
            spread = ", ".join(f"{v:g} in {n} group(s)" for v, n in counts.most_common(4))
            cls = type(opt).__name__
            read = ", ".join(options[:6]) + (", ..." if len(options) > 6 else "")
            named = f"optimizer {name!r} ({cls})" if name else cls
            close = difflib.get_close_matches(key, [*opt.defaults, "lr_multiplier"], n=1, cutoff=0.6)
            suggestion = f" Did you mean {close[0]!r}?" if close else ""
            return Finding(
                "warning",
                "sanity check",
                f"The {len(groups)} param groups of {named} carry {key!r} with different values ({spread}), but "
                f"after epoch 1 groups {i} and {j} ({key} {groups[i][key]:g} and {groups[j][key]:g}) agree in every "
                f"option {cls} reads ({read}): {cls} does not read {key!r}, and neither the learning-rate schedule "
                f"(it reads 'lr_multiplier') nor other code applied it to the groups' options, so the groups it was "
                f"meant to set apart train alike.{suggestion}",
                evidence={"key": key, "values": dict(counts), "options_read": options, "alike_groups": [i, j]},
                where={"optimizer": name or cls, "param_group_key": key},
                fix=f"Set what {key!r} stands for as an option {cls} reads (each group's 'lr', 'weight_decay'), or "
                f"as 'lr_multiplier' (the schedules multiply every rate they set by it).",
                option="debug_group_keys = False",
            )
        return None


PLUGINS = (GroupKeys,)
