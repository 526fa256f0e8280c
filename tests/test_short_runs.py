"""Short runs are judged: a two-epoch smoke run names shuffled labels, a far too small learning rate (also one a
warmup indexed by the epoch applies) and a diverged training by its end; healthy twins stay quiet; the epoch line
shows the learning rate the optimizer applied; a verdict run tells "not decided yet" from "does not learn"."""

from __future__ import annotations

import os
import re

import pytest
from devkit.doc_commands import assert_documented
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import ROOT, write_config
from framework.assembly import Engine
from framework.base.config import load_config
from framework.core.events import StopTraining
from framework.debug.learning_watch import LossWindowWatch
from framework.debug.verdicts import curve_trend, trend, undecided

ZOO = os.path.join(ROOT, "tests", "zoo")
MNIST = os.path.join(ROOT, "configs", "mnist_mlp.py")  # 63 steps per epoch: a two-epoch run has 126
VAE = os.path.join(ROOT, "configs", "vae_mnist.py")

SHUFFLED_MNIST = """\
# Bug: the train labels shuffled apart from their images.
import numpy as np
from framework.datasets.mnist import MnistDataset

_clean = MnistDataset("train")
_labels = _clean.arrays["classes"][np.random.default_rng(2).permutation(_clean.num_seqs)]
train = {"class": "NumpyDataset", "arrays": {"data": _clean.arrays["data"], "classes": _labels}, "sparse_dims": {"classes": 10}}
"""

WARMUP_BY_EPOCH = """\
# Bug: a warmup over 1000 steps, indexed by the epoch (so 1000 epochs of warmup).
warmup_steps = 1000


def dynamic_learning_rate(*, epoch, learning_rate, **_kwargs):
    return learning_rate * min(1.0, epoch / warmup_steps)
"""

# A tiny Hugging Face BERT (random init): does token 5 occur in the sequence? 50 steps per epoch.
HF_BERT = """\
import numpy as np
import transformers
from torch import nn

transformers.logging.set_verbosity_error()
_rng = np.random.default_rng(0)
_tokens = _rng.integers(6, 32, size=(2000, 12))
_with = np.flatnonzero(_rng.random(2000) < 0.5)
_tokens[_with, _rng.integers(1, 12, size=len(_with))] = 5
_tokens[:, 0] = 1  # [CLS]
_labels = (_tokens == 5).any(axis=1).astype(np.int64)
_sparse = {"data": 32, "classes": 2}
train = {"class": "NumpyDataset", "arrays": {"data": _tokens[:1600], "classes": _labels[:1600]}, "sparse_dims": _sparse}
dev = {"class": "NumpyDataset", "arrays": {"data": _tokens[1600:], "classes": _labels[1600:]}, "sparse_dims": _sparse}
extern_data = {
    "data": {"shape": (12,), "dtype": "int64", "sparse_dim": 32},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.01}
learning_rate = 1e-3


def get_model(*, epoch, step, **_kwargs):
    config = transformers.BertConfig(
        vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=16, num_labels=2,
    )
    return transformers.BertForSequenceClassification(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(input_ids=extern_data["data"]).logits
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
"""
HF_BERT_SHUFFLED = """\
_labels = np.random.default_rng(3).permutation(_labels)
train = {"class": "NumpyDataset", "arrays": {"data": _tokens[:1600], "classes": _labels[:1600]}, "sparse_dims": _sparse}
"""

# The common exercise's VAE loss: one loss, reconstruction and KL summed over the batch (no floor is known).
VAE_EXERCISE_LOSS = """\
def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    x_hat, mean, log_var = model(x)
    BCE = nn.functional.binary_cross_entropy(x_hat, x, reduction="sum")
    KLD = -0.5 * torch.sum(1 + log_var - mean.pow(2) - log_var.exp())
    run_ctx.mark_as_loss(name="loss", loss=BCE + KLD)
"""

TINY_LR = "learning_rate = 1e-8\n"


def _files(tmp_path, *parts: str) -> list[str]:
    """Config files: paths as they are, config texts written to ``tmp_path``."""
    files = []
    for i, part in enumerate(parts):
        files.append(part if part.endswith(".py") else write_config(tmp_path, part, f"part{i}.py"))
    return files


