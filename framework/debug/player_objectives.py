"""Two players whose losses want the same thing (``debug_player_objectives``, on by default with several
optimizers): a game whose sides cooperate.

In an adversarial game (a GAN, any model whose one part judges what another part makes against real data), the
judge's loss wants its scores of the made samples to go one way (a discriminator: "fake", low) and the maker's loss
wants them to go the other way (a generator: "real", high). Whatever the loss (the original minimax one, the
non-saturating one, Wasserstein, hinge), the two pull those scores in opposite directions. A maker trained with the
judge's target (the fake label in the generator's loss) or with the judge's sign (``+D(G(z))`` where ``-D(G(z))``
belongs) is trained to be caught: nothing errs, the losses fall, and the samples drift away from the data.

The experiment, before the first step whose losses train two players (alternating updates train one at a time: a
step's run on a copy tells, up to step ``LAST_STEP``), on copies of the model (``train_step`` once per shift, each on a fresh copy
with the random generators as they were, so every run draws the same noise): every score that a module of one
optimizer (the judge) gives to what a module of another optimizer made (``fake.detach()`` counts: the same storage)
is moved by the same amount, at ``SHIFTS`` times the scores' spread (at least 1), and each optimizer's objective
(the sum of the losses marked for it) is read. Where both objectives fall steadily the same way (one end of the
shifts is each one's lowest, and each rises toward the other end), the players cooperate: a warning. Only where the
judge is also given real samples of the same shape (a game, not a pipeline of two parts trained together), where the
two optimizers are trained by different losses, and where neither objective has its lowest point inside the range
(a least-squares GAN's targets: no decision).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from framework.base import log
from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library.players import players_of, storage_address
from framework.check_library.probe import ProbeLimit, ProbeSession
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

CHECK = "player-objectives check"
register(
    "debug_player_objectives",
    "bool",
    True,
    "With several optimizers, before the first step: move the scores a judging module (a discriminator) gives to "
    "what another optimizer's module made (a generator's samples) on copies of the model, and warn when both "
    "optimizers' losses fall the same way (the players cooperate: the maker has the judge's target or sign).",
    __name__,
)

SHIFTS = (-8.0, -2.0, 0.0, 2.0, 8.0)  # times the spread of the judged scores (at least 1)
TOLERANCE = 1e-6  # relative: objectives closer than this are equal
LAST_STEP = 10  # the last step at which to look for one that trains two players


class PlayerObjectives(Plugin):
    """Runs the shifted copies once: before the first step whose losses train two players (of the first steps)."""

    bug_check = ("debug_player_objectives",)
    order = Order.CHECK

    def __init__(self, modules: dict[str, tuple[nn.Module, str]]):
        self.modules = modules
        self.players = {name for _, name in modules.values()}

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> PlayerObjectives | None:
        modules = players_of(state.model, state.optimizer) if config.bool("debug_player_objectives") else None
        return cls(modules) if modules else None

    @on(Event.STEP_START)
    def probe(self, state: RunState) -> None:
        # Before the real forward: a copy shares the parameters, and a step that changes them in place (a WGAN's
        # clamp_) must not do so while the real step's graph needs them.
        session = ProbeSession(state)
        try:
            base = _shifted_run(session, state.batch, self.modules, 0.0)
            if len([name for name in self.players if base.trained_by[name]]) < 2:
                if state.global_step >= LAST_STEP:  # alternating updates that never train two players this early
                    self.callbacks.off(Event.STEP_START, self.probe)
                return  # alternating updates: this step trains one player; the next may train both
            self.callbacks.off(Event.STEP_START, self.probe)
            games = [key for key, judged in base.judged.items() if judged.real_given and judged.scores]
            if not games:
                return
            scale = max(1.0, float(torch.cat([s.flatten() for k in games for s in base.judged[k].scores]).std()))
            runs = {
                shift: base if shift == 0 else _shifted_run(session, state.batch, self.modules, shift * scale)
                for shift in SHIFTS
            }
        except ProbeLimit as exc:
            self.callbacks.off(Event.STEP_START, self.probe)
            log.v5(f"Player-objectives check skipped: a shifted run failed ({exc}).")
            return
        log.v4(f"Player-objectives check at step {state.global_step}: {session.summary()}.")
        for judge, maker in games:
            self._judge(base, runs, judge, maker, scale)

    def _judge(self, base: _Run, runs: dict[float, _Run], judge: str, maker: str, scale: float) -> None:
        judge_optimizer = self.modules[judge][1]
        if base.trained_by.get(judge_optimizer) == base.trained_by.get(maker):
            return  # one objective for both: nothing tells them apart
        curves = {
            name: [runs[s].objectives.get(name, float("nan")) for s in SHIFTS] for name in (judge_optimizer, maker)
        }
        directions = {name: _direction(curve) for name, curve in curves.items()}
        if None in directions.values() or directions[judge_optimizer] != directions[maker]:
            log.v4(
                f"Player objectives: moving the scores {judge!r} gives to what optimizer {maker!r} made, "
                f"{judge_optimizer!r} wants them {directions[judge_optimizer] or 'near a target'} and {maker!r} "
                f"{directions[maker] or 'near a target'}."
            )
            return
        way = directions[maker]
        shown = ", ".join(
            f"{name!r} {curve[0]:.4g} at {SHIFTS[0] * scale:+.3g}, {curve[2]:.4g} unmoved, {curve[-1]:.4g} at "
            f"{SHIFTS[-1] * scale:+.3g}"
            for name, curve in curves.items()
        )
        report(
            Finding(
                "warning",
                "sanity check",
                f"The players cooperate instead of competing: the losses of optimizer {maker!r} and of optimizer "
                f"{judge_optimizer!r} both want the scores that {judge!r} gives to what the modules of {maker!r} made to "
                f"be {way}. Measured on copies of the model, moving all those scores by the same amount: {shown}. "
                f"{judge!r} is also given real samples, so it judges made against real, and the maker's loss must want "
                f"the opposite of the judge's: {maker!r} is trained to be caught. Its loss has the judge's target or "
                f"sign (the fake label where the real one belongs, +D(G(z)) where -D(G(z)) belongs).",
                evidence={
                    "shifts": [s * scale for s in SHIFTS],
                    "objectives": {name: [round(v, 6) for v in curve] for name, curve in curves.items()},
                    "both_want": way,
                },
                where={"module": judge, "optimizer": maker, "judge_optimizer": judge_optimizer},
                fix=f"Give {maker!r}'s loss the real label (or the opposite sign of the judge's term for its samples).",
                option="debug_player_objectives = False",
            )
        )


class _Judged:
    def __init__(self) -> None:
        self.scores: list[torch.Tensor] = []  # the judge's outputs on made samples (detached)
        self.real_given = False  # the judge was also given a tensor of the same shape that no player made


class _Run:
    def __init__(self) -> None:
        self.judged: dict[tuple[str, str], _Judged] = {}  # (judge path, maker optimizer) -> what it judged
        self.objectives: dict[str, float] = {}  # optimizer -> the sum of the losses that train it
        self.trained_by: dict[str, tuple[str, ...]] = {}  # optimizer -> the names of those losses


def _shifted_run(session: ProbeSession, batch: dict[str, Any], modules: dict[str, Any], shift: float) -> _Run:
    """``train_step`` on a fresh copy whose judging modules add ``shift`` to their scores of made samples."""
    run = _Run()
    with session.isolated(CHECK, train=True) as model:
        with _shifting(model, modules, shift, run):
            run_ctx = session.changed_run(CHECK, model, batch, optional=True)
    names = {name for _, name in modules.values()}
    for name in names:
        losses = [
            (loss_name, marked)
            for loss_name, marked in run_ctx.losses.items()
            if not marked.as_error and (marked.optimizer is None or name in marked.optimizer)
        ]
        run.trained_by[name] = tuple(sorted(n for n, _ in losses))
        run.objectives[name] = float(sum(float(m.normalized().detach().float()) * m.scale for _, m in losses))
    return run


@contextlib.contextmanager
def _shifting(model: nn.Module, modules: dict[str, Any], shift: float, run: _Run) -> Iterator[None]:
    made: dict[int, str] = {}  # storage address of an output -> the optimizer whose module made it
    inputs: list[tuple[str, torch.Tensor]] = []
    copies = dict(model.named_modules())
    handles = []

    def hook_for(path: str, name: str) -> Any:
        def hook(_module: nn.Module, args: tuple, output: Any) -> Any:
            first = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
            if not isinstance(output, torch.Tensor) or not output.is_floating_point():
                return None
            maker = made.get(storage_address(first)) if first is not None else None
            if first is not None and first.dim() >= 2:
                inputs.append((path, first))
            if maker is not None and maker != name:
                run.judged.setdefault((path, maker), _Judged()).scores.append(output.detach())
                output = output + shift
            made[storage_address(output)] = name
            return output

        return hook

    for path, (_, name) in modules.items():
        module = copies[path if path != "(model)" else ""]
        handles.append(module.register_forward_hook(hook_for(path, name)))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
    for (path, _), judged in run.judged.items():
        made_shapes = {tuple(x.shape[1:]) for p, x in inputs if p == path and storage_address(x) in made}
        judged.real_given = any(
            p == path and storage_address(x) not in made and tuple(x.shape[1:]) in made_shapes for p, x in inputs
        )


def _direction(curve: list[float]) -> str | None:
    """ "lower" when the objective is lowest at the lowest shift and does not fall toward the highest, "higher" the
    other way round; None when it has its lowest point inside, is flat, or is not finite."""
    if not all(math.isfinite(v) for v in curve):
        return None
    size = max(max(abs(v) for v in curve), 1.0)

    def rising(values: list[float]) -> bool:
        return all(b >= a - TOLERANCE * size for a, b in zip(values, values[1:], strict=False)) and (
            values[-1] > values[0] + TOLERANCE * size
        )

    if rising(curve):
        return "lower"
    if rising(curve[::-1]):
        return "higher"
    return None


PLUGINS = (PlayerObjectives,)
