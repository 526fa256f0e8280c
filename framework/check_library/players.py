"""The players of a run with several optimizers, and what passes between them in one step.

A module whose parameters all belong to one optimizer is that optimizer's (the generator, the discriminator, the
actor, the critic). Watching one step's forward with hooks that only read, :class:`WatchedStep` sees which tensors
one player made and another was given (a generator's samples given to the discriminator; ``fake.detach()`` counts,
as it is the same storage), the real tensors of the same shape the second was also given, and, in the backward,
the gradient that comes back to the made tensors: what the judging player passes back to the one that made them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


def owned_modules(model: nn.Module, params_of: dict[str, list[torch.nn.Parameter]]) -> dict[str, tuple[nn.Module, str]]:
    """The outermost modules whose parameters all belong to one optimizer: ``{path: (module, optimizer name)}``;
    ``params_of``: each optimizer's parameters."""
    owner = {id(p): name for name, params in params_of.items() for p in params}
    found: dict[str, tuple[nn.Module, str]] = {}
    for path, module in model.named_modules():
        owners = {owner.get(id(p)) for p in module.parameters()}
        if len(owners) != 1 or None in owners or any(path.startswith(f"{outer}.") for outer in found):
            continue
        found[path or "(model)"] = (module, owners.pop())
    return found


def players_of(model: nn.Module, optimizer: Any) -> dict[str, tuple[nn.Module, str]] | None:
    """``owned_modules`` of a run with several optimizers (an ``OptimizerSet``: its ``params_of``) whose modules
    belong to at least two of them: the players; None otherwise."""
    params_of = getattr(optimizer, "params_of", None)
    if params_of is None:
        return None
    modules = owned_modules(model, params_of)
    return modules if len({name for _, name in modules.values()}) > 1 else None


@dataclass
class Exchange:
    """One player's module given what another player made, and real samples of the same shape."""

    judge: str  # the module path of the player that was given them
    maker: str  # the optimizer whose module made them
    made: torch.Tensor  # detached
    real: torch.Tensor | None  # detached; None when the judge was given no real tensor of the same shape
    gradient_norms: list[float] = field(default_factory=list)  # per backward that reached them: mean per-example norm


class WatchedStep:
    """Read-only hooks on the owned modules for one step: what each made, what each was given, and the gradient
    that comes back to a made tensor. ``remove()`` after the step's backward."""

    def __init__(self, modules: dict[str, tuple[nn.Module, str]]):
        self._made: dict[int, str] = {}  # storage address of an output -> the optimizer whose module made it
        self._given: list[tuple[str, str, torch.Tensor]] = []  # (module path, its optimizer, first floating input)
        self.exchanges: list[Exchange] = []
        self._handles = [
            module.register_forward_hook(self._hook(path, name)) for path, (module, name) in modules.items()
        ]

    def _hook(self, path: str, name: str):
        def hook(_module: nn.Module, args: tuple, output: Any) -> None:
            first = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
            if first is not None and first.dim() >= 2:
                self._given.append((path, name, first))
                maker = self._made.get(storage_address(first))
                if maker is not None and maker != name:
                    self._exchange(path, maker, first)
            if isinstance(output, torch.Tensor) and output.is_floating_point():
                self._made[storage_address(output)] = name

        return hook

    def _exchange(self, path: str, maker: str, made: torch.Tensor) -> None:
        exchange = next((e for e in self.exchanges if e.judge == path and e.maker == maker), None)
        if exchange is None:
            exchange = Exchange(path, maker, made.detach(), None)
            self.exchanges.append(exchange)
        if made.requires_grad:  # the pass whose loss trains the maker: what comes back to its samples

            def keep(grad: torch.Tensor) -> None:
                exchange.gradient_norms.append(grad.detach().flatten(1).norm(dim=1).mean().item())

            self._handles.append(made.register_hook(keep))

    def remove(self) -> None:
        """Remove the hooks, and pair each exchange with a real tensor its judge was given."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for exchange in self.exchanges:
            exchange.real = next(
                (
                    x.detach()
                    for path, _, x in self._given
                    if path == exchange.judge
                    and x.shape[1:] == exchange.made.shape[1:]
                    and storage_address(x) not in self._made
                ),
                None,
            )


def storage_address(tensor: torch.Tensor) -> int:
    """Where ``tensor``'s memory starts: the same for a tensor and its ``detach()`` or views."""
    return tensor.untyped_storage().data_ptr()
