"""Generated samples against the data they imitate (``debug_generated_coverage``, on by default with several
optimizers): mode collapse, measured.

A generator trained against a critic (a GAN, any model whose one part judges what another part makes) has
collapsed when its samples bunch up on a few of the data's modes, or on one point, while the data spread over many.
At each epoch's last train step, the step's forward is watched (hooks that read, nothing else): a module that
belongs to one optimizer (the discriminator) and is called with a tensor that a module of another optimizer made
(the generator; ``fake.detach()`` counts, it is the same storage) and, in another call, with a tensor of the same
shape that no such module made (the real batch) gets the two compared, flattened per example:

- *spread*: the root mean squared distance of the samples from their mean, generated against real;
- *precision* and *coverage* (Naeem et al., 2020): the share of generated samples within some real sample's
  neighbourhood (the distance to its 5th nearest real neighbour), and the share of real samples with a generated
  one within theirs.

Samples of the data's distribution spread about as far as the data: 0.9 to 1.1 in the shipped GAN from its third
epoch on; 0.35 to 0.75, rising, over the first 2,500 steps of an MLP GAN on MNIST. At the end of training, a spread
below ``NARROW`` of the data's in the last two measurements is a warning, the generator has collapsed onto a
small part of the data, when it is evidence of a collapse rather than of a slow start: the samples spread at least
``FELL`` times as far at an earlier epoch, or they sit on one point. A collapse onto a few modes far apart (two
opposite modes of a ring) keeps the spread and is not named. Samples that are not on the data at all (low
precision and coverage) are a note: the generator has not learned the data yet, which one run cannot tell from a
slow start. Precision and coverage compare one batch at the data's finest scale and, in pixel space, say little;
they are evidence, not a verdict.
"""

from __future__ import annotations

import torch
from torch import nn

from framework.base import log
from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library.players import WatchedStep, players_of
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_generated_coverage",
    "bool",
    True,
    "With several optimizers: at each epoch's last train step, compare what a module of one optimizer makes (a "
    "generator's samples) with the real data another optimizer's module (a discriminator) is also given (spread, "
    "precision, coverage); samples far narrower than the data at the end of training, after being wider or on one "
    "point, are a warning (mode collapse).",
    __name__,
)

NEIGHBOURS = 5
MIN_SAMPLES = 32  # below this, a batch's k-th neighbour distances are too noisy to judge coverage by
NARROW = 0.25  # generated spread below this share of the data's: concentrated (healthy examples: 0.9 to 1.1)
FELL = 2.0  # a spread this many times wider at an earlier epoch: the samples narrowed (not a slow start)
ONE_POINT = 0.02  # a spread below this share of the data's: one point, whatever came before
OFF_DATA = 0.25  # precision and coverage below this: the samples are not on the data (yet)


def compare(generated: torch.Tensor, real: torch.Tensor) -> dict[str, float]:
    """Precision, coverage and spread ratio of ``generated`` against ``real`` (both ``[N, ...]``)."""
    fake, data = generated.detach().flatten(1).double(), real.detach().flatten(1).double()
    among_real = torch.cdist(data, data)
    radius = among_real.kthvalue(NEIGHBOURS + 1, dim=1).values  # +1: each real sample is its own 0th
    inside = torch.cdist(fake, data) <= radius[None, :]  # [generated, real]
    spread = (fake - fake.mean(0)).pow(2).sum(1).mean().sqrt() / (data - data.mean(0)).pow(2).sum(1).mean().sqrt()
    return {
        "precision": inside.any(1).double().mean().item(),
        "coverage": inside.any(0).double().mean().item(),
        "spread": spread.item(),
    }


class GeneratedCoverage(Plugin):
    """Measures generated samples against the real ones a critic sees; warns about a collapse at the end."""

    def __init__(self, modules: dict[str, tuple[nn.Module, str]]):
        self.modules = modules
        self.watch: WatchedStep | None = None
        self.history: dict[tuple[str, str], list[tuple[int, dict[str, float]]]] = {}

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> GeneratedCoverage | None:
        modules = players_of(state.model, state.optimizer) if config.bool("debug_generated_coverage") else None
        return cls(modules) if modules else None

    @on(Event.STEP_START)
    def start_watching(self, state: RunState) -> None:
        if state.step_in_epoch == state.steps_in_epoch - 1:
            self.watch = WatchedStep(self.modules)

    @on(Event.AFTER_FORWARD)
    def measure(self, state: RunState) -> None:
        if self.watch is None:
            return
        self.watch.remove()
        exchanges, self.watch = self.watch.exchanges, None
        for exchange in exchanges:
            if exchange.real is None or min(len(exchange.made), len(exchange.real)) < MIN_SAMPLES:
                continue
            path, maker = exchange.judge, exchange.maker
            measured = compare(exchange.made, exchange.real)
            self.history.setdefault((path, maker), []).append((state.epoch, measured))
            log.v4(
                f"Generated samples (made by the modules of optimizer {maker!r}, given to {path!r}) against the real batch "
                f"at epoch {state.epoch}: precision {measured['precision']:.2f}, coverage "
                f"{measured['coverage']:.2f}, spread {measured['spread']:.2f} of the data's."
            )

    @on(Event.FINISH)
    def judge(self, state: RunState) -> None:
        for (path, maker), history in self.history.items():
            epoch, last = history[-1]
            widest_epoch, widest = max(history, key=lambda entry: entry[1]["spread"])
            where = {"module": path, "optimizer": maker}
            evidence = {"epoch": epoch, **last, "earlier": [{"epoch": e, **m} for e, m in history[-6:-1]]}
            seen = (
                f"at the last step of epoch {epoch}, the samples that the modules of optimizer {maker!r} made and "
                f"{path!r} was given spread {last['spread']:.2f} times as far from their mean as the real batch"
            )
            narrow = len(history) >= 2 and all(m["spread"] < NARROW for _, m in history[-2:])
            fell = widest["spread"] >= max(FELL * last["spread"], NARROW)
            if narrow and (fell or last["spread"] < ONE_POINT):
                before = f"epoch {widest_epoch}: {widest['spread']:.2f}, " if fell else ""
                before += f"epoch {history[-2][0]}: {history[-2][1]['spread']:.2f}"
                report(
                    Finding(
                        "warning",
                        "generated samples",
                        f"The generator has collapsed onto a small part of the data (mode collapse): {seen}"
                        f" ({before}). They cover {last['coverage']:.0%} of the real samples' neighbourhoods. Check that "
                        f"every sample gets noise of its own at every step; then balance the players (the "
                        f"generator's learning rate, a non-saturating or Wasserstein loss). Each epoch's numbers are "
                        f"logged at log_verbosity 4.",
                        evidence=evidence,
                        where=where,
                        fix="noise of its own for every sample; then balance the generator against the discriminator",
                        option="debug_generated_coverage = False",
                    )
                )
            elif last["precision"] < OFF_DATA and last["coverage"] < OFF_DATA:
                report(
                    Finding(
                        "note",
                        "generated samples",
                        f"The generated samples are not on the data yet: {seen}, {last['precision']:.0%} of them lie "
                        f"in a real sample's neighbourhood and they cover {last['coverage']:.0%} of those. This does "
                        f"not tell a generator that learns slowly from one that cannot learn; train longer and watch "
                        f"these numbers (log_verbosity 4).",
                        evidence=evidence,
                        where=where,
                        option="debug_generated_coverage = False",
                    )
                )


PLUGINS = (GeneratedCoverage,)
