"""Model and data health checks, in process: each fires on a config with the problem and stays silent without."""

import json
import re

import numpy as np
import pytest
import torch
from devkit.doc_commands import assert_documented
from torch import nn

from conftest import captured_log
from framework.assembly import Engine
from framework.base.config import Config
from framework.base.errors import ConfigError, DataError, ModelCheckError
from framework.datasets import NumpyDataset
from framework.datasets.base import Dataset


def _train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))


def _clusters(split, **kwargs):
    return {"class": "GaussianClustersDataset", "split": split, "num_seqs": 200, "dim": 4, **kwargs}


def _mlp(**_):
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))


def _train(**overrides) -> Engine:
    values = {
        "train": _clusters("train"),
        "dev": _clusters("test"),
        "batch_size": 16,
        "num_epochs": 2,
        "learning_rate": 1e-2,
        "get_model": _mlp,
        "train_step": _train_step,
        "debug_grad_health": True,
    }
    values.update(overrides)
    engine = Engine(Config.from_dict(values))
    engine.run("train")
    return engine


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("WARNING")]


def test_a_healthy_config_gets_no_warning(output):
    _train(num_epochs=3)
    assert _warnings(output()) == []


class _Disconnected(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.unused, self.head = nn.Linear(4, 16), nn.Linear(16, 16), nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.body(x).relu())


def test_a_layer_defined_but_not_connected_is_named(output):
    _train(get_model=lambda **_: _Disconnected())
    text = output()
    assert "module 'unused' (Linear): weight, bias receive no gradient" in text
    assert "module 'unused' (Linear): weight, bias did not change in" in text  # gradient health, later
    assert "'body'" not in text and "'head'" not in text
    assert_documented(text, "docs/health.rst", "WARNING sanity check (first 9 updates): module 'unused'")


def _frozen_head(**_):
    model = _Disconnected()
    del model.unused
    model.head.requires_grad_(False)
    return model


class _WithAverage(nn.Module):
    """An MLP beside a frozen running average of its output layer that its forward moves in place in training."""

    def __init__(self):
        super().__init__()
        self.net = _mlp()
        self.average = nn.Linear(16, 3).requires_grad_(False)

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                for a, p in zip(self.average.parameters(), self.net[2].parameters(), strict=True):
                    a.lerp_(p, 0.1)
        return self.net(x)


def test_declared_frozen_parameters_the_optimizer_moves_are_named_and_those_the_users_code_moves_are_not(output):
    _train(frozen_params=["2.*"])  # declared, but they require grad: the optimizer trains them
    assert "frozen_params: module '2' (Linear): weight, bias changed during training" in output()
    _train(get_model=lambda **_: _WithAverage(), frozen_params=["average.*"])
    assert "changed during training" not in output().split("frozen_params: module '2'")[-1]


class _CosineHead(nn.Module):
    """A cosine classifier that uses its head's weight directly, without calling the head."""

    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(4, 16), nn.Linear(16, 3, bias=False)
        self.head.requires_grad_(False)  # by mistake

    def forward(self, x):
        h = nn.functional.normalize(self.body(x).relu(), dim=-1)
        return 10 * h @ nn.functional.normalize(self.head.weight, dim=-1).T


def test_a_frozen_weight_used_without_calling_its_module_is_still_frozen_by_mistake(output):
    _train(get_model=lambda **_: _CosineHead(), num_epochs=1)
    assert "module 'head' (Linear): weight do not require grad, but frozen_params does not list them" in output()


def test_a_layer_frozen_by_mistake_is_named_and_a_declared_frozen_one_is_not(output):
    _train(get_model=_frozen_head)
    text = output()
    assert "module 'head' (Linear): weight, bias do not require grad, but frozen_params does not list them" in text
    assert_documented(text, "docs/health.rst", "WARNING sanity check (first step): module 'head' (Linear)")
    _train(get_model=_frozen_head, frozen_params=["head.*"])
    assert _warnings(output()) == []