def _train(tmp_path, *parts: str, **overrides) -> Engine:
    """Train in process without checkpoints or log files (the options' log goes to the fixture)."""
    values = {"model": None, "log": None, "tensorboard_dir": None, **overrides}
    engine = Engine(load_config(_files(tmp_path, *parts), values))
    engine.run("train")
    return engine


def _epoch_of(text: str, position: int) -> int:
    """The epoch at whose end (or in which) a line at ``position`` was printed: the epoch lines before it."""
    return len(re.findall(r"^Epoch \d+ train:", text[:position], re.MULTILINE))


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if "WARNING" in line]


CHANCE = (
    r"WARNING learning watch: the train loss 'ce' has stayed at its chance level \(mean \S+ over the last \d+ steps "
    r"up to step \d+; the entropy of the frequencies of the 'classes' labels .*Not decided yet: .*Next experiment: rerun "
    r"with \+\+debug_synthetic_data True"
)
TINY = (
    r"WARNING learning watch: the train loss is not decreasing: .* The updates are negligible: .* The optimizer applied "
    r"a learning rate of at most 1e-08 in these steps, 100000x below the 0.001 that (Adam|AdamW) typically needs\. So "
    r"the learning rate 1e-08 is far too small"
)

SMOKE_RUNS = {
    "MNIST, shuffled labels": ([MNIST, SHUFFLED_MNIST], CHANCE, 1),
    "MNIST, learning_rate 1e-8": ([MNIST, TINY_LR], TINY, 1),
    "zoo classifier, shuffled labels": ([f"{ZOO}/classify.py", f"{ZOO}/shuffled_labels.py"], CHANCE, 1),
    "zoo classifier, learning_rate 1e-8": ([f"{ZOO}/classify.py", f"{ZOO}/tiny_lr.py"], TINY, 1),
    "tiny HF BERT, shuffled labels": ([HF_BERT, HF_BERT_SHUFFLED], CHANCE, 1),
    "tiny HF BERT, learning_rate 1e-8": ([HF_BERT, TINY_LR], TINY, 1),
}


@pytest.mark.parametrize(
    "name",
    # BERT's runs: the longest of these (4.1 and 3.1 s of CPU); the full suite runs them, the fast subset keeps MNIST's
    # and the zoo classifier's run of each problem
    [pytest.param(name, marks=pytest.mark.slow) if "HF BERT" in name else name for name in SMOKE_RUNS],
)
def test_a_two_epoch_smoke_run_names_the_problem_by_the_end_of_its_first_epoch(tmp_path, output, name):  # noqa: F811
    parts, pattern, epoch = SMOKE_RUNS[name]
    _train(tmp_path, *parts, num_epochs=2)
    text = output()
    match = re.search(pattern, text)
    assert match, f"{name}: no match for {pattern!r} in:\n{text[-3000:]}"
    assert _epoch_of(text, match.start()) == epoch
    assert len([w for w in _warnings(text) if "learning watch" in w]) == 1  # one cause, one line


HEALTHY = {
    "MNIST": [MNIST],
    "zoo classifier": [f"{ZOO}/classify.py"],
    "zoo binary cross-entropy": [f"{ZOO}/classify.py", f"{ZOO}/bce_logits.py"],
    "zoo regression (a plateau at first)": [f"{ZOO}/regress.py"],
    "zoo masked sequence labeller": [f"{ZOO}/sequences.py"],
    "zoo GRU with attention pooling": [f"{ZOO}/pooled.py"],
    "tiny HF BERT": [HF_BERT],
}


