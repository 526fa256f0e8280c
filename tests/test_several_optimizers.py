"""Several optimizers (issue 53): the ``optimizers`` option, losses marked for one optimizer each, updates that
reach only the marked optimizer's parameters, alternating updates, resuming bit for bit after a kill at several
points, and the config errors. Real Engine runs of the shipped GAN and actor-critic configs and of small configs
of their own.
"""

from __future__ import annotations

import os
import signal

import pytest
import torch
from devkit.doc_commands import assert_documented

from conftest import ROOT, run_rnn, run_torchrun, tiny_config_with, write_config
from framework.assembly import Engine
from framework.base.config import load_config
from framework.base.errors import ConfigError
from framework.core.run_ctx import RunCtx
from framework.testing import bitwise_equal
from framework.training.optimizer_set import OptimizerSet

GAN = os.path.join(ROOT, "configs", "gan_ring.py")
ACTOR_CRITIC = os.path.join(ROOT, "configs", "actor_critic_corridor.py")

# Two linear parts, the second reading the first's output: "second"'s loss reaches both parts.
TWO_PARTS = """
import torch
from torch import nn

task = "train"
train = {"class": "NumpyDataset", "arrays": {"data": torch.randn(64, 3, generator=torch.Generator().manual_seed(0)).numpy()}}
extern_data = {"data": {"shape": (3,)}}
batch_size = 16
num_epochs = 1
learning_rate = 0.01
optimizers = {"first": {"class": "sgd", "params": "first.*"}, "second": {"class": "adam", "params": "second.*"}}
report_html = False


class TwoParts(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(3, 3), nn.Linear(3, 1)


def get_model(**_):
    return TwoParts()


def train_step(*, model, extern_data, run_ctx, **_):
    hidden = model.first(extern_data["data"])
    run_ctx.mark_as_loss(hidden.pow(2).mean(), "first_loss", optimizer="first")
    run_ctx.mark_as_loss(model.second(hidden).mean(), "second_loss", optimizer="second")
"""


def _engine(tmp_path, text: str, **overrides) -> Engine:
    config = load_config([write_config(tmp_path, text)], {"model": str(tmp_path / "model"), **overrides})
    return Engine(config)


def test_each_loss_reaches_only_the_parameters_of_its_optimizer(tmp_path):
    engine = _engine(tmp_path, TWO_PARTS)
    engine.init_train()
    model, optimizers = engine.state.model, engine.state.optimizer
    assert isinstance(optimizers, OptimizerSet) and optimizers.names == ("first", "second")
    batch = {"data": torch.randn(8, 3)}
    run_ctx = RunCtx(stage="train", epoch=1, step=0, batch=batch, optimizers=optimizers.names)
    engine.config.get("train_step")(model=model, extern_data=batch, run_ctx=run_ctx)
    optimizers.backward(run_ctx, None, None)
    first, second = list(model.first.parameters()), list(model.second.parameters())
    expected_first = torch.autograd.grad(model.first(batch["data"]).pow(2).mean(), first)
    expected_second = torch.autograd.grad(model.second(model.first(batch["data"])).mean(), second)
    # "second_loss" also reaches the first part: through the whole graph, its gradients would differ
    assert all(torch.allclose(p.grad, g) for p, g in zip(first, expected_first, strict=True))
    assert all(torch.allclose(p.grad, g) for p, g in zip(second, expected_second, strict=True))
    engine.checkpoints.release()


def test_an_optimizer_whose_loss_is_not_marked_leaves_its_parameters_as_they_are(tmp_path):
    # n critic steps per generator step: the second part's loss only at every third step
    text = TWO_PARTS.replace(
        '    run_ctx.mark_as_loss(model.second(hidden).mean(), "second_loss", optimizer="second")',
        "    if run_ctx.step % 3 == 2:\n"
        '        run_ctx.mark_as_loss(model.second(hidden).mean(), "second_loss", optimizer="second")',
    )
    text += (
        "moved = []\n"
        "def _note(state):\n"
        "    moved.append([p.detach().clone() for p in state.model.parameters()])\n"
        "callbacks = {'after_optimizer_step': _note}\n"
    )
    engine = _engine(tmp_path, text)
    engine.run("train")
    moved = engine.config.get("callbacks")["after_optimizer_step"].__globals__["moved"]
    assert len(moved) == 4  # 64 sequences, batches of 16
    changed = [
        [not torch.equal(before, after) for before, after in zip(moved[i - 1], moved[i], strict=True)]
        for i in range(1, len(moved))
    ]
    # steps 1, 2, 3: the first part (weight, bias) moves every step, the second only at step 2
    assert changed == [[True, True, False, False], [True, True, True, True], [True, True, False, False]]


