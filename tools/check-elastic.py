#!/usr/bin/env python3
"""SIGKILL ranks of an elastic torchrun job at different moments and check that every job resumes by
itself and ends bit for bit where an uninterrupted job ends.

One uninterrupted reference job (``torchrun --nproc_per_node=2 --max-restarts=N``), then ``--kills``
jobs of the same command. Job k SIGKILLs rank k mod 2 (rank 0 included) at a moment that moves
through the run: after a training step's progress line, at an epoch's end (evaluation and
checkpoint write under way) and right after a checkpoint was written. torchrun's agent restarts the
workers, which resume from the newest checkpoint (a mid-epoch one with ``checkpoint_every_n_steps``).
Every entry of the final checkpoints is compared with the reference's (parameters, optimizer, RNG, plugin states,
the learning-rate control with the epochs' scores, the recorded options but those naming where a job writes).
Prints a table and the totals (kills tried, resumed, bitwise equal); exit status 0 when every job
resumed and matches, 1 if one does not, 2 on bad usage.

    python tools/check-elastic.py tests/data/tiny_config.py ++step_sleep 0.02 ++checkpoint_every_n_steps 3
"""

import argparse
import importlib.util
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
    parser = ToolParser(__file__, __doc__, usage_tail="[--kills N] [--max-restarts N]")
    parser.add_argument("--kills", type=int, default=10, help="jobs with one killed rank each (default: %(default)s)")
    parser.add_argument("--max-restarts", type=int, default=3, help="torchrun's --max-restarts (default: %(default)s)")
    return parser.parse_tool_args(argv)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import psutil  # noqa: E402


def _check_resume():  # its checkpoint comparison and its spreading of points over the steps
    spec = importlib.util.spec_from_file_location("check_resume", os.path.join(ROOT, "tools", "check-resume.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_resume = _check_resume()
PROGRESS = re.compile(r"^ep (\d+) train, step (\d+),")
STARTUP = re.compile(r"^task train, ", re.MULTILINE)
RESUMED = re.compile(r"^Resuming from \S+?(\.\w+)\.pt: epoch (\d+), global step (\d+)", re.MULTILINE)
# The moments a kill is aimed at, in turn: (what, the rank-0 line it follows).
MOMENTS = (
    ("step", None),
    ("epoch end", re.compile(r"^Epoch \d+ train: ")),
    ("saved", re.compile(r"^Saved (mid-epoch )?checkpoint")),
)


def torchrun(config_args: list[str], prefix: str, max_restarts: int) -> list[str]:
    """The job's command: two CPU ranks on this machine, its own model prefix, a progress line per step."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    overrides = ["++model", prefix, "++log_verbosity", "5", "++log", "None", "++tensorboard_dir", "None"]
    return [
        *launcher,
        f"--max-restarts={max_restarts}",
        RNN_SCRIPT,
        *config_args,
        *overrides,
        "++torch_distributed",
        "{}",
    ]


def worker(job: subprocess.Popen, rank: int) -> psutil.Process | None:
    """The live rnn.py process of ``rank`` among the job's workers."""
    for process in psutil.Process(job.pid).children(recursive=True):
        try:
            if RNN_SCRIPT in process.cmdline() and process.environ().get("RANK") == str(rank):
                return process
        except psutil.NoSuchProcess:
            continue
    return None


def killed_job(command: list[str], rank: int, moment: tuple, epoch: int, step: int) -> tuple[bool, int, str]:
    """Run the job and SIGKILL ``rank`` at ``moment`` once it reached ``step`` of ``epoch``: (killed, exit, output)."""
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed, lines, position = False, [], (0, 0)
    for line in job.stdout:  # read to the end: a closed pipe would break the job's own prints
        lines.append(line)
        match = PROGRESS.match(line)
        position = (int(match.group(1)), int(match.group(2))) if match else position
        at_moment = match if moment[1] is None else moment[1].match(line)
        if not killed and at_moment and position >= (epoch, step):
            target = worker(job, rank)
            if target is not None:
                target.send_signal(signal.SIGKILL)
                killed = True
    return killed, job.wait(), "".join(lines)


def _source(output: str) -> str:
    """What the restarted attempt resumed from: ``.interrupted step 13``, ``.001 step 10``, or ``scratch``."""
    found = RESUMED.findall(output)
    if found:
        return f"{found[-1][0]} step {found[-1][2]}"
    return "(was complete)" if "Training is complete" in output else "scratch"


def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="check-elastic-") as tmp:
        reference = subprocess.run(
            torchrun(args.config_args, f"{tmp}/ref/model", args.max_restarts),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        if reference.returncode != 0:
            print(f"The reference job failed:\n{reference.stdout}{reference.stderr}", file=sys.stderr)
            return 2
        epochs = check_resume.steps_per_epoch(reference.stdout)
        final = f"{tmp}/ref/model.{len(epochs):03d}.pt"
        points = check_resume._points(epochs, args.kills)
        print(f"{'kill':>4} {'rank':>4} {'moment':>10} {'at or after':>18} {'exit':>5} {'restart from':>24}  result")
        tried = resumed = equal = 0
        for k, (epoch, step) in enumerate(points):
            rank, moment = k % 2, MOMENTS[k % len(MOMENTS)]
            prefix = f"{tmp}/kill{k}/model"
            command = torchrun(args.config_args, prefix, args.max_restarts)
            killed, code, output = killed_job(command, rank, moment, epoch, step)
            # The restarted attempt starts again (rank 0's startup line once more) and completes.
            came_back = killed and code == 0 and len(STARTUP.findall(output)) >= 2
            differ = check_resume.differences(final, f"{prefix}.{len(epochs):03d}.pt") if came_back else []
            same = came_back and not differ
            tried, resumed, equal = tried + killed, resumed + came_back, equal + same
            result = (
                "NOT KILLED"
                if not killed
                else "bitwise equal"
                if same
                else f"DIFFERS ({', '.join(differ)})"
                if came_back
                else "FAILED"
            )
            print(
                f"{k:>4} {rank:>4} {moment[0]:>10} {f'epoch {epoch} step {step}':>18} {code:>5} {_source(output):>24}  {result}"
            )
            if killed and not came_back:
                print(output[-3000:], file=sys.stderr)
        print(f"kills tried {tried}, resumed {resumed}, bitwise equal {equal} (of {args.kills} jobs)")
        return 0 if tried == resumed == equal == args.kills else 1


if __name__ == "__main__":
    sys.exit(main(ARGS))
