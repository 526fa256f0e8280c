"""The training loop, in process: reproducibility, accumulation, optimizers, clipping, schedules."""

import numpy as np
import pytest
import torch
from torch import nn

import framework
from framework.assembly import Engine
from framework.base import log
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.core.events import Event, Order
from framework.core.run_ctx import RunCtx
from framework.core.scores import ScoreAccumulator


@pytest.fixture(autouse=True)
def quiet_log():
    log.setup(verbosity=2)


def _train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != extern_data["classes"]).float().mean(), as_error=True)


def _options(**overrides):
    values = {
        "train": {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 90, "dim": 4},
        "dev": {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 90, "dim": 4},
        "batch_size": 8,
        "num_epochs": 2,
        "optimizer": {"class": "adam"},
        "learning_rate": 1e-2,
        "get_model": lambda **_: nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.2), nn.Tanh(), nn.Linear(16, 3)),
        "train_step": _train_step,
    }
    values.update(overrides)
    return values


def _train(**overrides) -> Engine:
    engine = Engine(Config.from_dict(_options(**overrides)))
    engine.run("train")
    return engine


def _params(engine):
    return {k: v.detach().clone() for k, v in engine.state.model.state_dict().items()}


def test_same_seed_gives_bit_identical_parameters_and_another_seed_does_not():
    a, b = _params(_train()), _params(_train())
    assert all(torch.equal(a[k], b[k]) for k in a)
    c = _params(_train(random_seed=7))
    assert not all(torch.equal(a[k], c[k]) for k in a)


@pytest.mark.parametrize("optimizer", [{"class": "sgd"}, {"class": "adam"}])
def test_gradient_accumulation_equals_the_larger_batch(optimizer):
    # 90 train entries -> 72: batches of 8 with a partial last one, so the windows differ in size.
    big = _params(_train(batch_size=16, optimizer=optimizer, num_epochs=2))
    accumulated = _params(_train(batch_size=8, accum_grad_multiple_step=2, optimizer=optimizer, num_epochs=2))
    for key in big:
        torch.testing.assert_close(accumulated[key], big[key], rtol=1e-5, atol=1e-6)
    single = _params(_train(batch_size=8, optimizer=optimizer, num_epochs=2))
    assert not all(torch.allclose(single[k], big[k], atol=1e-4) for k in big)


def _summed_train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    ce = nn.functional.cross_entropy(logits, extern_data["classes"], reduction="none")
    run_ctx.mark_as_loss(name="ce", loss=ce)  # per sequence: RETURNN's convention, the optimizer sees the sum


@pytest.mark.parametrize("loss", ["per-sequence", "use_normalized_loss=False"])
def test_gradient_accumulation_of_summed_losses_equals_the_larger_batch(loss):
    # Windows of unequal sequence counts (8 + 8 and a last one of 8 + 4): a summed loss's big-batch gradient
    # is the plain sum of the micro-batches' gradients, not a mix weighted by their shares of sequences.
    def summed_scalar(*, model, extern_data, run_ctx, **_kwargs):
        logits = model(extern_data["data"])
        ce = nn.functional.cross_entropy(logits, extern_data["classes"], reduction="sum")
        run_ctx.mark_as_loss(name="ce", loss=ce, custom_inv_norm_factor=len(logits), use_normalized_loss=False)

    step = _summed_train_step if loss == "per-sequence" else summed_scalar
    options = {"optimizer": {"class": "sgd"}, "learning_rate": 1e-3, "num_epochs": 1, "train_step": step}
    big = _params(_train(batch_size=16, **options))
    accumulated = _params(_train(batch_size=8, accum_grad_multiple_step=2, **options))
    for key in big:
        torch.testing.assert_close(accumulated[key], big[key], rtol=1e-5, atol=1e-6)


def test_as_error_losses_are_reported_but_not_optimized():
    def only_error(*, model, extern_data, run_ctx, **_kwargs):
        run_ctx.mark_as_loss(name="fer", loss=model(extern_data["data"]).sum() * 0, as_error=True)

    with pytest.raises(ValueError, match="marked no loss to optimize"):
        _train(train_step=only_error)
    engine = _train(num_epochs=1)
    scores = engine.state.lr_control.scores[1]
    assert scores.keys() == {"train", "dev"} and scores["train"].keys() == scores["dev"].keys() == {"ce", "fer"}
    assert 0.0 <= scores["dev"]["fer"] <= 1.0


