"""``rnn.py``: parse the command line, load the config, run the task, return the exit code.

Only the framework's own errors (bad config, data or checkpoint) are caught and printed as a
message; an exception from user code propagates untouched, so ``ipython --pdb rnn.py cfg.py``
and ``python -m pdb`` stop in the frame where it was raised.
"""

from __future__ import annotations

import os
import sys

from framework.base import log, returnn_options
from framework.base.config import Config, load_config, parse_args
from framework.base.errors import ConfigError, FrameworkError, ModelInUseError, TrainingInterrupted
from framework.base.quick_exit import collect_once_then_freeze
from framework.training import exit_log

USAGE = """usage: rnn config.py [more_config.py ...] [++option value ...] [--explain-plugins]
       rnn --help-options
(rnn is the installed command; python rnn.py in a checkout and python -m framework run the same.)

Runs the task of a RETURNN-style Python config (train, eval or forward). Later config files
and ++overrides (Python literals) take precedence over earlier ones. --explain-plugins lists
the plugins the config turns on and the order their callbacks run in, and exits."""


def main(argv: list[str]) -> int:
    """Run ``rnn.py`` with ``argv`` (without the program name)."""
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "--help-options":
        from framework.base.options_doc import format_help

        print(format_help())
        return 0
    from framework.debug.crash import install_crash_handlers

    collect_once_then_freeze()
    crash_status = install_crash_handlers()  # first: a crash while loading the config is covered too
    exit_log.install_termination_handlers()
    exit_log.watch_leftover_threads()  # threads the config starts, also while it loads, must not keep us alive
    try:
        return exit_log.exiting_with(_run(argv, crash_status))
    except FrameworkError as exc:
        message = f"{exc}" if isinstance(exc, TrainingInterrupted) else f"ERROR: {exc}"  # a requested stop is no error
        print(message, file=sys.stderr)
        log.to_files(message)
        # Refused by the lock: the log files are the live run's, so nothing of this run goes there (held back so far).
        log.release_file_writes(write=not isinstance(exc, ModelInUseError))
        return exit_log.exiting_with(exc.exit_code, exc)
    except exit_log.Terminated as exc:
        message = exit_log.terminated_message(exc)
        print(message, file=sys.stderr)
        log.to_files(message)
        return exit_log.exiting_with(128 + exc.signum, exc)
    except BaseException as exc:  # the log says why the run died; the exception propagates unchanged
        exit_log.log_fatal(exc)
        exit_log.exiting_with(exc)
        if "framework.check_library.tracebacks" in sys.modules:  # _run installed the excepthook (no torch import here)
            sys.modules["framework.check_library.tracebacks"].show_compactly_in_ipython(exc)
        raise
    finally:
        log.release_file_writes()  # however the run ended, what it logged reaches its log files


def _refuse_torchrun_without_distributed(config: Config) -> None:
    """ConfigError for a process of a torchrun job whose config does not set ``torch_distributed``: each process would
    train the whole model alone, and all but one would be refused by the model's lock with a misleading message."""
    world = os.environ.get("WORLD_SIZE", "1")
    if config.get("torch_distributed") is not None or not world.isdigit() or int(world) <= 1:
        return
    rank = os.environ.get("RANK", "?")
    raise ConfigError(
        f"This process is rank {rank} of {world} that torchrun started (WORLD_SIZE={world}), but the config does not "
        f"set torch_distributed, so each of the {world} processes would train the whole model on its own, writing the "
        f"same files. Nothing was started. Set torch_distributed = {{}} in the config (or ++torch_distributed "
        f'"{{}}") to train on all of them together, or run it without torchrun.'
    )


def _run(argv: list[str], crash_status: str) -> int:
    explain = "--explain-plugins" in argv
    files, overrides = parse_args([a for a in argv if a != "--explain-plugins"])
    config = load_config(files, overrides)
    _refuse_torchrun_without_distributed(config)
    exit_log.watch_leftover_threads(config.float("stop_grace_seconds"))
    if config.get("torch_distributed") is not None:  # rank 0 prints and writes the main log, the others <log>.rank<k>
        from framework.debug.crash import label_stack_dumps
        from framework.training.distributed import rank_from_env, rank_log_files

        rank = rank_from_env()
        log.setup(config.get("log_verbosity"), rank_log_files(config.get("log"), rank), stdout=rank == 0)
        label_stack_dumps(f"[rank {rank}]")
    else:
        log.setup(config.get("log_verbosity"), config.get("log"))
        if config.get("task") == "train" and config.get("model"):
            log.hold_file_writes()  # until the engine holds the model's lock (a refused run writes nothing there)
    for note in [returnn_options.startup_note(config.without_effect), *returnn_options.default_notes(config)]:
        if note:
            log.v3(note)

    import torch  # after config validation: a typo is reported without waiting for torch

    from framework.training.threads import set_num_threads

    threads = set_num_threads(config.get("torch_num_threads"))  # before the first op

    from framework.assembly import Engine
    from framework.check_library import tracebacks
    from framework.debug.crash import log_crash_handler_status

    tracebacks.install_excepthook(full=config.bool("use_better_exchook"))
    if config.bool("use_lovely_tensors"):
        tracebacks.install_lovely_tensors()
    if config.get("startup_callback") is not None:
        config.get("startup_callback")(config=config)
    task = config.get("task")
    engine = Engine(config)
    log.v4(f"rnn.py {' '.join(argv)}")
    log.v4(f"task {task}, torch {torch.__version__}, device {engine.state.device}, {threads}")
    log_crash_handler_status(crash_status)
    if explain:
        print(engine.explain_plugins())
        return 0
    try:
        engine.run(task)
    except FrameworkError:
        raise
    except Exception as exc:
        if config.bool("debug_shell_on_exception"):
            from framework.debug.shell import post_mortem_shell

            post_mortem_shell(exc)
        raise
    return engine.exit_status()  # 3 with findings_fail_level and a finding at that severity
