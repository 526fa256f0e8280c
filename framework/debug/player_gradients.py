"""A player that no longer learns because another passes it no gradient (``debug_player_gradients``, on by
default with several optimizers).

In a game of optimizers (a GAN, an actor and its critic) one player learns from another's judgement of what it
made: the generator from the gradient that comes back through the discriminator to its samples. When the
discriminator wins, its verdicts saturate (a sigmoid at 0 or 1 under the original minimax loss) and that
gradient vanishes: the generator stops learning while its loss says nothing alarming.

At the process's first train step and at each epoch's last, the step is watched with read-only hooks
(``framework.check_library.players``): per optimizer, the norm of its parameters' gradient (before clipping, loss
scale removed) and the losses marked for it; per exchange (one player's module given what another made), the mean
per-example norm of the gradient that comes back to the made tensor. At the end of training, a maker whose
parameters' gradient has fallen below ``VANISHED`` of its first step's is a warning, and the place where it
vanished is measured, not guessed:

- the gradient that comes back to its samples fell as far: the judge passes back nothing (named with the judge's
  losses against their start: a judge whose loss fell to a small share of it has won);
- that gradient is as large as at the start: the gradient vanishes inside the maker itself.
"""

from __future__ import annotations

from torch import nn

from framework.base import log
from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library import sharded
from framework.check_library.players import WatchedStep, players_of
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_player_gradients",
    "bool",
    True,
    "With several optimizers: at the first train step and each epoch's last, the gradient each optimizer's "
    "parameters get and the gradient that comes back to what one player's modules made from another's; a player "
    "whose gradient vanished by the end of training is a warning that says where it vanished.",
    __name__,
)

VANISHED = 0.01  # a gradient norm below this share of the first step's has vanished
JUDGE_WON = 0.1  # the judge's losses below this share of their start: it wins


class _Measured:
    """One watched step: per optimizer its gradient norm and summed losses; per exchange the returned gradient."""

    def __init__(self, epoch: int, step: int):
        self.epoch, self.step = epoch, step
        self.gradients: dict[str, float] = {}
        self.losses: dict[str, float] = {}
        self.returned: dict[tuple[str, str], float] = {}  # (judge module, maker optimizer) -> mean per-example norm


class PlayerGradients(Plugin):
    """Measures the gradient each player gets and where it comes from; warns about a player starved of it."""

    def __init__(self, modules: dict[str, tuple[nn.Module, str]]):
        self.modules = modules
        self.watch: WatchedStep | None = None
        self.history: list[_Measured] = []

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> PlayerGradients | None:
        modules = players_of(state.model, state.optimizer) if config.bool("debug_player_gradients") else None
        return cls(modules) if modules else None

    @on(Event.STEP_START)
    def start_watching(self, state: RunState) -> None:
        if not self.history or state.step_in_epoch == state.steps_in_epoch - 1:
            self.watch = WatchedStep(self.modules)

    @on(Event.AFTER_BACKWARD)
    def measure(self, state: RunState) -> None:
        if self.watch is None:
            return
        self.watch.remove()
        watch, self.watch = self.watch, None
        measured = _Measured(state.epoch, state.global_step)
        scale = 1.0 if state.loss_scale is None else float(state.loss_scale)
        optimizer = state.optimizer
        for name, params in optimizer.params_of.items():
            grads = [p.grad for p in params if p.grad is not None and not p.grad.is_sparse]
            if grads:  # one host read per optimizer
                measured.gradients[name] = float(sharded.norms(grads).double().square().sum().sqrt()) / scale
        for marked in state.run_ctx.losses.values():
            if marked.optimizer and not marked.as_error:
                value = float(marked.loss.detach().float().item())
                for name in marked.optimizer:
                    measured.losses[name] = measured.losses.get(name, 0.0) + value
        for exchange in watch.exchanges:
            if exchange.gradient_norms:
                measured.returned[(exchange.judge, exchange.maker)] = sum(exchange.gradient_norms) / scale
        self.history.append(measured)
        log.v4(
            f"Player gradients at step {state.global_step}: "
            + "; ".join(f"{n!r} {g:.3g}" for n, g in measured.gradients.items())
            + "".join(f"; back to {m!r}'s samples through {j!r} {v:.3g}" for (j, m), v in measured.returned.items())
        )

    @on(Event.FINISH)
    def judge(self, state: RunState) -> None:
        if len(self.history) < 3:  # the first step, and two epochs' ends that agree
            return
        last = self.history[-1]
        for judge_path, maker in {key for m in self.history for key in m.returned}:
            peak = max(self.history, key=lambda m: m.gradients.get(maker, 0.0))
            top, now = peak.gradients.get(maker, 0.0), last.gradients.get(maker, 0.0)
            if not top or any(m.gradients.get(maker, 0.0) >= VANISHED * top for m in self.history[-2:]):
                continue
            start, returned = peak.returned.get((judge_path, maker)), last.returned.get((judge_path, maker), 0.0)
            if not start:
                continue
            judge_name = self.modules[judge_path][1]
            losses_then, losses_now = peak.losses.get(judge_name), last.losses.get(judge_name)
            evidence = {
                "gradient_peak": top,
                "gradient_last": now,
                "returned_at_peak": start,
                "returned_last": returned,
                "judge_losses_at_peak": losses_then,
                "judge_losses_last": losses_now,
                "peak_step": peak.step,
                "last_step": last.step,
            }
            where = {"optimizer": maker, "module": judge_path}
            seen = (
                f"The parameters of optimizer {maker!r} get almost no gradient any more: its norm fell from {top:.3g} at "
                f"step {peak.step} to {now:.3g} at step {last.step} ({now / top:.1e} of it), and so at the epoch "
                f"before"
            )
            if returned < VANISHED * start:
                won = _won(losses_then, losses_now)
                verdict = (
                    f" The losses of {judge_name!r} fell from {losses_then:.3g} to {losses_now:.3g}: it wins, and its "
                    f"confident verdicts pass back no gradient."
                    if won
                    else ""
                )
                report(
                    Finding(
                        "warning",
                        "player gradients",
                        f"{seen}. It vanishes before it reaches {maker!r}: what comes back through {judge_path!r} to "
                        f"the samples {maker!r} made fell from {start:.3g} to {returned:.3g} per example.{verdict} "
                        f"A loss that saturates when the judge is sure (a GAN generator minimising log(1 - D(G(z)))) "
                        f"does this; the non-saturating loss (the generator maximises log D(G(z)): BCE against "
                        f"'real' labels) or a Wasserstein loss keeps the gradient, and a slower judge (its learning "
                        f"rate, fewer of its steps) keeps the game balanced.",
                        evidence=evidence,
                        where=where,
                        fix="a non-saturating or Wasserstein loss for the starved player; a slower judge",
                        option="debug_player_gradients = False",
                    )
                )
            else:
                report(
                    Finding(
                        "warning",
                        "player gradients",
                        f"{seen}, while what comes back through {judge_path!r} to the samples it made is "
                        f"{returned:.3g} per example ({start:.3g} at step {peak.step}): the gradient vanishes inside "
                        f"{maker!r}'s own modules (saturated or dead activations, a normalisation that removes what "
                        f"the judge asks for). The gradient health check (debug_grad_health) shows it per layer.",
                        evidence=evidence,
                        where=where,
                        fix=f"find the layer of {maker!r} where the gradient dies (debug_grad_health)",
                        option="debug_player_gradients = False",
                    )
                )


def _won(first: float | None, last: float | None) -> bool:
    return first is not None and last is not None and first > 0 and 0 <= last < JUDGE_WON * first


PLUGINS = (PlayerGradients,)