def test_frozen_params_that_change_are_reported(output):
    _train(frozen_params=["2.*"])
    text = output()
    assert "frozen_params lists module '2' (Linear): weight, bias, but they require grad and get a gradient" in text
    assert "frozen_params: module '2' (Linear): weight, bias changed during training" in text


def test_a_deep_sigmoid_mlp_has_vanishing_gradients_named(output):
    def deep(**_):
        layers = [nn.Linear(4, 16), nn.Sigmoid()]
        for _ in range(18):
            layers += [nn.Linear(16, 16), nn.Sigmoid()]
        return nn.Sequential(*layers, nn.Linear(16, 3))

    _train(get_model=deep, num_epochs=1)
    (line,) = [w for w in _warnings(output()) if "vanishing gradients" in w]
    assert "module '0' (Linear): weight" in line and "'38.weight'" in line
    assert_documented(line, "docs/health.rst", "WARNING gradient health: vanishing gradients")


def test_a_huge_learning_rate_gives_exploding_updates(output):
    _train(learning_rate=100.0, num_epochs=1)
    (line,) = [w for w in _warnings(output()) if "exploding updates" in w]
    assert "module '0' (Linear): weight" in line and "learning rate (100)" in line


def test_raw_pixel_values_and_constant_features_are_reported(output):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(64, 4)).astype(np.float32)
    pixels[:, 2] = 0.0
    labels = rng.integers(0, 3, size=64)
    dataset = NumpyDataset({"data": pixels, "classes": labels}, sparse_dims={"classes": 3})
    _train(train=dataset, dev=None, num_epochs=1, learning_rate=1e-3)
    text = output()
    assert "key 'data' looks like raw 0-255 pixel values (integers in [0, 255]" in text
    assert "1 of 4 features are constant over the first 4 batches (feature 2)" in text


def _pixels(**_):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(64, 4)).astype(np.float32)
    return NumpyDataset({"data": data, "classes": rng.integers(0, 3, size=64)}, sparse_dims={"classes": 3})


def _scaled_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"].float() / 255.0)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))


def _masked_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    logits = model(x * (x.sum(1, keepdim=True) > 0))  # a mask keeps the raw scale
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))


def _frozen_first_layer(**_):
    model = _mlp()
    model[0].requires_grad_(False)  # a frozen pretrained layer still gets the raw scale
    return model


class _PreNormResidual(nn.Module):
    """A projection, then a pre-norm residual block: the residual stream keeps the projected raw scale."""

    def __init__(self):
        super().__init__()
        self.proj, self.norm, self.ff, self.out = (
            nn.Linear(4, 16),
            nn.LayerNorm(16),
            nn.Linear(16, 16),
            nn.Linear(16, 3),
        )

    def forward(self, x):
        h = self.proj(x)
        return self.out(h + torch.relu(self.ff(self.norm(h))))


def test_raw_pixels_are_a_warning_only_when_their_raw_scale_reaches_a_nonlinearity(output):
    for changes in (
        {},
        {"train_step": _masked_step},
        {"get_model": _frozen_first_layer},
        {"get_model": lambda **_: _PreNormResidual(), "frozen_params": ["proj.*"]},
    ):
        _train(train=_pixels(), dev=None, num_epochs=1, learning_rate=1e-3, **changes)
        assert [w for w in _warnings(output()) if "looks like raw 0-255 pixel values" in w], changes
    normalised = r"a normalisation removes their scale first \(batch_norm at "
    for changes, where in (
        ({"train_step": _scaled_step}, r"the step scales them before the first layer \(\S+ at .*_scaled_step"),
        ({"get_model": lambda **_: nn.Sequential(nn.BatchNorm1d(4), _mlp())}, normalised),
        (
            {"get_model": lambda **_: nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))},
            normalised,
        ),
    ):
        with captured_log(5, stdout=False) as lines:
            _train(train=_pixels(), dev=None, num_epochs=1, learning_rate=1e-3, **changes)
        text = "\n".join(lines)
        assert not [w for w in text.splitlines() if "WARNING" in w and "raw 0-255" in w]
        assert re.search(r"looks like raw 0-255 pixel values .* But " + where, text), text