def test_get_run_ctx_returns_the_step_context_and_scale_weights_the_loss():
    seen = []

    def step(*, model, extern_data, run_ctx, **_kwargs):
        seen.append(framework.get_run_ctx() is run_ctx)
        _train_step(model=model, extern_data=extern_data, run_ctx=run_ctx)
        run_ctx.mark_as_loss(name="l2", loss=sum(p.pow(2).sum() for p in model.parameters()), scale=0.0)

    _train(train_step=step, num_epochs=1)
    assert seen and all(seen)
    with pytest.raises(RuntimeError, match="outside of a train/forward step"):
        framework.get_run_ctx()


def test_optimizers_by_name_module_path_and_returnn_spelling():
    engine = _train(optimizer={"class": "adamw", "weight_decay": 0.1, "epsilon": 1e-7}, num_epochs=1)
    assert isinstance(engine.state.optimizer, torch.optim.AdamW)
    assert (
        engine.state.optimizer.param_groups[0]["eps"] == 1e-7
        and engine.state.optimizer.param_groups[0]["weight_decay"] == 0.1
    )
    engine = _train(optimizer={"class": "torch.optim.SGD", "momentum": 0.9}, num_epochs=1)
    assert isinstance(engine.state.optimizer, torch.optim.SGD)
    with pytest.raises(ConfigError, match="has no parameter 'momentun'. Did you mean 'momentum'"):
        _train(optimizer={"class": "sgd", "momentun": 0.9})
    with pytest.raises(ConfigError, match="unknown class 'adamm'"):
        _train(optimizer="adamm")


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_gradient_clipping_bounds_every_update():
    norms = []
    values = []

    def record(state):
        grads = [p.grad for p in state.model.parameters()]
        norms.append(torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads])).item())
        values.append(max(g.abs().max().item() for g in grads))

    engine = Engine(Config.from_dict(_options(gradient_clip_global_norm=0.01, optimizer={"class": "sgd"})))
    # Clipping changes the gradients in Order.TRAINING; an observer sees them clipped, a user callback not yet.
    engine.callbacks.on(Event.BEFORE_OPTIMIZER_STEP, record, Order.OBSERVE)
    engine.run("train")
    assert norms and max(norms) <= 0.01 * (1 + 1e-4)

    values.clear()
    engine = Engine(Config.from_dict(_options(gradient_clip=0.001, optimizer={"class": "sgd"})))
    engine.callbacks.on(Event.BEFORE_OPTIMIZER_STEP, record, Order.OBSERVE)
    engine.run("train")
    assert values and max(values) <= 0.001 * (1 + 1e-6)  # float32 rounding of the bound


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_newbob_decays_when_the_dev_score_does_not_improve_enough():
    common = dict(learning_rate_control="newbob", learning_rate=1e-3, num_epochs=5, optimizer={"class": "sgd"})
    # A threshold of -1 demands an impossible improvement of 100%: every decision decays.
    engine = _train(newbob_relative_error_threshold=-1.0, **common)
    assert engine.state.lr_control.epoch_lrs == {1: 1e-3, 2: 1e-3, 3: 5e-4, 4: 2.5e-4, 5: 1.25e-4}
    engine = _train(newbob_relative_error_threshold=-1.0, min_learning_rate=4e-4, **common)
    assert engine.state.lr_control.epoch_lrs == {1: 1e-3, 2: 1e-3, 3: 5e-4, 4: 4e-4, 5: 4e-4}
    engine = _train(newbob_relative_error_threshold=1e9, **common)
    assert set(engine.state.lr_control.epoch_lrs.values()) == {1e-3}
    constant = _train(learning_rates=[1e-4, 2e-4], num_epochs=3)
    assert constant.state.lr_control.epoch_lrs == {1: 1e-4, 2: 2e-4, 3: 2e-4}