@pytest.mark.parametrize(
    "optimizers, words",
    [
        ('{"a": {"class": "adam", "params": "*"}, "b": {"class": "adam", "params": "second.*"}}', "both select"),
        ('{"a": {"class": "adam", "params": "first.*"}}', "no optimizer selects second.weight"),
        ('{"a": {"class": "adam"}}', "has no 'params'"),
        ('{"a": {"class": "adam", "params": "third.*"}, "b": {"params": "*"}}', "selects no trainable parameter"),
        (
            '{"a": {"class": "adam", "params": "first.*", "lr": 0.1}, "b": {"class": "sgd", "params": "second.*"}}',
            "not optimizers\\['a'\\]\\['lr'\\]",
        ),
        ('[{"class": "adam"}]', "'optimizers' expects dict"),
    ],
)
def test_optimizers_that_cannot_be_meant_are_config_errors(tmp_path, optimizers, words):
    with pytest.raises(ConfigError, match=words):
        _engine(tmp_path, TWO_PARTS + f"optimizers = {optimizers}\n").run("train")


@pytest.mark.parametrize(
    "old, new, words",
    [
        ('"second_loss", optimizer="second")', '"second_loss", optimizer="third")', "no optimizer named 'third'"),
        ('"first_loss", optimizer="first")', '"first_loss")', "say which one this loss trains"),
    ],
)
def test_a_loss_marked_for_no_declared_optimizer_fails_in_the_train_step(tmp_path, old, new, words):
    engine = _engine(tmp_path, TWO_PARTS.replace(old, new))
    with pytest.raises(ValueError, match=words) as raised:
        engine.run("train")
    assert [entry.name for entry in raised.traceback[-3:]] == ["train_step", "mark_as_loss", "_optimizers_of"]


def test_one_optimizer_refuses_a_loss_marked_for_a_named_one(tmp_path):
    text = TWO_PARTS.replace("optimizers = {", "optimizer = {'class': 'adam'}\n_unused = {")
    engine = _engine(tmp_path, text)
    with pytest.raises(ValueError, match="the config has one optimizer"):
        engine.run("train")


@pytest.mark.slow
def test_the_shipped_examples_learn_quietly():
    # 3000 GAN steps and 8 epochs of actor-critic: minutes of wall time on a loaded machine (a hang guard, not a limit)
    gan = run_rnn(GAN, "++model", "", "++num_epochs", "10", timeout=600)
    assert gan.returncode == 0, gan.stderr
    assert "WARNING" not in gan.stdout + gan.stderr and "findings: none" in gan.stdout
    last = [line for line in gan.stdout.splitlines() if line.startswith("Epoch 10 evaluation")][0]
    off_mode = float(last.split("off_mode ")[1].split()[0])
    assert off_mode < 0.5  # 1.000 after the first epoch: the samples moved onto the ring's modes
    actor_critic = run_rnn(ACTOR_CRITIC, "++model", "", timeout=600)
    assert actor_critic.returncode == 0, actor_critic.stderr
    assert "WARNING" not in actor_critic.stdout + actor_critic.stderr
    last = [line for line in actor_critic.stdout.splitlines() if line.startswith("Epoch 8 evaluation")][0]
    assert float(last.split("regret ")[1].split()[0]) < 0.05  # 0.40 walking one way


# Appended to a config: ++kill_at_step N kills the process at global step N.
KILL_AT_STEP = """
import os as _os, signal as _signal
kill_at_step = None
_train_step = train_step
def train_step(*, model, extern_data, run_ctx, **kwargs):
    if run_ctx.step == kill_at_step:
        _os.kill(_os.getpid(), _signal.SIGKILL)
    _train_step(model=model, extern_data=extern_data, run_ctx=run_ctx, **kwargs)
"""
GAN_TWO_EPOCHS = """
train = {"class": "NumpyDataset", "arrays": {"data": ring(2560, seed=1)}}
dev = {"class": "NumpyDataset", "arrays": {"data": ring(256, seed=2)}}
num_epochs = 2
"""