def test_unnormalized_inputs_and_features_on_different_scales_are_reported(output):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(64, 4)).astype(np.float32) * np.array([1.0, 1.0, 1.0, 1e5], dtype=np.float32)
    dataset = NumpyDataset({"data": features, "classes": rng.integers(0, 3, size=64)}, sparse_dims={"classes": 3})
    _train(train=dataset, dev=None, num_epochs=1)
    text = output()
    assert "key 'data' is far from normalized" in text and "features are on very different scales (feature 3" in text


def test_a_dev_split_missing_a_class_is_reported(output):
    _train(dev=_clusters("test", class_weights=[1, 1, 0]), num_epochs=1)
    assert "class(es) 2 occur in train (all 160 sequences) but never in dev (all 40 sequences)" in output()


class _Listed(Dataset):
    """Sequences one by one (not scanned completely up front, unlike in-memory datasets)."""

    def __init__(self, data, labels):
        super().__init__()
        self.data, self.labels = data, labels

    @property
    def num_seqs(self):
        return len(self.data)

    def key_info(self):
        return {"data": {"shape": (4,), "dtype": "float32"}, "classes": {"shape": (), "dtype": "int64"}}

    def get_seq(self, index):
        return {"data": self.data[index], "classes": self.labels[index]}


def test_labels_beyond_sparse_dim_stop_before_training():
    labels = np.zeros(32, dtype=np.int64)
    labels[9] = 5
    extern = {"data": {"shape": (4,)}, "classes": {"shape": (), "sparse_dim": 3}}
    dataset = _Listed(np.zeros((32, 4), dtype=np.float32), labels)
    with pytest.raises(DataError, match=r"key 'classes' has the value 5 at sequence index 9, outside \[0, 3\)"):
        _train(train=dataset, dev=None, extern_data=extern)


def test_nan_in_the_inputs_stops_with_the_sequence_index():
    data = np.ones((32, 4), dtype=np.float32)
    data[7, 1] = np.nan
    dataset = NumpyDataset({"data": data, "classes": np.zeros(32, dtype=np.int64)}, sparse_dims={"classes": 3})
    with pytest.raises(DataError, match="key 'data' holds NaN .*first at sequence index 7"):
        _train(train=dataset, dev=None, train_step=_train_step)


def test_a_loss_without_grad_fn_stops_at_the_first_step_naming_the_loss():
    def detached_step(*, model, extern_data, run_ctx, **_kwargs):
        logits = model(extern_data["data"]).detach()
        run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))

    with pytest.raises(ModelCheckError, match="loss 'ce' does not depend on any parameter that requires grad"):
        _train(train_step=detached_step)


def test_output_ranges_are_checked_on_the_first_step(output):
    def with_softmax(**_):
        return nn.Sequential(nn.Linear(4, 3), nn.Softmax(-1))

    _train(get_model=with_softmax, debug_output_ranges={"1": (0.0, 1.0), "0": (0.0, 1.0)}, num_epochs=1)
    (line,) = [w for w in _warnings(output()) if "declared range" in w]
    assert "module '0' output ([16, 3])" in line and "outside its declared range [0, 1]" in line


def test_the_sanity_check_can_be_switched_off(output):
    _train(get_model=lambda **_: _Disconnected(), debug_sanity_check=False, debug_grad_health=False)
    assert _warnings(output()) == []


def test_a_train_loss_that_does_not_decrease_is_reported(output):
    def constant_step(*, model, extern_data, run_ctx, **_kwargs):
        logits = model(extern_data["data"]) * 0.0  # the loss does not depend on the parameters' values
        run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))

    _train(train_step=constant_step, debug_loss_window=5, num_epochs=1, debug_sanity_check=False)
    assert "the train loss is not decreasing: mean 1.099 over the last 5 steps" in output()
    _train(debug_loss_window=5, num_epochs=1)
    assert "not decreasing" not in output()


def _memorizable(num_seqs, seed):
    rng = np.random.default_rng(seed)  # random labels: train can be memorized, dev cannot be learned
    data = rng.normal(size=(num_seqs, 4)).astype(np.float32)
    return NumpyDataset({"data": data, "classes": rng.integers(0, 3, size=num_seqs)}, sparse_dims={"classes": 3})


