#!/usr/bin/env python3
"""Time the framework's training step against a hand-written PyTorch loop.

Same model, same data (the same batches in the same order), same initial parameters, one thread.
Epochs of the contenders alternate, so that machine noise hits them alike; the ratio of the
median step times is printed, with a control: the hand-written loop run twice. Target: at most
1.03 with the defaults (every check that is on by default), 1.01 with ``--all-off``.

``--model mlp`` (default): MLP 784-512-512-10 on MNIST digits, batches of 64. ``--model lstm``:
the 12AX LSTM of configs/task12ax_lstm.py (padded batches of up to 1000 frames, gradient
clipping), against a loop that pads the same batches and runs the same train_step.

``--scaling`` prints how the framework's cost over the hand loop scales, as microseconds per step
(median framework minus median hand loop): the MLP at batch 16, 64 and 256, and a model 10x
larger (784-2200-2200-10) at batch 64. A fixed cost per step does not grow with batch or model.

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
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tools")]  # the framework, and the harness in tools/devkit

from framework.tools.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(
        __file__,
        __doc__,
        takes_config=False,
        usage_tail="[--rounds 31] [--clock wall|cpu] [--model mlp|lstm] [--scaling] [--all-off] [--startup] [--amp bfloat16|float16] "
        "[--compile]",
    )
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall", help="time rounds by wall clock or CPU time"
    )
    parser.add_argument("--model", choices=("mlp", "lstm"), default="mlp")
    parser.add_argument(
        "--scaling", action="store_true", help="the cost per step at batch 16, 64, 256 and 10x the model"
    )
    parser.add_argument("--all-off", action="store_true", help="switch off the diagnostics that are on by default")
    parser.add_argument("--startup", action="store_true")
    parser.add_argument("--amp", choices=("bfloat16", "float16"), help="train under autocast with this dtype")
    parser.add_argument("--compile", action="store_true", help="torch.compile both models")
    return parser.parse_tool_args(argv)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import numpy as np  # noqa: E402
import torch  # noqa: E402
from devkit.benchmarking import BUG_CHECKS_OFF, STEPS_ONLY, alternate  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.utils.rnn import pad_sequence  # noqa: E402

from framework import log  # noqa: E402
from framework.config import Config, load_config  # noqa: E402
from framework.host_syncs import HostSyncCounter  # noqa: E402
from framework.run import Engine  # noqa: E402


def make_model(hidden: int = 512) -> nn.Module:
    return nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))


class HandWrittenLoop:
    """The loop a PyTorch user writes by hand: index tensors, forward, backward, step."""

    def __init__(self, engine: Engine, initial_state: dict, hidden: int, amp: str | None, compile: bool):
        dataset = engine.state.loaders["train"].dataset
        self.inputs = torch.from_numpy(dataset.arrays["data"])
        self.targets = torch.from_numpy(dataset.arrays["classes"])
        self.dataset = dataset
        self.model = make_model(hidden)
        self.model.load_state_dict(initial_state)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3, fused=True)
        self.forward = torch.compile(self.model) if compile else self.model
        self.dtype = getattr(torch, amp) if amp else None
        self.scaler = torch.amp.GradScaler("cpu") if amp else None
        self.batch_size = engine.config.int("batch_size")

    def epoch(self, epoch: int) -> int:
        order = torch.from_numpy(self.dataset.get_seq_order(epoch))
        steps = 0
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
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


class HandWrittenSequenceLoop:
    """The 12AX LSTM by hand: the same batches padded with ``pad_sequence``, the config's model and
    train_step (its losses summed as the config marks them), backward, clipping, step."""

    def __init__(self, engine: Engine, initial_state: dict):
        config = engine.config
        self.loader = engine.state.loaders["train"]
        dataset = self.loader.dataset
        seqs = [dataset.get_seq(i) for i in range(dataset.num_seqs)]
        self.data = [torch.from_numpy(seq["data"].astype(np.int64)) for seq in seqs]
        self.classes = [torch.from_numpy(seq["classes"].astype(np.int64)) for seq in seqs]
        self.model = config.get("get_model")(epoch=1, step=0)
        self.model.load_state_dict(initial_state)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=config.float("learning_rate"), eps=1e-8, fused=True
        )
        self.train_step = config.get("train_step")
        self.clip = config.float("gradient_clip_global_norm")

    def epoch(self, epoch: int) -> int:
        plan = self.loader.plan(epoch)
        for indices in plan:
            batch = {
                "data": pad_sequence([self.data[i] for i in indices], batch_first=True),
                "classes": pad_sequence([self.classes[i] for i in indices], batch_first=True),
                "classes:seq_len": torch.tensor([len(self.classes[i]) for i in indices]),
            }
            self.optimizer.zero_grad(set_to_none=True)
            losses = _Losses()
            self.train_step(model=self.model, extern_data=batch, run_ctx=losses)
            losses.total.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.optimizer.step()
        return len(plan)


class _Losses:
    """What a hand-written loop does with the losses train_step marks: sum the optimized ones, normalized."""

    def __init__(self) -> None:
        self.total = 0

    def mark_as_loss(self, *, name, loss, custom_inv_norm_factor=None, as_error=False, **_kwargs):
        if not as_error:
            self.total = self.total + (loss if custom_inv_norm_factor is None else loss / custom_inv_norm_factor)


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


def mlp_engine(batch_size: int, hidden: int, all_off: bool, amp: str | None, compile: bool) -> Engine:
    torch.manual_seed(0)
    config = Config.from_dict(
        {
            "train": {"class": "MnistDataset", "split": "train"},
            "extern_data": {"data": {"shape": (784,)}, "classes": {"shape": (), "sparse_dim": 10}},
            "batch_size": batch_size,
            "num_epochs": 10**6,
            "optimizer": {"class": "adam"},
            "learning_rate": 1e-3,
            "device": "cpu",
            # A checkpoint prefix, as real runs have: what a run writes beside its checkpoints per step is timed too.
            "model": os.path.join(tempfile.mkdtemp(prefix="benchmark-step-"), "model"),
            "get_model": lambda **_: make_model(hidden),
            "train_step": train_step,
            "torch_amp": amp,
            "torch_compile": compile,
            **(ALL_OFF if all_off else {}),
        }
    )
    engine = Engine(config)
    engine.init_train()
    return engine


def lstm_engine(all_off: bool) -> Engine:
    overrides = {
        **STEPS_ONLY,
        **(ALL_OFF if all_off else {}),
    }
    torch.manual_seed(0)
    engine = Engine(load_config([os.path.join(ROOT, "configs/task12ax_lstm.py")], overrides))
    engine.init_train()
    return engine


def compare(engine: Engine, make_hand, rounds: int, clock: str) -> dict[str, tuple[float, float]]:
    """Per contender (framework, hand, hand_again), its (fastest, median) seconds per step."""
    initial_state = {k: v.clone() for k, v in engine.state.model.state_dict().items()}
    hand, control = make_hand(initial_state), make_hand(initial_state)  # the same loop twice: the noise floor

    def framework_epoch(epoch: int) -> int:
        engine.state.epoch = epoch
        engine.train_epoch()
        return engine.state.steps_in_epoch

    return alternate(
        {"hand": hand.epoch, "framework": framework_epoch, "hand_again": control.epoch}, rounds, clock=clock
    )


def benchmark_steps(args: argparse.Namespace) -> None:
    if args.model == "lstm":
        engine = lstm_engine(args.all_off)
        results = compare(engine, lambda initial: HandWrittenSequenceLoop(engine, initial), args.rounds, args.clock)
        what = "12AX LSTM (configs/task12ax_lstm.py), padded batches of <= 1000 frames"
    else:
        engine = mlp_engine(64, 512, args.all_off, args.amp, args.compile)
        results = compare(
            engine,
            lambda initial: HandWrittenLoop(engine, initial, 512, args.amp, args.compile),
            args.rounds,
            args.clock,
        )
        what = "model 784-512-512-10, batch 64"
    (fw, fw_median), (hw, hw_median), (cw, cw_median) = results["framework"], results["hand"], results["hand_again"]
    target = 1.01 if args.all_off else 1.03
    print(
        f"{what}, 1 thread, {engine.state.steps_in_epoch} steps/epoch, {args.rounds} alternating rounds, "
        f"{args.clock} clock"
    )
    print(f"hand-written loop: fastest {hw * 1e3:.3f} ms/step (median {hw_median * 1e3:.3f})")
    print(f"framework engine:  fastest {fw * 1e3:.3f} ms/step (median {fw_median * 1e3:.3f})")
    print(
        f"ratio framework / hand-written: {fw / hw:.3f} fastest, {fw_median / hw_median:.3f} median  "
        f"(target <= {target}); {(fw_median - hw_median) * 1e6:.0f} us/step"
    )
    print(f"control, the same hand-written loop again: {cw / hw:.3f} fastest, {cw_median / hw_median:.3f} median")
    with HostSyncCounter() as syncs:
        engine.state.epoch = args.rounds + 3
        engine.train_epoch()
    print(
        f"host syncs per framework step: {syncs.count / engine.state.steps_in_epoch:.3f} "
        f"({syncs.count} in an epoch of {engine.state.steps_in_epoch} steps)"
        + "".join(f"\n  {count}x {where}" for where, count in syncs.calls.most_common())
    )


SCALING = ((16, 512), (64, 512), (256, 512), (64, 2200))  # (batch, hidden): 784-2200-2200-10 is 10x the parameters


def benchmark_scaling(args: argparse.Namespace) -> None:
    """The framework's cost over the hand loop in microseconds per step, per batch size and model size."""
    print(
        f"framework cost over the hand-written loop, 1 thread, {args.rounds} alternating rounds, {args.clock} clock, "
        "medians" + (" (all checks off)" if args.all_off else " (defaults)")
    )
    print(f"{'model':<20} {'batch':>5} {'params':>10} {'hand ms':>9} {'ratio':>7} {'cost us':>8} {'control us':>11}")
    for batch, hidden in SCALING:
        engine = mlp_engine(batch, hidden, args.all_off, None, False)
        results = compare(
            engine,
            lambda initial, h=hidden, e=engine: HandWrittenLoop(e, initial, h, None, False),
            args.rounds,
            args.clock,
        )
        fw, hw, cw = (results[name][1] for name in ("framework", "hand", "hand_again"))
        params = sum(p.numel() for p in engine.state.model.parameters())
        print(
            f"{f'784-{hidden}-{hidden}-10':<20} {batch:>5} {params:>10,} {hw * 1e3:>9.3f} {fw / hw:>7.3f} "
            f"{(fw - hw) * 1e6:>8.0f} {(cw - hw) * 1e6:>11.0f}"
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
    torch.set_num_threads(1)
    log.setup(verbosity=2)
    if args.scaling:
        benchmark_scaling(args)
    else:
        benchmark_steps(args)
    if args.startup:
        benchmark_startup()


if __name__ == "__main__":
    main(ARGS)