@pytest.mark.slow
def test_a_gan_killed_anywhere_resumes_bit_for_bit(tmp_path):
    with open(GAN, encoding="utf-8") as f:
        config = write_config(tmp_path, f.read() + GAN_TWO_EPOCHS + KILL_AT_STEP)
    reference = run_rnn(config, "++model", str(tmp_path / "ref/m"))
    assert reference.returncode == 0, reference.stderr
    expected = torch.load(tmp_path / "ref/m.002.pt", weights_only=True)
    assert set(expected["optimizer"]["optimizers"]) == {"discriminator", "generator"}
    # 10 steps an epoch: killed in the first epoch, at its last step, and in the second epoch
    for kill_at in (3, 9, 14):
        run = ["++model", str(tmp_path / f"run{kill_at}/m"), "++checkpoint_every_n_minutes", "1e-9"]
        killed = run_rnn(config, *run, "++kill_at_step", str(kill_at))
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        resumed = run_rnn(config, *run)
        assert resumed.returncode == 0, resumed.stderr
        assert f"global step {kill_at}." in resumed.stdout
        got = torch.load(tmp_path / f"run{kill_at}/m.002.pt", weights_only=True)
        for key in ("model", "optimizer", "plugins", "rng", "learning_rate_control"):
            assert bitwise_equal(expected[key], got[key]), (kill_at, key)


@pytest.mark.slow
@pytest.mark.parametrize(
    "config, old, new, untrained",
    [
        (GAN, '"d", optimizer="discriminator")', '"d", optimizer="generator")', "discriminator"),
        (ACTOR_CRITIC, '"critic", optimizer="critic")', '"critic", optimizer="actor")', "critic"),
    ],
)
def test_an_optimizer_that_no_loss_is_marked_for_is_named(tmp_path, config, old, new, untrained):
    with open(config, encoding="utf-8") as f:
        text = f.read()
    assert old in text
    run = run_rnn(write_config(tmp_path, text.replace(old, new)), "++model", "", "++num_epochs", "1")
    assert run.returncode == 0, run.stderr
    assert f"belong to optimizer '{untrained}', and no loss was marked for it" in run.stdout
    assert "not connected to the loss" not in run.stdout  # the cause a single optimizer's run would guess
    if untrained == "discriminator":
        assert_documented(run.stdout, "docs/several_optimizers.rst", "WARNING gradient health: module 'discriminator")


# Two players on the tiny config's data, no dropout; the second is updated at every other step only.
TWO_PLAYERS = """
optimizers = {"first": {"class": "adam", "params": "0.*"}, "second": {"class": "sgd", "params": "2.*"}}
learning_rate = 0.05
def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 3))
def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    loss = nn.functional.cross_entropy(logits, extern_data["classes"])
    run_ctx.mark_as_loss(loss, "first_ce", optimizer="first")
    if run_ctx.step % 2 == 0:
        run_ctx.mark_as_loss(loss, "second_ce", optimizer="second")
"""


@pytest.mark.slow  # three two-rank torchrun jobs and a one-process run: seconds
def test_two_ranks_of_several_optimizers_match_one_process_and_resume_bit_for_bit_after_a_kill(tmp_path):
    config = tiny_config_with(tmp_path, TWO_PLAYERS + KILL_AT_STEP)
    two = run_torchrun(config, "++batch_size", "8", "++model", str(tmp_path / "two/m"), "++torch_distributed", "{}")
    assert two.returncode == 0, two.stdout + two.stderr
    assert "WARNING" not in two.stdout
    # the gradients averaged over the ranks: as one process with both ranks' batches in one
    one = run_rnn(config, "++batch_size", "16", "++model", str(tmp_path / "one/m"))
    assert one.returncode == 0, one.stderr
    a, b = torch.load(tmp_path / "two/m.002.pt"), torch.load(tmp_path / "one/m.002.pt")
    assert all(torch.allclose(a["model"][k], b["model"][k], atol=1e-5) for k in a["model"])
    # the alternating player's optimizer state is that of the one process too (momentum-free SGD: none; Adam's)
    first_a, first_b = (x["optimizer"]["optimizers"]["first"]["state"] for x in (a, b))
    assert all(torch.allclose(first_a[i]["exp_avg"], first_b[i]["exp_avg"], atol=1e-6) for i in first_b)
    # killed mid-epoch (13 steps an epoch: in the second), resumed: bit for bit the uninterrupted two-rank run
    run = ["++torch_distributed", "{}", "++batch_size", "8", "++model", str(tmp_path / "run/m")]
    run += ["++checkpoint_every_n_minutes", "1e-9"]
    killed = run_torchrun(config, *run, "++kill_at_step", "17")
    assert killed.returncode != 0
    resumed = run_torchrun(config, *run)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "global step 17." in resumed.stdout
    expected, got = (torch.load(tmp_path / f"{d}/m.002.pt", weights_only=True) for d in ("two", "run"))
    for key in ("model", "optimizer", "rng", "learning_rate_control"):
        assert bitwise_equal(expected[key], got[key]), key


