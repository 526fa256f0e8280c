#!/usr/bin/env python3
"""Cost of the diagnostics: step time with each flag on, relative to the flags off.

Models: the MNIST MLP (configs/mnist_mlp.py) and the 12AX LSTM (configs/task12ax_lstm.py), one
thread, training epochs of all variants alternating, same initial parameters. Variants:

    off             every check off (stop_on_nonfinite_train_score = False)
    default         the defaults (the loss is checked every step)
    on_output       debug_add_check_numerics_on_output = True   (target <= 1.10)
    ops             debug_add_check_numerics_ops = True         (target <= 1.3)
    detect_anomaly  every check off, inside torch.autograd.detect_anomaly() for comparison
    off_again       the same as off, run last in each round: how far apart two identical runs are

--group resources compares, against debug_leak_check = False: leak_check (the default),
watch_memory, tensorboard (scalars every step) and grad_summaries (TensorBoard plus
debug_grad_summaries at its default interval of 100 steps); target <= 1.02 for the first three.

--group health compares the model-health checks against all of them off: default (sanity check
on the first step, the first-step probes and bug checks, gradient health every 100 updates, the
loss window), and debug_grad_health every 10 updates (True) and every update; target <= 1.02 for
the default.

--startup measures the one-off cost of the default checks instead: the time spent in callbacks
at STARTUP and during the first training step (data checks, split overlap, the meta dry run,
the padding and batch-independence probes, the loss-input watch), defaults against the bug
checks off (target <= 1 s on the MNIST demo).

--profile-plugins prints, per variant, the time in each plugin's callbacks per training step,
per plugin and per event (``Callbacks.profile``): what a new check costs, and where.
Each line's "callbacks" column is the total of that table.
"""

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tools")]  # the framework, and the harness in tools/devkit

from framework.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(
        __file__,
        __doc__,
        takes_config=False,
        usage_tail="[--rounds 7] [--clock wall|cpu] [--models mlp,lstm] [--group numerics|resources|health] [--startup] "
        "[--profile-plugins]",
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall", help="time rounds by wall clock or CPU time"
    )
    parser.add_argument("--models", default="mlp,lstm")
    parser.add_argument("--group", choices=("numerics", "resources", "health"), default="numerics")
    parser.add_argument("--startup", action="store_true", help="one-off cost of the default checks")
    parser.add_argument("--profile-plugins", action="store_true", help="per variant, the cost of each callback")
    return parser.parse_tool_args(argv)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import torch  # noqa: E402
from devkit.benchmarking import BUG_CHECKS_OFF, CLOCKS, STEPS_ONLY, alternate  # noqa: E402

from framework.assembly import Engine  # noqa: E402
from framework.base import log  # noqa: E402
from framework.base.config import load_config  # noqa: E402
from framework.core.events import Event  # noqa: E402

MODELS = {"mlp": "configs/mnist_mlp.py", "lstm": "configs/task12ax_lstm.py"}
NUMERICS = {
    "off": {"stop_on_nonfinite_train_score": False},
    "default": {},
    "on_output": {"debug_add_check_numerics_on_output": True},
    "ops": {"debug_add_check_numerics_ops": True},
    "detect_anomaly": {"stop_on_nonfinite_train_score": False},
    "off_again": {"stop_on_nonfinite_train_score": False},  # control: the noise floor of the comparison
}
RESOURCES = {
    "off": {"debug_leak_check": False},
    "leak_check": {},
    "watch_memory": {"debug_leak_check": False, "watch_memory": True},
    "tensorboard": {"debug_leak_check": False, "tensorboard_dir": "{tmp}/tb"},
    "grad_summaries": {"debug_leak_check": False, "tensorboard_dir": "{tmp}/tb2", "debug_grad_summaries": True},
    "off_again": {"debug_leak_check": False},
}
_HEALTH_OFF = {"debug_sanity_check": False, "debug_grad_health": False, "debug_loss_window": 0, **BUG_CHECKS_OFF}
HEALTH = {
    "off": _HEALTH_OFF,
    "default": {},
    "grad_health_every_10": {"debug_grad_health": True},
    "grad_health_every_step": {"debug_grad_health": 1},
    "off_again": _HEALTH_OFF,
}
# Each comparison isolates its checks: the leak check's one-off scan stays out of the others.
NUMERICS = {name: {"debug_leak_check": False, **options} for name, options in NUMERICS.items()}
HEALTH = {name: {"debug_leak_check": False, **options} for name, options in HEALTH.items()}
GROUPS = {"numerics": NUMERICS, "resources": RESOURCES, "health": HEALTH}
WARMUP = 4  # epochs before measuring (the leak check's one-off baseline scan happens at step 150)


