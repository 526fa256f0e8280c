"""The classic failures of games between optimizers (issue 53, item 5), named from measurements: samples that
collapse onto a small part of the data (framework.debug.generated_coverage) and a player that gets no gradient
because the other passes it none (framework.debug.player_gradients). Real runs of the shipped GAN and a tutorial
MLP GAN on MNIST, each bug against its fixed twin; the judgement's branches on measured histories.
"""

from __future__ import annotations

import os

import pytest
from devkit.doc_commands import assert_documented

from conftest import ROOT, run_rnn, write_config
from framework.base.findings import Finding, add_sink, remove_sink
from framework.debug import player_gradients
from framework.debug.player_gradients import PlayerGradients

GAN_RING = os.path.join(ROOT, "configs", "gan_ring.py")
GAN_MNIST = os.path.join(ROOT, "tests", "zoo", "gan_mnist.py")


def _variant(tmp_path, path: str, *replacements: tuple[str, str]) -> str:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    return write_config(tmp_path, text)


# One noise vector for the whole batch (a tensor drawn with batch size 1 and broadcast): every sample is the same.
ONE_NOISE = (
    "torch.randn(num, NOISE_DIM, device=self.discriminator[0].weight.device)",
    "torch.randn(1, NOISE_DIM, device=self.discriminator[0].weight.device).expand(num, -1)",
)
# The original minimax generator loss, minimising log(1 - D(G(z))), against a discriminator that learns faster.
SATURATING = (
    'run_ctx.mark_as_loss(bce(g_logits, torch.ones_like(g_logits)), "g", optimizer="generator")',
    'run_ctx.mark_as_loss(-bce(g_logits, torch.zeros_like(g_logits)), "g", optimizer="generator")',
)
FAST_JUDGE = (
    '"discriminator": {"class": "adam", "params": "discriminator.*", "betas": (0.5, 0.999)}',
    '"discriminator": {"class": "adam", "params": "discriminator.*", "betas": (0.5, 0.999), "learning_rate": 2e-3}',
)
SLOW_PLAYER = (
    '"generator": {"class": "adam", "params": "generator.*", "betas": (0.5, 0.999)}',
    '"generator": {"class": "adam", "params": "generator.*", "betas": (0.5, 0.999), "learning_rate": 2e-5}',
)


@pytest.mark.slow  # a GAN run: seconds
def test_samples_that_sit_on_one_point_are_a_mode_collapse(tmp_path):
    # the fixed twin is the shipped example, quiet in test_several_optimizers.py's run of it
    bug = run_rnn(_variant(tmp_path, GAN_RING, ONE_NOISE), "++model", "", "++num_epochs", "3")
    assert bug.returncode == 0, bug.stderr
    assert "WARNING generated samples: The generator has collapsed onto a small part of the data" in bug.stdout
    assert "spread 0.00 times as far from their mean as the real batch" in bug.stdout
    assert_documented(bug.stdout, "docs/several_optimizers.rst", "WARNING generated samples: The generator has")


@pytest.mark.slow  # two GAN runs on MNIST: seconds each
def test_a_saturating_generator_loss_against_a_winning_discriminator_is_named_where_the_gradient_vanishes(tmp_path):
    common = ("++model", "", "++num_epochs", "6", "++log_verbosity", "3")
    bug = run_rnn(_variant(tmp_path, GAN_MNIST, SATURATING, FAST_JUDGE, SLOW_PLAYER), *common)
    assert bug.returncode == 0, bug.stderr
    assert (
        "WARNING player gradients: The parameters of optimizer 'generator' get almost no gradient any more"
        in bug.stdout
    )
    assert "It vanishes before it reaches 'generator': what comes back through 'discriminator'" in bug.stdout
    assert "The losses of 'discriminator' fell from" in bug.stdout and "it wins" in bug.stdout
    assert_documented(bug.stdout, "docs/several_optimizers.rst", "WARNING player gradients: The parameters of")
    # the twin: the non-saturating loss, the same learning rates; its discriminator wins too, and the generator
    # still gets its gradient
    (tmp_path / "twin").mkdir()
    twin = run_rnn(_variant(tmp_path / "twin", GAN_MNIST, FAST_JUDGE, SLOW_PLAYER), *common)
    assert twin.returncode == 0, twin.stderr
    assert "player gradients:" not in twin.stdout
    # both generator losses oppose the discriminator (the saturating one too): no cooperation
    assert "players cooperate" not in bug.stdout + twin.stdout


# The generator trained toward the fake label: it wants what the discriminator wants.
FAKE_LABEL = (
    'run_ctx.mark_as_loss(bce(fake_logits, torch.ones_like(fake_logits)), "g", optimizer="generator")',
    'run_ctx.mark_as_loss(bce(fake_logits, torch.zeros_like(fake_logits)), "g", optimizer="generator")',
)


@pytest.mark.slow
def test_a_generator_trained_toward_the_fake_label_cooperates_with_its_judge(tmp_path):
    bug = run_rnn(_variant(tmp_path, GAN_RING, FAKE_LABEL), "++model", "", "++num_epochs", "1")
    assert bug.returncode == 0, bug.stderr
    warning = (
        "WARNING sanity check: The players cooperate instead of competing: the losses of optimizer 'generator' and "
        "of optimizer 'discriminator' both want the scores that 'discriminator' gives to what the modules of "
        "'generator' made to be lower."
    )
    assert warning in bug.stdout
    assert "Its loss has the judge's target or sign" in bug.stdout
    assert_documented(bug.stdout, "docs/several_optimizers.rst", "WARNING sanity check: The players cooperate")


def _measured(step: int, generator: float, returned: float, judge_loss: float) -> player_gradients._Measured:
    measured = player_gradients._Measured(epoch=step, step=step)
    measured.gradients = {"generator": generator, "discriminator": 1.0}
    measured.losses = {"generator": 1.0, "discriminator": judge_loss}
    measured.returned = {("discriminator", "generator"): returned}
    return measured


@pytest.mark.parametrize(
    "returned_last, words",
    [
        (1e-5, "It vanishes before it reaches 'generator'"),
        (0.5, "the gradient vanishes inside 'generator''s own modules"),
    ],
)
def test_where_a_players_gradient_vanished_decides_what_is_named(returned_last, words):
    plugin = PlayerGradients({"discriminator": (None, "discriminator"), "generator": (None, "generator")})
    plugin.history = [
        _measured(0, 0.3, 0.002, 1.4),
        _measured(10, 2.0, 0.4, 1.2),
        _measured(20, 0.005, returned_last, 0.01),
        _measured(30, 0.004, returned_last, 0.01),
    ]
    found: list[Finding] = []
    add_sink(found.append)
    try:
        plugin.judge(None)
    finally:
        remove_sink(found.append)
    assert len(found) == 1 and words in found[0].message
    assert found[0].evidence["gradient_peak"] == 2.0 and found[0].where == {
        "optimizer": "generator",
        "module": "discriminator",
    }
    plugin.history[-2] = _measured(20, 0.5, 0.4, 0.01)  # the epoch before had its gradient: not judged yet
    add_sink(found.append)
    try:
        plugin.judge(None)
    finally:
        remove_sink(found.append)
    assert len(found) == 1