def test_an_optimizer_with_its_own_schedule_follows_it_while_the_other_follows_the_runs(tmp_path):
    # "second" warms up over 4 steps from the rate the run gives it (0.01 x its ratio 0.5); "first" keeps the run's
    text = TWO_PARTS + (
        "learning_rates = [0.01, 0.002]\n"
        "num_epochs = 2\n"
        "def _warmup(*, global_train_step, learning_rate, epoch_continuous, **_):\n"
        "    return learning_rate * min(1.0, (global_train_step + 1) / 4)\n"
        "optimizers = {\n"
        "    'first': {'class': 'sgd', 'params': 'first.*'},\n"
        "    'second': {'class': 'sgd', 'params': 'second.*', 'learning_rate': 0.005, 'dynamic_learning_rate': _warmup,\n"
        "               'param_groups': [{'params': 'second.bias', 'lr_multiplier': 10.0}]},\n"
        "}\n"
        "rates = []\n"
        "def _note(state):\n"
        "    rates.append([g['lr'] for g in state.optimizer.param_groups])\n"
        "callbacks = {'before_optimizer_step': _note}\n"
    )
    engine = _engine(tmp_path, text)
    engine.run("train")
    rates = engine.config.get("callbacks")["before_optimizer_step"].__globals__["rates"]
    groups = [g["optimizer"] for g in engine.state.optimizer.param_groups]
    assert groups[0] == "first" and groups[1:] == ["second"] * (len(groups) - 1)
    first = [r[0] for r in rates]
    assert first == pytest.approx([0.01] * 4 + [0.002] * 4)
    # the second optimizer's groups: its weight at its own rate, its bias at 10x, the ratio between them kept
    expected = [0.005 * min(1.0, (step + 1) / 4) for step in range(4)] + [0.001] * 4
    by_group = list(zip(*(r[1:] for r in rates), strict=True))
    assert sorted(by_group, key=lambda g: g[0]) == [pytest.approx(expected), pytest.approx([10 * e for e in expected])]
    engine.checkpoints.release()


@pytest.mark.slow  # a float16 run: seconds
def test_under_loss_scaling_an_overflow_skips_only_the_update_of_the_optimizer_it_is_in(tmp_path):
    # the second part's loss is 10^4 times larger at step 2: scaled, its float16 gradients overflow; the first's do not
    text = TWO_PARTS.replace(
        '    run_ctx.mark_as_loss(model.second(hidden).mean(), "second_loss", optimizer="second")',
        "    blow_up = 1e4 if run_ctx.step == 2 else 1.0\n"
        '    run_ctx.mark_as_loss(model.second(hidden).mean() * blow_up, "second_loss", optimizer="second")',
    )
    text += (
        "torch_amp = {'dtype': 'float16'}\n"
        "moved, scales = [], []\n"
        "def _note(state):\n"
        "    moved.append([p.detach().clone() for p in state.model.parameters()])\n"
        "    scales.append(float(state.loss_scale))\n"
        "callbacks = {'after_optimizer_step': _note}\n"
    )
    engine = _engine(tmp_path, text)
    engine.run("train")
    notes = engine.config.get("callbacks")["after_optimizer_step"].__globals__
    moved, scales = notes["moved"], notes["scales"]
    changed = [
        [not torch.equal(before, after) for before, after in zip(moved[i - 1], moved[i], strict=True)]
        for i in range(1, len(moved))
    ]
    # step 2: the first part (weight, bias) moves, the second does not; steps 1 and 3: both move
    assert changed == [[True] * 4, [True, True, False, False], [True] * 4]
    assert scales[3] == scales[2] / 2  # one scale, used by both, which the overflow at step 2 halved
    assert all(torch.isfinite(p).all() for p in moved[-1])
    engine.checkpoints.release()


