#!/usr/bin/env python3
"""Time the framework's training step against a hand-written PyTorch loop.

Same model (MLP 784-512-512-10), same data (MNIST digits, batches of 64 in the same order), same
initial parameters, one thread. Epochs of the two alternate, so that machine noise hits both
alike; the ratio of the median step times is printed. Target: at most 1.05.

``--all-off`` switches off every diagnostic that is on by default (the default run keeps them).
``--amp`` trains under autocast (float16 with a loss scaler, as ``torch_amp`` does by default),
the hand-written loop with ``torch.autocast`` and ``torch.amp.GradScaler``; ``--compile`` compiles
both models (``torch_compile = True`` against ``torch.compile(model)``). Both loops use fused Adam,
the framework's default. The host syncs per step of the framework's loop are counted too.

``--startup`` also measures the import time of ``framework`` and the time from starting
``python rnn.py`` to its first training step.
"""

import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tools")]  # the framework, and the harness in tools/devkit

from framework.tools.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(
        __file__,
        __doc__,
        takes_config=False,
        usage_tail="[--rounds 15] [--all-off] [--startup] [--amp bfloat16|float16] [--compile]",
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--all-off", action="store_true", help="switch off the diagnostics that are on by default")
    parser.add_argument("--startup", action="store_true")
    parser.add_argument("--amp", choices=("bfloat16", "float16"), help="train under autocast with this dtype")
    parser.add_argument("--compile", action="store_true", help="torch.compile both models")
    return parser.parse_tool_args(argv)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import torch  # noqa: E402
from devkit.benchmarking import BUG_CHECKS_OFF, alternate  # noqa: E402
from torch import nn  # noqa: E402

from framework import log  # noqa: E402
from framework.config import Config  # noqa: E402
from framework.core.engine import Engine  # noqa: E402
from framework.datasets import MnistDataset  # noqa: E402
from framework.inspection.host_syncs import HostSyncCounter  # noqa: E402


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))


class HandWrittenLoop:
    """The loop a PyTorch user writes by hand: index tensors, forward, backward, step."""

    def __init__(self, dataset: MnistDataset, initial_state: dict, amp: str | None, compile: bool):
        self.inputs = torch.from_numpy(dataset.arrays["data"])
        self.targets = torch.from_numpy(dataset.arrays["classes"])
        self.dataset = dataset
        self.model = make_model()
        self.model.load_state_dict(initial_state)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3, fused=True)
        self.forward = torch.compile(self.model) if compile else self.model
        self.dtype = getattr(torch, amp) if amp else None
        self.scaler = torch.amp.GradScaler("cpu") if amp else None

    def epoch(self, epoch: int, batch_size: int) -> int:
        order = torch.from_numpy(self.dataset.get_seq_order(epoch))
        steps = 0
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            self.optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=self.dtype, enabled=self.dtype is not None):
                loss = nn.functional.cross_entropy(self.forward(self.inputs[idx]), self.targets[idx])
            if self.scaler is None:
                loss.backward()
                self.optimizer.step()
            else:
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            steps += 1
        return steps


# The diagnostics that are on by default, switched off.
ALL_OFF = {
    "debug_sanity_check": False,
    "debug_grad_health": False,
    "debug_leak_check": False,
    "debug_loss_window": 0,
    "debug_dev_divergence_epochs": 0,
    "stop_on_nonfinite_train_score": False,
    **BUG_CHECKS_OFF,
}


def benchmark_steps(rounds: int, all_off: bool, amp: str | None, compile: bool) -> None:
    torch.set_num_threads(1)
    log.setup(verbosity=2)
    torch.manual_seed(0)
    initial_state = make_model().state_dict()
    config = Config.from_dict(
        {
            "train": {"class": "MnistDataset", "split": "train"},
            "extern_data": {"data": {"shape": (784,)}, "classes": {"shape": (), "sparse_dim": 10}},
            "batch_size": 64,
            "num_epochs": 10**6,
            "optimizer": {"class": "adam"},
            "learning_rate": 1e-3,
            "device": "cpu",
            "get_model": lambda **_: make_model(),
            "train_step": train_step,
            "torch_amp": amp,
            "torch_compile": compile,
            **(ALL_OFF if all_off else {}),
        }
    )
    engine = Engine(config)
    engine.init_train()
    engine.state.model.load_state_dict(initial_state)
    dataset = engine.state.loaders["train"].dataset
    hand = HandWrittenLoop(dataset, initial_state, amp, compile)
    control = HandWrittenLoop(dataset, initial_state, amp, compile)  # the same loop again: the noise floor

    def framework_epoch(epoch: int) -> int:
        engine.state.epoch = epoch
        engine.train_epoch()
        return engine.state.steps_in_epoch

    results = alternate(
        {
            "hand": lambda e: hand.epoch(e, 64),
            "framework": framework_epoch,
            "hand_again": lambda e: control.epoch(e, 64),
        },
        rounds,
    )
    (fw, fw_median), (hw, hw_median), (cw, cw_median) = results["framework"], results["hand"], results["hand_again"]
    print(
        f"model 784-512-512-10, batch 64, 1 thread, {engine.state.steps_in_epoch} steps/epoch, {rounds} alternating rounds"
    )
    print(f"hand-written loop: fastest {hw * 1e3:.3f} ms/step (median {hw_median * 1e3:.3f})")
    print(f"framework engine:  fastest {fw * 1e3:.3f} ms/step (median {fw_median * 1e3:.3f})")
    print(
        f"ratio framework / hand-written: {fw / hw:.3f} fastest, {fw_median / hw_median:.3f} median  (target <= 1.05)"
    )
    print(f"control, the same hand-written loop again: {cw / hw:.3f} fastest, {cw_median / hw_median:.3f} median")
    with HostSyncCounter() as syncs:
        framework_epoch(rounds + 1)
    print(
        f"host syncs per framework step: {syncs.count / engine.state.steps_in_epoch:.3f} "
        f"({syncs.count} in an epoch of {engine.state.steps_in_epoch} steps)"
    )


def benchmark_startup() -> None:
    def run(args):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, check=True)
        return time.perf_counter() - start, out.stdout

    bare = min(run(["-c", "pass"])[0] for _ in range(3))
    framework_import = min(run(["-c", "import framework"])[0] for _ in range(3))
    torch_import = min(run(["-c", "import torch"])[0] for _ in range(3))
    print(
        f"import framework: {(framework_import - bare) * 1e3:.0f} ms (without torch; import torch: "
        f"{(torch_import - bare) * 1e3:.0f} ms)"
    )
    firsts = []
    for _ in range(3):
        _, stdout = run(
            [
                "rnn.py",
                "configs/mnist_mlp.py",
                "++log_verbosity",
                "5",
                "++num_epochs",
                "1",
                "++model",
                "None",
                "++log",
                "None",
            ]
        )
        firsts.append(float(re.search(r"First step starts (\S+) sec", stdout).group(1)))
    print(f"python rnn.py configs/mnist_mlp.py -> first training step: {min(firsts):.2f} s (best of 3)")


def main(args: argparse.Namespace) -> None:
    benchmark_steps(args.rounds, args.all_off, args.amp, args.compile)
    if args.startup:
        benchmark_startup()


if __name__ == "__main__":
    main(ARGS)