def _wide(**_):
    return nn.Sequential(nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 3))


def _noisy_clusters(num_seqs, seed, flip):
    """Three separable clusters, a share ``flip`` of the labels redrawn at random: learnable, and overfittable."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=num_seqs)
    data = (1.5 * np.eye(3, 4)[labels] + rng.normal(size=(num_seqs, 4))).astype(np.float32)
    labels = np.where(rng.random(num_seqs) < flip, rng.integers(0, 3, size=num_seqs), labels)
    return NumpyDataset({"data": data, "classes": labels}, sparse_dims={"classes": 3})


def test_dev_diverging_from_train_is_reported_as_overfitting(output):
    _train(
        train=_noisy_clusters(48, 0, 0.5), dev=_noisy_clusters(200, 1, 0.0), get_model=_wide, num_epochs=8, batch_size=8
    )
    text = output()
    assert "WARNING learning watch: overfitting: dev_ce rose for 2 epochs" in text
    assert_documented(text, "docs/health.rst", "WARNING learning watch: overfitting:")
    assert "chance level" not in text


def test_memorized_random_labels_are_named_not_called_overfitting(output):
    # dev never leaves its chance level while train falls below it: regularizing would not help
    _train(train=_memorizable(48, 0), dev=_memorizable(48, 1), get_model=_wide, num_epochs=8, batch_size=8)
    text = output()
    assert re.search(
        r"WARNING learning watch: dev_ce has stayed at its chance level while train_ce fell below it: dev_ce \S+ -> "
        r"\S+ in 3 epoch\(s\), train_ce \S+ over the last 9 steps \(training mode\); the entropy of the frequencies of the 'classes' "
        r"labels \(all 48 sequences\) is 1\.095\. Not decided yet: observed the same 4 train batches give ce (\S+) "
        r"in training mode and (\S+) evaluated as dev is \(eval mode, no gradient\), against a chance level of "
        r"1\.095: the model fits the training data evaluated as dev is, .*Next experiment: evaluate a part of the "
        r"training data held out of training",
        text,
    )
    assert "memorizes" not in text and "Cause:" not in text  # a measurement that decides nothing names nothing
    assert "overfitting" not in text and "Regularize" not in text
    assert_documented(text, "docs/health.rst", "WARNING learning watch: dev_ce has stayed at its chance level")


class _ShiftedByFifty(nn.Module):
    """Inputs far from 0, normalised by a batch norm whose running statistics never move (momentum 0): training
    mode normalises with the batch's statistics, evaluation with the initial mean 0 and variance 1."""

    def __init__(self, **_):
        super().__init__()
        self.norm = nn.BatchNorm1d(4, momentum=0.0)
        self.mlp = _wide()

    def forward(self, x):
        return self.mlp(self.norm(x + 50.0))


def test_a_train_loss_that_falls_while_evaluation_loses_it_names_the_evaluation_path_not_memorization(output):
    # The same train batches, evaluated as dev is, sit far above chance while training mode fell: not memorization.
    _train(train=_noisy_clusters(96, 0, 0.0), dev=_noisy_clusters(96, 1, 0.0), get_model=_ShiftedByFifty, num_epochs=3)
    text = output()
    assert re.search(
        r"WARNING learning watch: dev_ce has stayed at its chance level while train_ce fell below it: .*Cause: the "
        r"same 4 train batches give ce \S+ in training mode and \S+ evaluated as dev is .*the evaluation path loses "
        r"it on the same data",
        text,
    ), text[-3000:]