def test_newbob_with_an_unknown_error_measure_names_the_available_scores():
    with pytest.raises(ConfigError, match="dev_ce"):
        _train(learning_rate_control="newbob", learning_rate_control_error_measure="dev_loss", num_epochs=3)


def test_dynamic_learning_rate_is_applied_every_step():
    seen = []

    def schedule(*, global_train_step, epoch, learning_rate, **_kwargs):
        return learning_rate * (global_train_step + 1)

    engine = Engine(Config.from_dict(_options(dynamic_learning_rate=schedule, learning_rate=1e-4, num_epochs=1)))
    engine.callbacks.on(Event.AFTER_FORWARD, lambda state: seen.append(state.optimizer.param_groups[0]["lr"]))
    engine.run("train")
    assert seen == pytest.approx([1e-4 * (i + 1) for i in range(len(seen))]) and len(seen) == engine.state.global_step


def test_events_fire_in_order_for_each_step():
    events = []
    engine = Engine(Config.from_dict(_options(num_epochs=1, accum_grad_multiple_step=3)))
    for event in Event:
        engine.callbacks.on(event, lambda e, ev=event: events.append(ev))
    engine.run("train")
    train_step_events = {Event.STEP_START, Event.AFTER_FORWARD, Event.AFTER_BACKWARD, Event.STEP_END}
    per_step = [e for e in events if e in train_step_events | {Event.BEFORE_OPTIMIZER_STEP, Event.AFTER_OPTIMIZER_STEP}]
    assert events[:3] == [Event.STARTUP, Event.EPOCH_START, Event.STEP_START]
    assert per_step[:4] == [Event.STEP_START, Event.AFTER_FORWARD, Event.AFTER_BACKWARD, Event.STEP_END]
    assert per_step.count(Event.BEFORE_OPTIMIZER_STEP) == int(np.ceil(engine.state.global_step / 3))
    evaluation = events[events.index(Event.EVAL_START) : events.index(Event.EVAL_END) + 1]
    assert evaluation[1:3] == [Event.EVAL_STEP_START, Event.EVAL_STEP_END] and Event.STEP_START not in evaluation
    assert events[-4:] == [Event.EVAL_END, Event.EPOCH_END, Event.FINISH, Event.CLOSE]


def test_per_entry_losses_follow_returnn_sum_optimized_and_frame_averaged_scores():
    """RETURNN's non-scalar losses: the optimizer sees the sum (or the mean with use_normalized_loss),
    the scores are averaged over all entries of the epoch, and frame errors may be booleans."""
    per_entry = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    run_ctx = RunCtx(stage="train", epoch=1, step=0)
    run_ctx.mark_as_loss(per_entry, "ce")
    run_ctx.mark_as_loss(torch.tensor([True, False, False, False]), "fer", as_error=True)
    assert float(run_ctx.total_loss().detach()) == 21.0
    assert (
        float(run_ctx.losses["ce"].normalized().detach()) == 3.5 and float(run_ctx.losses["fer"].normalized()) == 0.25
    )
    normalized = RunCtx(stage="train", epoch=1, step=0)
    normalized.mark_as_loss(per_entry, "ce", use_normalized_loss=True)
    assert float(normalized.total_loss().detach()) == 3.5

    accumulator = ScoreAccumulator()
    for values in ([1.0, 1.0, 1.0], [4.0]):  # three frames, then one: frame-weighted, not batch-weighted
        step = RunCtx(stage="dev", epoch=1, step=0)
        step.mark_as_loss(torch.tensor(values), "ce")
        accumulator.add(step, num_seqs=1)
    assert accumulator.result()["ce"] == pytest.approx(7 / 4)

    def step_fn(*, model, extern_data, run_ctx, **_kwargs):
        logits = model(extern_data["data"])
        run_ctx.mark_as_loss(nn.functional.cross_entropy(logits, extern_data["classes"], reduction="none"), "ce")
        run_ctx.mark_as_loss(logits.argmax(-1) != extern_data["classes"], "fer", as_error=True)

    engine = _train(train_step=step_fn)
    assert engine.state.lr_control.scores[2]["dev"]["fer"] < 0.5
