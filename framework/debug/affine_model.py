"""Do the model's hidden layers add anything? (``debug_affine_model``, on by default.)

Linear layers stacked without a nonlinearity between them compose to one linear map: the hidden layers add
parameters and no capacity, and the model cannot fit what a linear model cannot (the activation forgotten
between two ``nn.Linear``, or never applied in ``forward``). Nothing fails; the model learns what is linear in
the task and stops there.

An invariance that holds for any model made of linear layers only, tested on a copy at the first step: the
model's forward is called once more on three inputs of the first batch and on their combination (in eval mode,
under ``no_grad``, the RNG restored after), and an affine model gives ``f(a + b - c) = f(a) + f(b) - f(c)``.
Judged only for a model whose layers with parameters are all ``nn.Linear`` (two or more), none narrower than
the smaller of the input and the output width: a narrower one is a low-rank factorisation (a linear
autoencoder, an adapter), which is linear on purpose. A single ``nn.Linear`` (logistic regression) is never
judged, and a layer initialised at zero (the identity start of a flow or a residual branch) is given small random
weights in a copy first: the test is of the architecture, not of its initialisation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.probe import model_copy, replace_parameters, unseen
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck, batch_key
from framework.debug.sanity import report_findings

CHECK = "affine-model check"

register(
    "debug_affine_model",
    "bool",
    True,
    "First step: a model of two or more linear layers whose output is an affine function of its input (no "
    "nonlinearity between the layers: the hidden layers add no capacity).",
    __name__,
)


@dataclass
class _ModelCall:
    """The model copy and the arguments of its first forward call in the shared run."""

    model: nn.Module
    calls: list[tuple[tuple, dict]] = field(default_factory=list)


def _output_tensor(out: Any) -> torch.Tensor | None:
    """The scores of a forward's output: the tensor, the first of a tuple, or a library output's ``logits``."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    logits = getattr(out, "logits", None)
    return logits if isinstance(logits, torch.Tensor) else None


def _without_zero_layers(model: nn.Module) -> nn.Module:
    """``model``, or a copy of it whose all-zero linear weights are small random values: a branch initialised at
    zero (a flow's coupling, a residual branch) makes a model the identity at its start by design, and the test is
    of its architecture, not of its initialisation."""
    zero = [m for m in model.modules() if isinstance(m, nn.Linear) and not bool(m.weight.detach().any())]
    if not zero:
        return model
    copy = model_copy(model)
    zero_weights = {id(m.weight) for m in zero}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        replace_parameters(copy, lambda p: torch.randn_like(p) / p.shape[-1] ** 0.5 if id(p) in zero_weights else None)
    return copy


class AffineModelCheck(SharedRunCheck):
    """Names a stack of linear layers that composes to one affine map."""

    bug_check = ("debug_affine_model",)

    check = CHECK

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> AffineModelCheck | None:
        return cls() if config.bool("debug_affine_model") else None

    def applies(self, state: RunState) -> bool:
        layers = [m for m in state.model.modules() if any(True for _ in m.parameters(recurse=False))]
        return len(layers) >= 2 and all(isinstance(m, nn.Linear) for m in layers)

    @contextlib.contextmanager
    def observe(self, state: RunState, model: nn.Module) -> Iterator[_ModelCall]:
        seen = _ModelCall(model)

        def note(_module: nn.Module, args: tuple, kwargs: dict, _out: Any) -> None:
            if not seen.calls:
                seen.calls.append((args, kwargs))

        handle = model.register_forward_hook(note, with_kwargs=True)
        try:
            yield seen
        finally:
            handle.remove()

    def conclude(self, state: RunState, seen: _ModelCall, run_ctx: RunCtx | None) -> None:
        if not seen.calls:
            return
        args, kwargs = seen.calls[0]
        position = self._input_position(state, args)
        if position is None:
            return
        x = args[position]
        model = _without_zero_layers(seen.model)
        layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
        outputs = self._outputs(model, args, kwargs, position, [x, x.roll(1, 0), x.roll(2, 0)])
        if outputs is None:
            return
        fa, fb, fc, combined = outputs
        narrowest = min(m.out_features for m in layers[:-1])
        if narrowest < min(x.shape[-1], fa.shape[-1]):
            return  # a low-rank factorisation: linear on purpose
        gap = float((combined - (fa + fb - fc)).abs().max())
        scale = float(torch.stack([fa.abs().max(), fb.abs().max(), fc.abs().max()]).max())
        if not gap <= 1e-4 * (1.0 + scale):
            return
        key = batch_key(state, x, sparse=False)
        shapes = ", ".join(
            f"'{n}' {m.in_features}->{m.out_features}" for n, m in seen.model.named_modules() if m in layers
        )
        finding = Finding(
            "warning",
            "sanity check",
            f"The model's output is an affine function of {key!r}: for three inputs a, b, c of the first batch, "
            f"model(a + b - c) = model(a) + model(b) - model(c) to within {gap:.1e} (outputs up to {scale:.3g}), "
            f"though it has {len(layers)} linear layers ({shapes}), none narrower than its input or output. Without "
            f"a nonlinearity (an activation) between them they compose to one linear map: the hidden layers add "
            f"parameters but no capacity, and the model cannot fit anything a linear model cannot. Put an "
            f"activation between the layers (or, if a linear model is meant, use one nn.Linear).",
            evidence={"affine_gap": gap, "output_scale": scale, "linear_layers": len(layers)},
            where={"modules": [n for n, m in model.named_modules() if m in layers], "key": key},
            fix="put an activation (e.g. nn.ReLU) between the linear layers",
            option="debug_affine_model = False",
        )
        report_findings(state, "first step", [finding], ModelCheckError, False, off="debug_affine_model = False")

    @staticmethod
    def _input_position(state: RunState, args: tuple) -> int | None:
        """The position of the first argument that is a dense float batch key with three or more sequences."""
        for position, arg in enumerate(args):
            if isinstance(arg, torch.Tensor) and arg.is_floating_point() and arg.dim() >= 2 and len(arg) >= 3:
                if batch_key(state, arg, sparse=False) is not None:
                    return position
        return None

    @staticmethod
    def _outputs(
        model: nn.Module, args: tuple, kwargs: dict, position: int, inputs: list[torch.Tensor]
    ) -> list[torch.Tensor] | None:
        """The model's scores for each input and for ``a + b - c``, in eval mode, the RNG and mode restored."""
        training = model.training
        outputs = []
        try:
            with unseen(), torch.random.fork_rng(devices=[]), torch.no_grad():  # the user's prints stay unseen
                model.eval()
                for x in [*inputs, inputs[0] + inputs[1] - inputs[2]]:
                    out = _output_tensor(model(*args[:position], x, *args[position + 1 :], **kwargs))
                    if out is None or not out.is_floating_point() or out.shape[:1] != x.shape[:1]:
                        return None
                    outputs.append(out.float())
        except Exception:  # the model's own code refused the input: nothing to judge
            return None
        finally:
            model.train(training)
        return outputs


PLUGINS = (AffineModelCheck,)
