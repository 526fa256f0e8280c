"""The cheap forms of the per-step checks catch what the exact ones catch, and their cost is visible.

The costs themselves are benchmarked (tools/benchmark-step.py, tools/benchmark-debug.py), never timed here.
"""

import math

import pytest
import torch

from framework.assembly import Engine
from framework.base import log
from framework.base.config import load_config
from framework.base.host_syncs import HostSyncCounter, LaggedFlag
from framework.check_library.op_checks import OpSums
from framework.check_library.step_sums import Producer, StepSums
from framework.core.events import Callbacks, Event, Order
from framework.debug.numerics import NonFiniteError, _nonfinite
from framework.training.optim import step_unless


@pytest.mark.parametrize("nan_only", [False, True])
def test_op_sums_name_the_op_before_an_in_place_op_cleans_its_output(nan_only):
    sums = StepSums(nan_only)
    x = torch.tensor([[1.0, -1.0], [2.0, 3.0]])
    with OpSums(sums, [], None):
        for _ in range(40):  # many finite outputs before the culprit
            x = x * 1.0
        y = torch.log(x)  # NaN at the negative entry
        y.nan_to_num_(0.0)  # cleaned in place: the NaN is checked as log gave it, not after
        z = y.exp()
    assert torch.isfinite(z).all()
    assert sums.culprits() == ["torch.log"]


def test_op_sums_check_the_gradients_each_autograd_node_computes():
    sums = StepSums(False)
    x = torch.tensor([0.0, 4.0], requires_grad=True)
    with OpSums(sums, [], None):
        loss = torch.sqrt(x).sum()  # finite in forward; d sqrt(x)/dx = inf at 0
    assert sums.culprits() == []
    loss.backward()  # the hooks on the nodes of the step's functions run wherever backward does
    assert sums.culprits() == ["backward of torch.sqrt"]


def test_op_sums_tell_infinities_from_nan_in_nan_only_mode():
    for nan_only, flagged in ((False, True), (True, False)):
        sums = StepSums(nan_only)
        with OpSums(sums, [], None):
            torch.tensor([1.0, 0.0]).reciprocal()  # +inf, no NaN
        assert bool(sums.culprits()) is flagged
    sums = StepSums(True)
    with OpSums(sums, [], None):
        torch.tensor([-1.0]).sqrt()
    assert sums.culprits() == ["Tensor.sqrt"]


def test_a_module_output_is_checked_as_it_was_when_recorded():
    sums = StepSums(False)
    out = torch.ones(3)
    sums.producers.append(Producer("module", [], [sums.add(out)]))
    out[0] = math.nan  # changed in place after the module returned: not this module's output
    assert sums.culprits() == []
    sums.clear()
    assert sums.sums == [] and sums.culprits() == []


def test_module_sums_defer_the_batch_and_keep_the_sum_of_an_unchanged_tensor():
    for batch, culprits in ((torch.tensor([1.0, math.nan]), []), (torch.tensor([1.0, 0.0]), ["module"])):
        sums = StepSums(False)
        sums.outside([batch])
        out = batch.log()  # -inf from a finite batch, NaN passed on from a NaN one
        sums.producers.append(Producer("module", [sums.add_input(batch)], [sums.add(out)]))
        assert len(sums.sums) == 1  # the batch is summed only when the culprits are asked for
        assert sums.add(out) == 0  # not changed since: its sum is kept (a container's output is its child's)
        assert sums.culprits() == culprits
    out.mul_(1.0)
    assert sums.add(out) == 1  # changed in place: summed anew


def test_the_step_flag_is_one_exactly_for_non_finite_values():
    def flag(*values):
        return _nonfinite([torch.tensor(v) if not isinstance(v, torch.Tensor) else v for v in values])

    assert flag(-3.0).item() == 0.0 and flag(2.0, 1e38, 1e38).item() == 0.0  # a sum that overflows is no alarm
    for bad in (math.inf, -math.inf, math.nan):
        assert flag(bad).item() == 1.0 and flag(1.0, bad).item() == 1.0
    mixed = flag(torch.tensor(1.0, dtype=torch.bfloat16), torch.tensor(math.inf, dtype=torch.float64))
    assert mixed.dtype == torch.float32 and mixed.item() == 1.0
    assert flag().item() == 0.0


