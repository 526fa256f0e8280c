#!/usr/bin/env python3
"""Time the framework's training step against a hand-written PyTorch loop.

Same model, same data (the same batches in the same order), same initial parameters, one thread.
Epochs of the contenders alternate, so that machine noise hits them alike; the ratio of the
median step times is printed, with a control: the hand-written loop run twice. Target: at most
1.03 with the defaults (every check that is on by default), 1.01 with ``--all-off``.

``--model mlp`` (default): MLP 784-512-512-10 on MNIST digits, batches of 64. ``--model lstm``:
the 12AX LSTM of configs/task12ax_lstm.py (padded batches of up to 1000 frames, gradient
clipping), against a loop that pads the same batches and runs the same train_step.
``--model transformer``: a decoder-only language model (pre-norm ``nn.TransformerEncoder`` layers
under a causal mask, learned positions, tied output head, next-token cross-entropy) on random
tokens; small on the CPU (d_model 128, 2 layers, 16 windows of 64 tokens), on an accelerator
big enough to keep it busy (d_model 512, 6 layers, 8 heads, 32 windows of 256 tokens, vocabulary 8192).

``--model gan``: the GAN of configs/gan_ring.py (two optimizers: the discriminator's and the generator's losses
each backpropagated into its own network, then both Adam steps), against a loop that does the same by hand.

``--device cuda`` (any torch device type; default cpu) runs both contenders there: the framework
with ``device``, the hand-written loop with its model there and each batch copied there. Each
timed epoch ends with ``torch.accelerator.synchronize()``, and rounds are timed by the wall clock
(the CPU time of the host thread leaves out the device's work).

``--scaling`` prints how the framework's cost over the hand loop scales, as microseconds per step
(median framework minus median hand loop): the MLP at batch 16, 64 and 256, and a model 10x
larger (784-2200-2200-10) at batch 64. A fixed cost per step does not grow with batch or model.

``--all-off`` switches off every diagnostic that is on by default (the default run keeps them).
``--amp`` trains under autocast (with a loss scaler, as ``torch_amp`` does by default), the
hand-written loop with ``torch.autocast`` and ``torch.amp.GradScaler``; ``--compile`` compiles
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

from framework.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(
        __file__,
        __doc__,
        takes_config=False,
        usage_tail="[--rounds 31] [--device cpu|cuda|...] [--clock wall|cpu] [--model mlp|lstm|transformer] "
        "[--scaling] [--all-off] [--startup] [--amp bfloat16|float16] [--compile]",
    )
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--device", default="cpu", help="a torch device type: cpu (default), cuda, xpu, ...")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="time rounds by wall clock or CPU time (CPU time only with --device cpu)",
    )
    parser.add_argument("--model", choices=("mlp", "lstm", "transformer", "gan"), default="mlp")
    parser.add_argument(
        "--scaling", action="store_true", help="the cost per step at batch 16, 64, 256 and 10x the model"
    )
    parser.add_argument("--all-off", action="store_true", help="switch off the diagnostics that are on by default")
    parser.add_argument("--startup", action="store_true")
    parser.add_argument("--amp", choices=("bfloat16", "float16"), help="train under autocast with this dtype")
    parser.add_argument("--compile", action="store_true", help="torch.compile both models")
    args = parser.parse_tool_args(argv)
    if args.device != "cpu" and args.clock == "cpu":
        parser.error(
            f"--clock cpu times the host thread only, not the work on --device {args.device}: use --clock wall"
        )
    if args.scaling and args.model != "mlp":
        parser.error("--scaling varies the MLP: leave out --model")
    return args


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import torch  # noqa: E402
from devkit.benchmarking import alternate  # noqa: E402
from devkit.step_contenders import (  # noqa: E402
    HandWrittenGanLoop,
    HandWrittenLoop,
    HandWrittenSequenceLoop,
    TransformerLM,
    gan_engine,
    lm_loss,
    lstm_engine,
    make_mlp,
    mlp_engine,
    mlp_loss,
    transformer_engine,
    transformer_sizes,
)

from framework.assembly import Engine  # noqa: E402
from framework.base import log  # noqa: E402
from framework.base.accelerator import device_module, is_accelerator  # noqa: E402
from framework.base.host_syncs import HostSyncCounter  # noqa: E402


def compare(engine: Engine, make_hand, rounds: int, clock: str) -> dict[str, tuple[float, float]]:
    """Per contender (framework, hand, hand_again), its (fastest, median) seconds per step."""
    initial_state = {k: v.clone() for k, v in engine.state.model.state_dict().items()}
    hand, control = make_hand(initial_state), make_hand(initial_state)  # the same loop twice: the noise floor

    def framework_epoch(epoch: int) -> int:
        engine.state.epoch = epoch
        engine.train_epoch()
        return engine.state.steps_in_epoch

    device = engine.state.device
    return alternate(
        {"hand": hand.epoch, "framework": framework_epoch, "hand_again": control.epoch},
        rounds,
        clock=clock,
        synchronize=torch.accelerator.synchronize if is_accelerator(device) else None,
    )


def benchmark_steps(args: argparse.Namespace, device: torch.device) -> None:
    if args.model == "lstm":
        engine = lstm_engine(args.all_off, device)
        results = compare(engine, lambda initial: HandWrittenSequenceLoop(engine, initial), args.rounds, args.clock)
        what = "12AX LSTM (configs/task12ax_lstm.py), padded batches of <= 1000 frames"
    elif args.model == "gan":
        engine = gan_engine(args.all_off, device)
        results = compare(engine, lambda initial: HandWrittenGanLoop(engine, initial), args.rounds, args.clock)
        what = "GAN of configs/gan_ring.py, two optimizers, batch 256"
    elif args.model == "transformer":
        engine = transformer_engine(args.all_off, device, args.amp, args.compile)
        size = transformer_sizes(device)

        def make_hand(initial: dict) -> HandWrittenLoop:
            model = TransformerLM(size["vocab"], size["dim"], size["heads"], size["layers"], size["seq_len"])
            return HandWrittenLoop(engine, initial, model, lm_loss, args.amp, args.compile)

        results = compare(engine, make_hand, args.rounds, args.clock)
        params = sum(p.numel() for p in engine.state.model.parameters())
        what = (
            f"transformer LM d_model {size['dim']}, {size['layers']} layers, {size['heads']} heads, vocab "
            f"{size['vocab']}, {params / 1e6:.1f}M parameters, batch {size['batch']} x {size['seq_len']} tokens"
        )
    else:
        engine = mlp_engine(64, 512, args.all_off, device, args.amp, args.compile)
        results = compare(
            engine,
            lambda initial: HandWrittenLoop(engine, initial, make_mlp(512), mlp_loss, args.amp, args.compile),
            args.rounds,
            args.clock,
        )
        what = "model 784-512-512-10, batch 64"
    (fw, fw_median), (hw, hw_median), (cw, cw_median) = results["framework"], results["hand"], results["hand_again"]
    target = 1.01 if args.all_off else 1.03
    print(
        f"{what}{f', torch_amp {args.amp}' if args.amp else ''}{', compiled' if args.compile else ''}, "
        f"{place(device)}, {engine.state.steps_in_epoch} steps/epoch, {args.rounds} alternating rounds, {args.clock} clock"
        + (
            " (each epoch ends with torch.accelerator.synchronize(): device work included)"
            if is_accelerator(device)
            else ""
        )
    )
    print(f"hand-written loop: fastest {hw * 1e3:.3f} ms/step (median {hw_median * 1e3:.3f})")
    print(f"framework engine:  fastest {fw * 1e3:.3f} ms/step (median {fw_median * 1e3:.3f})")
    print(
        f"ratio framework / hand-written: {fw / hw:.3f} fastest, {fw_median / hw_median:.3f} median  "
        f"(target <= {target}); {(fw_median - hw_median) * 1e6:.0f} us/step"
    )
    print(f"control, the same hand-written loop again: {cw / hw:.3f} fastest, {cw_median / hw_median:.3f} median")
    with HostSyncCounter(device) as syncs:
        engine.state.epoch = args.rounds + 3
        engine.train_epoch()
    print(
        f"host syncs per framework step: {syncs.count / engine.state.steps_in_epoch:.3f} "
        f"({syncs.count} in an epoch of {engine.state.steps_in_epoch} steps)"
        + "".join(f"\n  {count}x {where}" for where, count in syncs.calls.most_common())
    )


def place(device: torch.device) -> str:
    """Where the benchmark runs, in words."""
    if not is_accelerator(device):
        return "CPU, 1 thread"
    get_name = getattr(device_module(device), "get_device_name", None)  # torch.cuda and torch.xpu have it
    return f"{device.type}" + (f" ({get_name()})" if get_name else "")


SCALING = ((16, 512), (64, 512), (256, 512), (64, 2200))  # (batch, hidden): 784-2200-2200-10 is 10x the parameters


def benchmark_scaling(args: argparse.Namespace, device: torch.device) -> None:
    """The framework's cost over the hand loop in microseconds per step, per batch size and model size."""
    print(
        f"framework cost over the hand-written loop, {place(device)}, {args.rounds} alternating rounds, "
        f"{args.clock} clock, "
        "medians" + (" (all checks off)" if args.all_off else " (defaults)")
    )
    print(f"{'model':<20} {'batch':>5} {'params':>10} {'hand ms':>9} {'ratio':>7} {'cost us':>8} {'control us':>11}")
    for batch, hidden in SCALING:
        engine = mlp_engine(batch, hidden, args.all_off, device, None, False)
        results = compare(
            engine,
            lambda initial, h=hidden, e=engine: HandWrittenLoop(e, initial, make_mlp(h), mlp_loss, None, False),
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
    device = torch.device(args.device)
    if is_accelerator(device):
        accelerator = torch.accelerator.current_accelerator(check_available=True)
        if accelerator is None or accelerator.type != device.type:
            sys.exit(f"--device {args.device}: torch {torch.__version__} finds {accelerator or 'no accelerator'} here")
    torch.set_num_threads(1)
    log.setup(verbosity=2)
    if args.scaling:
        benchmark_scaling(args, device)
    else:
        benchmark_steps(args, device)
    if args.startup:
        benchmark_startup()


if __name__ == "__main__":
    main(ARGS)