def test_early_stopping_ends_training_and_a_rerun_does_not_train_on(tmp_path, output):
    options = {
        "train": _memorizable(48, 0),
        "dev": _memorizable(48, 1),
        "get_model": _wide,
        "num_epochs": 20,
        "batch_size": 8,
        "model": str(tmp_path / "model"),
        "early_stopping_patience": 2,
    }
    engine = _train(**options)
    text = output()
    assert engine.state.epoch < 20
    best = min(engine.state.lr_control.scores, key=lambda e: engine.state.lr_control.scores[e]["dev"]["ce"])
    assert engine.state.epoch == best + 2
    assert f"the best was {engine.state.lr_control.scores[best]['dev']['ce']:.4g} at epoch {best}" in text
    assert f"its checkpoint is {tmp_path}/model.{best:03d}.pt" in text
    again = _train(**options)
    assert again.state.epoch == engine.state.epoch and again.state.global_step == engine.state.global_step
    assert f"Training ended after epoch {engine.state.epoch}: early stopping" in output()


def test_user_callbacks_run_at_their_event_and_an_unknown_event_is_a_config_error():
    seen = []
    _train(callbacks={"epoch_end": lambda state: seen.append(state.epoch)})
    assert seen == [1, 2]
    with pytest.raises(ConfigError, match="callbacks: unknown event 'epoch_ends'"):
        _train(callbacks={"epoch_ends": print})


def test_the_synthetic_data_keeps_the_extern_data_and_the_value_range():
    from framework.datasets.extern_data import parse_extern_data
    from framework.datasets.synthetic_like import SyntheticLike

    extern = parse_extern_data(
        {
            "data": {"shape": (None, 5)},
            "tokens": {"shape": (None,), "sparse_dim": 12},
            "classes": {"shape": (None,), "sparse_dim": 3},
        }
    )
    reference = {
        "lengths": np.array([4, 9]),
        "data": {"low": 0.0, "high": 1.0, "mean": 0.3, "std": 0.4},
        "tokens": {"low": 0.0, "high": 11.0, "mean": 5.0, "std": 3.0},
        "classes": {"low": 0.0, "high": 2.0, "mean": 1.0, "std": 0.8},
    }
    dataset = SyntheticLike(extern, reference, seed=1).dataset(50, seed=2, name="train")
    batch = dataset.get_batch(np.arange(50))
    assert set(np.unique(batch["data:seq_len"])) <= {4, 9}
    assert set(np.unique(batch["data"])) <= {0.0, 1.0}
    lengths = batch["classes:seq_len"]
    for row in range(50):  # the relation: each frame's token id modulo 3 is its class
        n = lengths[row]
        assert np.array_equal(batch["tokens"][row, :n] % 3, batch["classes"][row, :n])


def test_splits_preprocessed_differently_are_reported(output):
    rng = np.random.default_rng(0)

    def split(scale):
        data = (rng.normal(size=(64, 4)) * scale).astype(np.float32)
        return NumpyDataset({"data": data, "classes": rng.integers(0, 3, size=64)}, sparse_dims={"classes": 3})

    _train(train=split(1.0), dev=split(1.0), num_epochs=1)
    assert "preprocessed" not in output()
    _train(train=split(1.0), dev=split(8.0), num_epochs=1)
    text = output()
    assert re.search(r"key 'data' has mean \S+, std (0\.9|1\.0)\d* in train but mean \S+, std [78]\.\d+ in dev: ", text)
    assert "are the splits preprocessed (normalized, scaled) the same way?" in text


def test_the_loss_window_spans_epochs_exactly(output):
    def noisy_flat_step(*, model, extern_data, run_ctx, **_kwargs):
        logits = model(extern_data["data"]) * 0.0  # no learning; the loss still varies from batch to batch
        loss = nn.functional.cross_entropy(logits, extern_data["classes"]) + extern_data["data"].mean() ** 2
        run_ctx.mark_as_loss(name="ce", loss=loss)

    losses = []
    _train(
        train_step=noisy_flat_step,
        debug_loss_window=15,  # windows of 15 steps over epochs of 10 steps
        num_epochs=3,
        debug_sanity_check=False,
        callbacks={"step_end": lambda state: losses.append(float(state.run_ctx.total_loss().detach()))},
    )
    first, second = np.mean(losses[:15]), np.mean(losses[15:30])
    match = re.search(
        r"not decreasing: mean (\S+) over the last 15 steps \(up to step 30\) vs (\S+) over the first", output()
    )
    assert match and float(match.group(1)) == pytest.approx(second, rel=1e-3)
    assert float(match.group(2)) == pytest.approx(first, rel=1e-3)