def test_an_optimizer_with_its_own_accumulation_steps_every_kth_update_on_the_mean_of_its_window(tmp_path):
    text = TWO_PARTS + (
        "optimizers = {'first': {'class': 'sgd', 'params': 'first.*'},\n"
        "              'second': {'class': 'sgd', 'params': 'second.*', 'accum_grad_multiple_step': 2}}\n"
        "bias, grads, start = [], [], []\n"
        "def _before(state):\n"
        "    grads.append(float(state.model.second.bias.grad))\n"
        "    start.append(float(state.model.second.bias.detach()))\n"
        "def _after(state):\n"
        "    bias.append(float(state.model.second.bias.detach()))\n"
        "callbacks = {'before_optimizer_step': _before, 'after_optimizer_step': _after}\n"
    )
    engine = _engine(tmp_path, text)
    engine.run("train")
    notes = engine.config.get("callbacks")["after_optimizer_step"].__globals__
    start = notes["start"][0]
    # the second loss is a mean of the second part's outputs: d/d bias = 1 per step, 1/2 per step of a window of 2
    assert notes["grads"] == pytest.approx([0.5, 1.0, 0.5, 1.0])
    # it steps at updates 2 and 4 only, by the learning rate times the window's mean gradient
    assert notes["bias"] == pytest.approx([start, start - 0.01, start - 0.01, start - 0.02])
    engine.checkpoints.release()


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"accum_grad_multiple_step": 2}, "not both"),
        ({"torch_amp": "float16"}, "under loss scaling"),
    ],
)
def test_an_optimizers_own_accumulation_that_cannot_work_is_a_config_error(tmp_path, overrides, words):
    text = TWO_PARTS + (
        "optimizers = {'first': {'class': 'sgd', 'params': 'first.*'},\n"
        "              'second': {'class': 'sgd', 'params': 'second.*', 'accum_grad_multiple_step': 3}}\n"
    )
    with pytest.raises(ConfigError, match=words):
        _engine(tmp_path, text, **overrides).run("train")


@pytest.mark.slow  # three real runs: seconds
def test_a_run_killed_inside_an_optimizers_accumulation_window_resumes_bit_for_bit(tmp_path):
    text = TWO_PARTS + (
        "num_epochs = 2\n"
        "optimizers = {'first': {'class': 'adam', 'params': 'first.*'},\n"
        "              'second': {'class': 'adam', 'params': 'second.*', 'accum_grad_multiple_step': 3}}\n"
    )
    config = write_config(tmp_path, text + KILL_AT_STEP)
    reference = run_rnn(config, "++model", str(tmp_path / "ref/m"))
    assert reference.returncode == 0, reference.stderr
    assert "WARNING" not in reference.stdout
    run = ["++model", str(tmp_path / "run/m"), "++checkpoint_every_n_minutes", "1e-9"]
    # 4 steps an epoch; 'second' steps at updates 3 and 6: after update 4 its window holds one update's gradients
    killed = run_rnn(config, *run, "++kill_at_step", "4")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = run_rnn(config, *run)
    assert resumed.returncode == 0, resumed.stderr
    assert "global step 4." in resumed.stdout
    expected, got = (torch.load(tmp_path / f"{d}/m.002.pt", weights_only=True) for d in ("ref", "run"))
    for key in ("model", "optimizer"):
        assert bitwise_equal(expected[key], got[key]), key


@pytest.mark.slow  # a three-epoch run with dev evaluations: seconds
def test_newbob_early_stopping_and_the_learning_rate_file_drive_every_optimizer_at_its_ratio(tmp_path):
    text = TWO_PARTS + (
        "dev = {'class': 'NumpyDataset', 'arrays': {'data': torch.randn(32, 3).numpy()}}\n"
        "num_epochs = 4\n"
        "learning_rate_control = 'newbob'\n"
        "newbob_relative_error_threshold = -1.0\n"  # every epoch 'did not improve enough': the rate decays
        "newbob_learning_rate_decay = 0.5\n"
        "optimizers['second']['learning_rate'] = 0.002\n"
        f"learning_rate_file = {str(tmp_path / 'lr.txt')!r}\n"
        "early_stopping_patience = 2\n"
        "early_stopping_min_delta = 1.0\n"  # no epoch improves by that much: the run stops after epoch 3
        "rates = {}\n"
        "def _note(state):\n"
        "    rates[state.epoch] = [g['lr'] for g in state.optimizer.param_groups]\n"
        "callbacks = {'epoch_end': _note}\n"
    )
    engine = _engine(tmp_path, text)
    engine.run("train")
    rates = engine.config.get("callbacks")["epoch_end"].__globals__["rates"]
    firsts = [groups[0] for groups in rates.values()]
    assert firsts[0] == pytest.approx(0.01) and firsts[-1] < firsts[0]  # newbob decayed the run's rate
    assert all(groups[-1] == pytest.approx(groups[0] * 0.2) for groups in rates.values())  # 'second' kept its ratio
    written = (tmp_path / "lr.txt").read_text()
    for epoch, first in zip(rates, firsts, strict=True):
        assert f"{epoch}: EpochData(learningRate={first!r}" in written
    assert list(rates) == [1, 2, 3]  # early stopping ended it, as with one optimizer
    engine.checkpoints.release()