def test_a_float_flag_skips_a_fused_update_on_the_device():
    param = torch.nn.Parameter(torch.ones(4))
    optimizer = torch.optim.Adam([param], lr=0.1, fused=True)
    for skip, changes in ((torch.tensor(1.0), False), (torch.tensor(0.0), True), (torch.tensor(True), False)):
        before = param.detach().clone()
        param.grad = torch.ones(4)
        step_unless(optimizer, skip)
        assert (not torch.equal(before, param.detach())) is changes
        assert not hasattr(optimizer, "found_inf")


class _Plugin:
    name = "Probe"

    def __init__(self):
        self.calls = 0

    def observe(self, state):
        self.calls += 1

    def fail(self, state):
        raise state


def test_a_lagged_flag_on_the_cpu_holds_the_value_itself_and_marks_only_its_own_alias():
    value = torch.tensor(1.0)
    flag = LaggedFlag(value)
    assert flag.read().data_ptr() == value.data_ptr() and float(flag.read()) == 1.0  # no copy per step
    with HostSyncCounter("cpu") as counter:
        flag.read().tolist()  # the flag is read on the host by design: not a sync
        value.tolist()  # the caller's tensor stands for a device value on a CPU run: still counted
    assert counter.count == 1, counter.calls


def test_the_callback_profile_times_each_callback_and_costs_nothing_while_off():
    callbacks, plugin = Callbacks(), _Plugin()
    callbacks.on(Event.STEP_END, plugin.observe, Order.OBSERVE)
    callbacks.on(Event.AFTER_BACKWARD, plugin.fail, Order.CHECK)
    assert callbacks._handlers[Event.STEP_END] == (plugin.observe,)  # while off: the callback itself, no wrapper
    profile = callbacks.profile()
    for _ in range(4):
        callbacks.emit(Event.STEP_END, None)
    error = ValueError("the user's own")
    with pytest.raises(ValueError) as raised:
        callbacks.emit(Event.AFTER_BACKWARD, error)
    assert raised.value is error  # passes through unchanged
    assert plugin.calls == 4
    assert profile.calls[("step_end", "Probe.observe")] == 4 and profile.calls[("after_backward", "Probe.fail")] == 1
    assert profile.seconds[("step_end", "Probe.observe")] > 0
    table = profile.format(steps=4)
    assert "Probe" in table and "step_end: observe" in table and "1.00 calls/step" in table
    callbacks.on(Event.STEP_START, plugin.observe)  # subscribed later: timed too
    callbacks.emit(Event.STEP_START, None)
    assert profile.calls[("step_start", "Probe.observe")] == 1
    profile.reset()
    assert profile.total() == 0 and not profile.calls


_INF_GRADIENT_CONFIG = """
import torch
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 64, "dim": 4}
batch_size = 16
num_epochs = 1
learning_rate = 1e-2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.gain = nn.Parameter(torch.zeros(1))  # sqrt at 0: a finite forward, a gradient of +inf and no NaN

    def forward(self, x):
        return self.linear(x), torch.sqrt(self.gain).sum()


def get_model(**_kwargs):
    return Model()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits, penalty = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]) + penalty)
"""


@pytest.mark.parametrize("nan_only", [False, True])
def test_the_op_check_stops_an_inf_gradient_before_the_update(tmp_path, nan_only):
    # Without NaN-only, the op check reads the gradient norms only after a failed check (the gradient ops' sums
    # catch them); with it, the sums are checked for NaN only, and the gradients for Inf as well, every step.
    config = tmp_path / "inf_gradient.py"
    config.write_text(_INF_GRADIENT_CONFIG)
    overrides = {"debug_add_check_numerics_ops": True, "debug_check_numerics_nan_only": nan_only}
    log.setup(verbosity=2)
    engine = Engine(load_config([str(config)], overrides))
    with pytest.raises(NonFiniteError):
        engine.run("train")
    assert engine.state.global_step == 0  # stopped at the first step, before its update
    assert all(torch.isfinite(p).all() for p in engine.state.model.parameters())