def _prior_initialised(prior: np.ndarray):
    """An MLP whose output layer starts at the label prior (bias = log frequencies, tiny weights), as the training
    recipes advise: its first loss is the chance level exactly."""

    def get_model(**_):
        model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
        model[2].weight.data.mul_(0.01)
        model[2].bias.data.copy_(model[2].bias.data.new_tensor(np.log(prior)))
        return model

    return get_model


def _slow_start(tmp_path, num_epochs: int) -> None:
    """Epoch 1 at a learning rate that moves nothing (a fixed schedule for the first epochs), then it learns."""
    train = _noisy_clusters(960, 0, 0.0)
    labels = np.concatenate([train.get_seq(i)["classes"].reshape(-1) for i in range(960)])
    prior = np.bincount(labels, minlength=3) / len(labels)
    _train(
        train=train,
        dev=_noisy_clusters(200, 1, 0.0),
        get_model=_prior_initialised(prior),
        num_epochs=num_epochs,
        learning_rates=[1e-5, 1e-2],
        model=str(tmp_path / "model"),
    )


@pytest.mark.parametrize("resumed", [False, True], ids=["one run", "resumed after epoch 1"])
def test_a_slow_starter_judged_at_chance_gets_the_judgement_withdrawn_when_it_learns(output, tmp_path, resumed):
    if resumed:
        _slow_start(tmp_path, 1)  # the judgement is kept in the checkpoint; the run that resumes withdraws it
    _slow_start(tmp_path, 2)
    text = output()
    assert re.search(r"WARNING learning watch: the train loss 'ce' has stayed at its chance level", text), text[-3000:]
    assert re.search(
        r"Note learning watch: withdrawn the warning of epoch 1, step 60: by epoch 2 the loss left its chance level "
        r"\(train_ce \S+ over the latest steps, dev_ce \S+;",
        text,
    ), text[-3000:]
    # (The resumed run's gradient health counts its updates from the resume: it also names the jump of the rate.)
    assert f"  findings: {'1 warning, ' if resumed else ''}1 withdrawn\n" in text
    assert re.search(r"\n    learning watch: withdrawn the warning of epoch 1, step 60: by epoch 2", text)
    records = [json.loads(line) for line in (tmp_path / "findings.jsonl").read_text().splitlines()]
    judged, withdrawal = (r for r in records if r["check"] == "learning watch")
    assert judged["severity"] == "warning" and withdrawal["severity"] == "note"
    assert withdrawal["withdraws"] == judged["id"]  # across the resume too: the id was kept in the checkpoint
    # The run's page strikes the withdrawn warning through, says why, and does not count it among the warnings
    from framework.run_report import render

    page = render(str(tmp_path))
    assert "<s>the train loss &#x27;ce&#x27; has stayed at its chance level" in page
    assert "withdrawn: withdrawn the warning of epoch 1, step 60: by epoch 2 the loss left its chance level" in page
    assert "Findings: " in page and "1 withdrawn" in page


def test_a_sum_of_losses_that_rises_while_one_of_them_falls_is_a_trade_off_not_a_failure():
    """A VQ bottleneck's codebook and commitment terms grow while its reconstruction falls: the summed loss rises
    by design. Only a rise of every optimized part (or of a single loss) is judged."""
    from framework.debug.learning_watch import LossWindowWatch

    watch = LossWindowWatch.__new__(LossWindowWatch)
    watch.losses = {"recon": (1.0, False), "commit": (0.25, False), "err": (1.0, True)}
    before = {"recon": 1.0, "commit": 2.0, "err": 0.5}
    assert watch._falling_parts(before, {"recon": 0.5, "commit": 40.0, "err": 0.2}) == ["recon"]
    assert watch._falling_parts(before, {"recon": 1.2, "commit": 40.0, "err": 0.2}) == []
    watch.losses = {"ce": (1.0, False)}
    assert watch._falling_parts({"ce": 2.0}, {"ce": 1.0}) == []