# BERT's run (3.2 s of CPU, twice the next one) is left to the full suite; the fast subset keeps the other six
@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.slow) if "HF BERT" in name else name for name in HEALTHY]
)
def test_healthy_two_epoch_smoke_runs_stay_quiet(tmp_path, output, name):  # noqa: F811
    _train(tmp_path, *HEALTHY[name], num_epochs=2)
    assert _warnings(output()) == []


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_a_warmup_indexed_by_epoch_is_named_and_every_epoch_line_shows_the_applied_rate(tmp_path, output):  # noqa: F811
    _train(tmp_path, MNIST, WARMUP_BY_EPOCH, num_epochs=2, tensorboard_dir=str(tmp_path / "tb"))
    text = output()
    assert "Epoch 1 train: " in text and ", lr 1e-06 (learning_rate 0.001)" in text
    assert ", lr 2e-06 (learning_rate 0.001)" in text
    match = re.search(
        r"WARNING learning watch: the train loss is not decreasing: .* The optimizer applied a learning rate of at "
        r"most 1e-06 in these steps, 1000x below the 0.001 that Adam typically needs and 1000x below the epoch's "
        r"learning rate 0.001: a per-step schedule \(dynamic_learning_rate\) lowers it, and a warmup indexed by the "
        r"epoch instead of global_train_step gives exactly this\. So the learning rate 1e-06 is far too small\.",
        text,
    )
    assert match and _epoch_of(text, match.start()) == 1
    assert_documented(text, "docs/health.rst", "Epoch 1 train: ce 2.306 fer 0.905, 63 steps")
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert [e.value for e in events.Scalars("epoch/learning_rate")] == pytest.approx([1e-6, 2e-6])
    assert events.Scalars("train/learning_rate")[-1].value == pytest.approx(2e-6)


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_the_epoch_line_shows_a_per_step_warmup_and_a_fixed_schedule_as_applied(tmp_path, output):  # noqa: F811
    warmup = (
        "def dynamic_learning_rate(*, global_train_step, learning_rate, **_kwargs):\n"
        "    return learning_rate * min(1.0, (global_train_step + 1) / 100)\n"
    )
    _train(tmp_path, f"{ZOO}/classify.py", warmup, num_epochs=2)
    lines = re.findall(r"^Epoch \d train: .*", output(), re.MULTILINE)
    assert lines[0].endswith(", lr 0.0001 -> 0.01") and lines[1].endswith(", lr 0.01")
    _train(tmp_path, f"{ZOO}/classify.py", num_epochs=2, learning_rates=[0.01, 0.003])
    lines = re.findall(r"^Epoch \d train: .*", output(), re.MULTILINE)
    assert lines[0].endswith(", lr 0.01") and lines[1].endswith(", lr 0.003")


def test_a_diverged_run_at_chance_is_not_called_overfitting_or_a_label_problem(tmp_path, output):  # noqa: F811
    # The exact curve depends on the thread count (a learning rate of 1 is chaotic); the advice must never
    # contradict it: train sits at (or just above) chance, so nothing was learned that could be overfitted.
    _train(tmp_path, MNIST, num_epochs=4, learning_rate=1.0)
    text = output()
    assert "overfitting" not in text and "Regularize" not in text and "Labels that do not belong" not in text
    for line in [w for w in _warnings(text) if "learning watch" in w]:
        assert "went far above its chance level" in line and "the training diverged" in line


EXPLODING_THEN_FLAT = """def train_step(*, model, extern_data, run_ctx, **_kwargs):
    # huge logits for the first 40 steps (the loss far above chance), then none (the model predicts nothing)
    logits = model(extern_data["data"]) * (1000.0 if run_ctx.step < 40 else 0.0)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
"""


def test_a_loss_that_went_far_above_its_chance_level_and_settled_there_is_named_as_diverged(tmp_path, output):  # noqa: F811
    _train(tmp_path, f"{ZOO}/classify.py", EXPLODING_THEN_FLAT, num_epochs=1, debug_grad_health=False)
    text = output()
    assert re.search(
        r"WARNING learning watch: the train loss 'ce' went far above its chance level \(a mean of \S+ over steps "
        r"\d+-\d+\) and then settled at \(or just above\) it \(mean 1\.386 over the last 96 steps up to step 200; .* "
        r"the training diverged, and the model collapsed to predicting the label frequencies .* Lower the learning "
        r"rate \(0\.01\) or clip gradients",
        text,
    )
    assert "Labels that do not belong" not in text


def test_a_run_that_ends_within_an_epoch_is_judged_at_its_end(tmp_path, output):  # noqa: F811
    def stop(state):
        if state.global_step == 120:
            raise StopTraining("enough")

    _train(tmp_path, f"{ZOO}/classify.py", f"{ZOO}/shuffled_labels.py", num_epochs=1, callbacks={"step_end": stop})
    text = output()
    assert re.search(CHANCE.replace(r"up to step \d+", "up to step 120"), text)
    assert "Epoch 1 train:" not in text


