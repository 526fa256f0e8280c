"""Errors that the framework reports to the user as one clear paragraph instead of a traceback.

Anything else (an exception raised in the user's model or step function) propagates unchanged,
so that ``ipython --pdb rnn.py config.py`` lands in the frame where it happened.
"""

from typing import Any


class FrameworkError(Exception):
    """A problem the user can fix; ``rnn.py`` prints the message and exits with ``exit_code``."""

    exit_code = 1
    # The step the error is about when it is not the engine's current one (a verdict read a step later):
    # RunState field -> value, which the engine's state takes before EXCEPTION callbacks see it.
    step: dict[str, Any] | None = None
    # Under torch.distributed, an error raised because other ranks failed names them: their reports are the ones
    # that matter, and this rank's process waits for them before it exits (torchrun ends the job at the first exit).
    peers_reporting: tuple[int, ...] = ()
    # The culprit the error names (module, op, file:line, parameter, batch entries), for the finding of the run's
    # failure (framework.core.run_failure); None: the innermost frame of the user's code in the traceback.
    where: dict[str, Any] | None = None


class ConfigError(FrameworkError):
    """The config (files, overrides, option values, dataset or model spec) is wrong."""

    exit_code = 2


class DataError(FrameworkError):
    """The data does not match what the config declares (``extern_data``)."""

    exit_code = 2


class CheckpointError(FrameworkError):
    """A checkpoint file is unreadable or does not fit the model."""

    exit_code = 2


class TrainingInterrupted(FrameworkError):
    """Training stopped on request (Ctrl-C, SIGTERM, ``state.control.stop``); the message says how to resume."""

    exit_code = 130


class ModelInUseError(FrameworkError):
    """Another live run holds the lock of the same model prefix."""

    exit_code = 2


class WriteError(FrameworkError):
    """Writing a checkpoint or output file failed (disk full, I/O error); what was written before is intact."""

    exit_code = 1


class PlantedLinkError(FrameworkError):
    """A path where the framework creates a file is a symbolic link (or a hard link): nothing was written through it."""

    exit_code = 2


class LockLostError(FrameworkError):
    """The run's lock file or model directory was removed or taken over while it ran: it stopped writing."""

    exit_code = 1


class ModelCheckError(FrameworkError):
    """The first training step shows that the model cannot be trained as it is (a severe finding of a check)."""