def make_runner(config_path: str, variant: str, options: dict, initial_state: dict | None, tmp: str, clock: str):
    options = {k: v.format(tmp=tmp) if isinstance(v, str) else v for k, v in options.items()}
    overrides = {
        **STEPS_ONLY,
        **options,
    }
    engine = Engine(load_config([os.path.join(ROOT, config_path)], overrides))
    engine.init_train()
    profile = engine.callbacks.profile(CLOCKS[clock])  # the time in callbacks: what the diagnostics add to a step
    if initial_state is not None:
        engine.state.model.load_state_dict(initial_state)
    steps = [0]

    def run(epoch: int) -> int:
        if epoch == WARMUP + 1:  # measured rounds begin; one-off costs (graph trace, leak baseline) are behind
            profile.reset()
            steps[0] = 0
        engine.state.epoch = epoch
        anomaly = torch.autograd.detect_anomaly() if variant == "detect_anomaly" else contextlib.nullcontext()
        with anomaly:
            engine.train_epoch()
        steps[0] += engine.state.steps_in_epoch
        return engine.state.steps_in_epoch

    run.profile, run.steps = profile, steps  # type: ignore[attr-defined]
    return run, engine


def startup_seconds(config_path: str, options: dict) -> float:
    """Seconds spent in callbacks from STARTUP through the end of the first training step."""
    overrides = {"model": None, "log": None, "device": "cpu", "num_epochs": 1, "debug_leak_check": False, **options}
    engine = Engine(load_config([os.path.join(ROOT, config_path)], overrides))
    spent = [0.0]
    emit = engine.callbacks.emit

    def timed_emit(event, state):
        start = time.perf_counter()
        emit(event, state)
        if event is Event.STARTUP or (event is not Event.STEP_END and state.global_step == 0):
            spent[0] += time.perf_counter() - start
        if event is Event.STEP_END:
            raise _FirstStepDone

    engine.callbacks.emit = timed_emit
    with contextlib.suppress(_FirstStepDone), engine.running():
        engine.init_train()
        engine.state.epoch = 1
        engine.train_epoch()
    return spent[0]


class _FirstStepDone(Exception):
    pass


def startup(models: list[str], rounds: int) -> None:
    variants = {"bug_checks_off": BUG_CHECKS_OFF, "default": {}, "bug_checks_off_again": BUG_CHECKS_OFF}
    for model_name in models:
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, options in variants.items():
                times[name].append(startup_seconds(MODELS[model_name], options))
        print(f"{model_name} ({MODELS[model_name]}), 1 thread, {rounds} alternating startups, seconds in callbacks:")
        for name, values in times.items():
            print(f"  {name:<22} fastest {min(values):.3f} s   median {statistics.median(values):.3f} s")


def main(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    log.setup(verbosity=1)
    if args.startup:
        startup(args.models.split(","), args.rounds)
        return
    tmp = tempfile.mkdtemp()
    variants = GROUPS[args.group]
    for model_name in args.models.split(","):
        runners, initial = {}, None
        for variant, options in variants.items():
            runners[variant], engine = make_runner(MODELS[model_name], variant, options, initial, tmp, args.clock)
            initial = initial or {k: v.clone() for k, v in engine.state.model.state_dict().items()}
        results = alternate(runners, args.rounds, warmup=WARMUP, clock=args.clock)
        best_off, median_off = results["off"]
        print(
            f"{model_name} ({MODELS[model_name]}), 1 thread, {args.rounds} alternating epochs per variant, "
            f"{args.clock} clock:"
        )
        for variant, (best, median) in results.items():
            profile, steps = runners[variant].profile, runners[variant].steps[0]
            callbacks = profile.total() / max(steps, 1)
            print(
                f"  {variant:<15} fastest {best * 1e3:7.3f} ms/step  ratio {best / best_off:.3f}   "
                f"(median {median * 1e3:7.3f}, ratio {median / median_off:.3f})   "
                f"callbacks {callbacks * 1e6:7.1f} us/step = {100 * callbacks / best_off:5.2f}% of off"
            )
        if args.profile_plugins:
            for variant in results:
                print(f"{model_name} {variant}: time in callbacks per training step, per plugin and event")
                print(runners[variant].profile.format(runners[variant].steps[0]))


if __name__ == "__main__":
    main(ARGS)