def test_the_learning_watch_takes_the_state_of_a_checkpoint_written_before_the_curve():
    watch = LossWindowWatch(200)
    watch.load_state_dict(
        {"count": 17, "base": None, "carry": {}, "first": 1.2, "warned": True, "at_chance": {"ce": -1}}
    )
    assert watch.warned and watch.chance_warned == ["ce"] and watch.segments == [] and watch.steps == 0


@pytest.mark.slow  # seconds of work: the full suite runs it, the fast subset does not
def test_the_common_vae_exercise_is_not_decided_yet_not_an_error(tmp_path, output):  # noqa: F811
    _train(tmp_path, VAE, VAE_EXERCISE_LOSS, debug_overfit_batches=1)  # raises VerdictError when it "does NOT learn"
    text = output()
    match = re.search(
        r"debug_overfit_batches verdict: NOT DECIDED yet: the loss on the first 1 batch\(es\) \(eval mode\) went from "
        r"5\.4\d+e\+04 to (\d+) \(x0\.1\d+ of the way left; 'learns' needs x0\.15 or less\) in 300 steps\. .* The loss "
        r"fell x5\.\d+ and is still falling: -\d+% of the way left over the last 75 steps .*; at that rate about (\d+) "
        r"more steps would reach 'learns' .* no floor of this loss is known .* Run again with "
        r"\+\+debug_overfit_steps (\d+) to decide\.",
        text,
    )
    assert match, text[-3000:]
    assert 0 < int(match.group(2)) <= 300 and int(match.group(3)) >= 300 + int(match.group(2))
    assert "ERROR" not in text and "does NOT learn" not in text
    assert_documented(text, "docs/health.rst", "debug_overfit_batches verdict: NOT DECIDED yet")


def _geometric(start: float, factor: float, steps: int, floor: float = 0.0) -> list[float]:
    return [floor + (start - floor) * factor**i for i in range(steps)]


def test_verdicts_have_three_outcomes_by_progress_towards_the_floor_and_the_trend():
    # Fell x5.6 and still falling 14% per quarter: not decided yet, with the steps the current rate would take.
    losses = _geometric(5.5e4, 0.9942, 300)
    left = losses[-1] / losses[0]
    shape = curve_trend(losses, 0.0, left, 0.15)
    assert shape.falling and shape.unit == 75 and 0 < shape.more * shape.unit <= 300 and undecided(left, 300, shape)
    # Flat at the end, far from the floor: does not learn (not falling, nothing to wait for).
    flat = _geometric(2.0, 0.9, 100, floor=1.5) + [1.5] * 200
    assert not curve_trend(flat, 0.0, 0.75, 0.15).falling
    assert not undecided(0.75, 300, curve_trend(flat, 0.0, 0.75, 0.15))
    # A third of the way left above the floor, falling 10% per quarter: 'learns' is 675 steps away, does not learn.
    slow = trend(250.7, 230.7, 45.1, 0.36, 0.15, unit=75)
    assert slow.falling and slow.more * slow.unit > 300 and not undecided(0.36, 300, slow)
    # Still falling, but quickly enough that as many steps again would reach 'learns': not decided yet.
    assert undecided(0.4, 300, trend(100.0, 60.0, 0.0, 0.4, 0.15, unit=75))
    assert trend(100.0, 99.0, 0.0, 0.5, 0.15).more is None  # 1% is no longer falling


def test_a_synthetic_data_run_cut_short_is_not_decided_yet(tmp_path, output):  # noqa: F811
    # One epoch: the synthetic dev loss fell by a third and falls on; 'learns' needs half of the way.
    _train(tmp_path, os.path.join(ROOT, "tests", "data", "tiny_config.py"), debug_synthetic_data=True, num_epochs=1)
    text = output()
    assert re.search(
        r"debug_synthetic_data verdict: NOT DECIDED yet on the synthetic dev set after 1 epoch\(s\): ce \S+ -> \S+, fer "
        r".*: x0\.\d+ of the way left, still falling: ce -\d+% of the way left over the last epoch \(\S+ -> \S+\); at "
        r"that rate about \d+ more epoch\(s\) would reach 'learns' .* Run again with \+\+num_epochs \d+ to decide\.",
        text,
    ), text[-2000:]
