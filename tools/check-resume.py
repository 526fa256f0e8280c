#!/usr/bin/env python3
"""Stop a training run with real signals at several points, resume it, and check it ends bit for bit
where an uninterrupted run ends.

One uninterrupted reference run, then for each signal and each of N points spread over the
training steps: a run that receives the signal after that step's progress line, then reruns of
the same command until training is complete. The stopped runs write mid-epoch checkpoints every
``--checkpoint-every`` steps (``checkpoint_every_n_steps``; 0: off), so a SIGKILLed run resumes
mid-epoch too; the table says which checkpoint the first rerun resumed from. Every entry of the final checkpoints
is compared with the reference's: parameters, optimizer and RNG states, plugin states (e.g. the loss scale and growth
tracker of a float16 run's gradient scaler, ``++torch_amp "{'dtype': 'float16'}"``), the learning-rate control with
every epoch's scores, and the recorded options but those naming where a run writes. Runs write into a temporary directory (no logs, no
TensorBoard). Prints a table; exit status 0 when every case matches, 1 if one does not, 2 on
bad usage.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.commands import RNN_SCRIPT  # noqa: E402
from framework.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, usage_tail="[--signals KILL,TERM,INT] [--points N] [--checkpoint-every N]")
    parser.add_argument("--signals", default="KILL,TERM,INT", help="signals to stop runs with (default: %(default)s)")
    parser.add_argument("--points", type=int, default=3, help="stopping points per signal (default: %(default)s)")
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=2,
        help="mid-epoch checkpoint every N steps, 0: off (default: %(default)s)",
    )
    args = parser.parse_tool_args(argv)
    if args.checkpoint_every < 0:
        parser.error("--checkpoint-every: give a number of steps >= 1, or 0 for none")
    names = ["SIG" + name.strip().upper().removeprefix("SIG") for name in args.signals.split(",")]
    unknown = [name for name in names if name not in signal.Signals.__members__]
    if unknown:
        parser.error(f"--signals: {', '.join(unknown)} is not a signal here (e.g. KILL,TERM,INT)")
    args.signals = [signal.Signals[name] for name in names]
    return args


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

from framework.testing import checkpoint_differences  # noqa: E402
from framework.training.checkpoint import load_checkpoint  # noqa: E402

PROGRESS = re.compile(r"^ep (\d+) train, step (\d+),")
EPOCH = re.compile(r"^Epoch (\d+) train: .*, (\d+) steps,")
RESUMED = re.compile(r"^Resuming from \S+?\.(\w+)\.pt: epoch (\d+), global step (\d+)", re.MULTILINE)


def rnn(config_args: list[str], prefix: str) -> list[str]:
    """The rnn.py command of one run: its own model prefix, a progress line per step, no log files, no page."""
    overrides = ["++model", prefix, "++log_verbosity", "5", "++log", "None", "++tensorboard_dir", "None"]
    overrides += ["++report_html", "False"]
    return [sys.executable, RNN_SCRIPT, *config_args, *overrides]


def steps_per_epoch(output: str) -> list[int]:
    """Train steps of each epoch, from the reference run's epoch lines."""
    return [int(m.group(2)) for m in map(EPOCH.match, output.splitlines()) if m]


def interrupted_run(command: list[str], epoch: int, step: int, signum: int) -> int:
    """Start a run and send ``signum`` once it reports ``step`` of ``epoch``; its exit code. A run that ends
    otherwise than a stop with a checkpoint (130) or the kill itself has the end of its stderr printed."""
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, preexec_fn=_as_from_a_terminal
        )
        signalled = False
        for line in process.stdout:  # read to the end: a closed pipe would break the run's own prints
            match = PROGRESS.match(line)
            if not signalled and match and (int(match.group(1)), int(match.group(2))) >= (epoch, step):
                process.send_signal(signum)
                signalled = True
        process.stdout.close()
        code = process.wait()
        if code not in (0, 130, -signal.SIGKILL):
            stderr.seek(0)
            print(f"The run stopped by {signal.Signals(signum).name} exited {code}; its stderr ended:", file=sys.stderr)
            print(stderr.read()[-4000:], file=sys.stderr)
    return code


def _as_from_a_terminal() -> None:
    """SIGHUP's default action in the run: started under nohup (or a CI runner that ignores SIGHUP),
    the run would inherit SIG_IGN and, as it should, ignore the hangup this tool sends."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def finish(command: list[str], attempts: int = 5) -> tuple[int, str]:
    """Rerun ``command`` until it exits 0: the number of reruns, and where the first resumed from."""
    resumed_from = "start"
    for attempt in range(1, attempts + 1):
        rerun = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        found = RESUMED.search(rerun.stdout)
        if attempt == 1 and found:
            kind, epoch, step = found.groups()
            resumed_from = f"{'mid-epoch' if kind == 'interrupted' else 'epoch ' + kind.lstrip('0')} @{step}"
        if rerun.returncode == 0:
            return attempt, resumed_from
    raise RuntimeError(f"{' '.join(command)} did not complete in {attempts} attempts")


def differences(a: str, b: str) -> list[str]:
    """The entries of two checkpoints that are not bitwise equal (every entry, scores included; not where they write)."""
    first, second = (load_checkpoint(p) for p in (a, b))  # verified: a damaged file is named, not compared
    return checkpoint_differences(first, second)


def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="check-resume-") as tmp:
        reference = subprocess.run(
            rnn(args.config_args, f"{tmp}/ref/model"), capture_output=True, text=True, stdin=subprocess.DEVNULL
        )
        if reference.returncode != 0:
            print(f"The reference run failed:\n{reference.stderr}", file=sys.stderr)
            return 2
        epochs = steps_per_epoch(reference.stdout)
        final = f"{tmp}/ref/model.{len(epochs):03d}.pt"
        points = _points(epochs, args.points)
        print(f"{'signal':8} {'stopped after':>22} {'resumed from':>16} {'exit':>5} {'reruns':>6}  result")
        periodic = ["++checkpoint_every_n_steps", str(args.checkpoint_every)] if args.checkpoint_every else []
        failures = 0
        for signum in args.signals:
            for epoch, step in points:
                prefix = f"{tmp}/{signum.name}_{epoch}_{step}/model"
                command = rnn([*args.config_args, *periodic], prefix)
                code = interrupted_run(command, epoch, step, signum)
                reruns, resumed_from = finish(command)
                differ = differences(final, f"{prefix}.{len(epochs):03d}.pt")
                equal = not differ
                # Exit 0: the run completed before the signal came, so no resume was tested.
                result = (
                    "NOT STOPPED (slow the run down)"
                    if code == 0
                    else "bitwise equal"
                    if equal
                    else f"DIFFERS ({', '.join(differ)})"
                )
                failures += code == 0 or not equal
                where = f"epoch {epoch} step {step}"
                print(f"{signum.name:8} {where:>22} {resumed_from:>16} {code:>5} {reruns:>6}  {result}")
        return 1 if failures else 0


def _points(epochs: list[int], count: int) -> list[tuple[int, int]]:
    """``count`` (epoch, step) points spread evenly over all training steps."""
    total = sum(epochs)
    points = []
    for k in range(count):
        global_step = (k + 1) * total // (count + 1)
        epoch = 1
        while global_step >= epochs[epoch - 1]:
            global_step -= epochs[epoch - 1]
            epoch += 1
        points.append((epoch, global_step))
    return points


if __name__ == "__main__":
    sys.exit(main(ARGS))
