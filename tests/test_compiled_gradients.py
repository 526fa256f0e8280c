"""Gradients that torch.compile gets wrong are told apart from the model's own (an eager step of the same batch).

The compiler bug is real, made by a backend of this test's own: ``aot_autograd`` with a backward compiler that
replaces one weight's gradient in the backward graph by zeros (what a miscompiled graph does). No real compiler
bug is needed, and no inductor compile (slow on a CPU).
"""

import os
import re

import pytest
import torch
from devkit.doc_commands import missing_lines
from torch import nn

from framework.assembly import Engine
from framework.base.config import Config


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()  # no compiled code (of another test's backend) reused for nn.Sequential.forward


def _zero_first_weight_gradient(gm: torch.fx.GraphModule, example_inputs):
    """The backward graph, with the gradient of its first 2-d input (a weight) replaced by zeros."""
    output = next(node for node in gm.graph.nodes if node.op == "output")
    grads = list(output.args[0])
    i = next(i for i, g in enumerate(grads) if g is not None and g.meta["val"].dim() == 2)
    with gm.graph.inserting_before(output):
        grads[i] = gm.graph.call_function(torch.ops.aten.zeros_like.default, (grads[i],))
    output.args = (tuple(grads),)
    gm.recompile()
    return gm


def _zero_every_gradient(gm: torch.fx.GraphModule, example_inputs):
    """The backward graph, with every gradient replaced by zeros."""
    output = next(node for node in gm.graph.nodes if node.op == "output")
    with gm.graph.inserting_before(output):
        grads = [
            None if g is None else gm.graph.call_function(torch.ops.aten.zeros_like.default, (g,))
            for g in output.args[0]
        ]
    output.args = (tuple(grads),)
    gm.recompile()
    return gm


def _backend(bw_compiler=None):
    """An ``aot_autograd`` backend whose backward compiler is ``bw_compiler`` (boxed), or the graph as it is.
    Built when a test uses it: functorch.compile's import (~0.7 s of CPU) is not paid by every worker's collection."""
    from functorch.compile import make_boxed_compiler, nop
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=nop, bw_compiler=nop if bw_compiler is None else make_boxed_compiler(bw_compiler))


class Detached(nn.Module):
    """A classifier whose side branch is added detached by mistake: ``side`` never gets a gradient, eager or not."""

    def __init__(self):
        super().__init__()
        self.body, self.head, self.side = nn.Linear(4, 16), nn.Linear(16, 3), nn.Linear(4, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x))) + self.side(x).detach()


def _train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))


def _warnings(output, backend, get_model, check: str = "gradient health") -> list[str]:
    config = Config.from_dict(
        {
            "train": {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 96, "dim": 4},
            "batch_size": 8,
            "num_epochs": 1,
            "device": "cpu",
            "optimizer": {"class": "sgd"},
            "learning_rate": 0.1,
            "debug_grad_health": 2,
            "get_model": get_model,
            "train_step": _train_step,
            **({"torch_compile": {"backend": backend}} if backend is not None else {}),
        }
    )
    Engine(config).run("train")
    return [line for line in output().splitlines() if line.startswith(f"WARNING {check}:")]


def _mlp(**_kwargs):
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))


def test_a_weight_the_compiled_graph_gives_no_gradient_is_named_a_compiler_problem(output):
    (line,) = _warnings(output, _backend(_zero_first_weight_gradient), _mlp)
    assert "vanishing gradients" in line and "module '0' (Linear): weight" in line, line
    assert "The compiled model's gradients differ from eager mode's" in line and "a compiler problem" in line, line
    assert "parameters 0.weight" in line and "torch_compile = False" in line, line
    assert "sigmoid/tanh" not in line, line  # the model's usual causes are not suggested
    assert missing_lines([f"... {_documented_warning()} ..."], line) == [], line


def _documented_warning() -> str:
    """The warning as docs/health.rst quotes it (``...`` where the run's numbers and names go)."""
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "health.rst"), encoding="utf-8") as f:
        (quote,) = re.findall(r'the warning says "([^"]+)"', " ".join(f.read().split()))
    return quote


def test_a_healthy_compiled_model_stays_quiet(output):
    assert _warnings(output, _backend(), _mlp) == []


def test_the_models_own_missing_gradient_is_the_models_when_eager_mode_agrees(output):
    compiled = _warnings(output, _backend(), lambda **_: Detached())
    eager = _warnings(output, None, lambda **_: Detached())
    assert any("module 'side' (Linear): weight, bias did not change" in line for line in compiled), compiled
    assert all("compiler problem" not in line for line in compiled), compiled
    assert any("An eager step of the same batch on a copy of the model agrees" in line for line in compiled), compiled
    # Without torch_compile, the message is the one it always was.
    (line,) = eager
    assert line.endswith(
        "no gradient reaches them, their gradient is zero, or the optimizer does not hold them. If "
        "that is intended, list them in frozen_params."
    ), line


def test_updates_that_change_nothing_because_the_compiled_gradients_are_zero_name_the_compiler(output):
    (line,) = _warnings(output, _backend(_zero_every_gradient), _mlp, check="update integrity")
    assert "the last update of epoch 1 changed no parameter" in line, line
    assert "a compiler problem" in line and "accumulates gradients on its own" not in line, line
