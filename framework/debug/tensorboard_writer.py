"""A separate process that writes TensorBoard event files for the training process.

Writing a scalar with ``SummaryWriter`` costs ~70 us of the caller's time, mostly the event
writer's pure-Python CRC32C in a thread that holds the GIL; a few scalars per step would slow a
small model's training by 10% or more. The training process instead pickles small messages into
this process's stdin (a few microseconds) and this process writes: all scalars of a step as one
event (one CRC per step), texts, histograms, images and hparams, built from tensorboard's protobufs
(``tensorboard_summaries``): this process never imports torch (~2-4 s of CPU and ~240 MB beside the
training it serves).

Started as ``python -m framework.debug.tensorboard_writer LOGDIR`` (not multiprocessing's
spawn, which would re-run the user's main script).
"""

from __future__ import annotations

import fcntl
import os
import pickle
import secrets
import socket
import struct
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from framework.base.disk import describe_os_error
from framework.base.errors import WriteError
from framework.base.safe_create import create_new, make_directory
from framework.base.util import start_framework_process

if TYPE_CHECKING:  # the training process imports this module for TensorBoardWriterProcess alone: nothing heavy
    from tensorboard.compat.proto.summary_pb2 import Summary

_F_SETPIPE_SZ = 1031
_FAILED = "failed: "  # what the writer process answers before it ends when it cannot write


def _masked_crc32c(data: bytes) -> int:
    """The checksum of an event file's records: CRC32C, rotated and offset (TFRecord's masking)."""
    try:  # C code; a core dependency
        from google_crc32c import value
    except ImportError:  # tensorboard's own, pure Python (~0.4 ms per record)
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

        return masked_crc32c(data)
    crc = value(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def unguessable_suffix() -> str:
    """An event file name's ending that no one can guess: SummaryWriter opens its files by name, so a link planted
    at a name it will use (``events.out.tfevents.<seconds>.<host>.<pid>``) would be written through."""
    return f".{secrets.token_hex(8)}"


class _EventFile:
    """An event file of its own in ``directory``, written synchronously (no writer thread to hand off to)."""

    def __init__(self, directory: str):
        from tensorboard.compat.proto.event_pb2 import Event

        name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}{unguessable_suffix()}"
        self.file = os.fdopen(create_new(os.path.join(directory, name), "a TensorBoard event file"), "wb")
        self._record(Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString())
        self.last_flush = time.time()

    def write(self, step: int, summary: Summary) -> None:
        """One event with ``summary`` at ``step``."""
        from tensorboard.compat.proto.event_pb2 import Event

        self._record(Event(wall_time=time.time(), step=step, summary=summary).SerializeToString())
        if time.time() - self.last_flush > 10:  # visible to a running TensorBoard within seconds
            self.flush()

    def scalars(self, step: int, values: list[tuple[str, float]]) -> None:
        """All scalars of a step as one event (one checksum)."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        self.write(step, Summary(value=[Summary.Value(tag=tag, simple_value=float(v)) for tag, v in values]))

    def _record(self, data: bytes) -> None:
        """One TFRecord: length, its checksum, data, its checksum. Written here rather than with tensorboard's
        RecordWriter, whose package (``tensorboard.summary``) loads its TensorFlow stub: ~0.35 s of CPU per run."""
        length = struct.pack("<Q", len(data))
        crcs = struct.pack("<I", _masked_crc32c(length)), struct.pack("<I", _masked_crc32c(data))
        self.file.write(b"".join((length, crcs[0], data, crcs[1])))

    def flush(self) -> None:
        self.file.flush()
        self.last_flush = time.time()

    def close(self) -> None:
        self.file.close()


def serve(log_dir: str) -> None:
    """Read (method, args, kwargs) messages from stdin until EOF or "close" and write their summaries."""
    from framework.debug.tensorboard_summaries import histogram_summary, image_summary, text_summary

    # ("add", (kind, tag, value, step), options): the builder of a kind's summary
    builders = {"text": text_summary, "image": image_summary, "histogram": histogram_summary}
    stdin, stdout = sys.stdin.buffer, sys.stdout
    try:
        events = _EventFile(log_dir)
        _serve(events, log_dir, stdin, stdout, builders)
    except OSError as exc:  # a full disk, lost permission: the training process reads why and ends with one line
        stdout.write(f"{_FAILED}{describe_os_error(exc)}\n")
        stdout.flush()
        sys.exit(1)


def _serve(events: _EventFile, log_dir: str, stdin: Any, stdout: Any, builders: dict[str, Any]) -> None:
    while True:
        try:
            method, args, kwargs = pickle.load(stdin)
        except EOFError:  # the training process is gone
            break
        if method == "close":
            break
        if method == "scalars":
            for step, values in args[0]:
                events.scalars(step, values)
        elif method == "add":
            kind, tag, value, step = args
            summary = builders[kind](tag, value, **kwargs)
            if summary is not None:
                events.write(step, summary)
        elif method == "hparams":
            _write_hparams(log_dir, *args)
        elif method == "flush":
            events.flush()
            stdout.write("flushed\n")
            stdout.flush()
        else:
            raise ValueError(f"TensorBoard writer: unknown message {method!r}")
    events.close()


def _write_hparams(log_dir: str, hparams: dict[str, Any], metrics: dict[str, float], run_name: str) -> None:
    """What ``SummaryWriter.add_hparams`` writes: a run of its own, ``<log_dir>/<run_name>``, with the hparams
    summaries and the metrics as scalars at step 0."""
    from framework.debug.tensorboard_summaries import hparams_summaries

    directory = os.path.join(log_dir, run_name)
    make_directory(directory, "the TensorBoard hparams run")
    events = _EventFile(directory)
    for summary in hparams_summaries(hparams, metrics):
        events.write(0, summary)
    for tag, value in metrics.items():
        events.scalars(0, [(tag, value)])
    events.close()


class TensorBoardWriterProcess:
    """The training side: sends scalars, summaries and hparams to the writer process it starts."""

    def __init__(self, log_dir: str):
        self.process = start_framework_process(
            "framework.debug.tensorboard_writer", log_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.log_dir = log_dir
        self.failed = False  # the writer process ended because it could not write: nothing more is sent
        self.pending: list[tuple[int, list[tuple[str, float]]]] = []
        try:  # Linux: a 1 MB pipe, so sending never waits for the writer (e.g. while it starts up)
            fcntl.fcntl(self.process.stdin.fileno(), _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass

    BATCH = 16  # steps of scalars per message: fewer writes, fewer wake-ups of the writer process

    def add(self, kind: str, tag: str, value: Any, step: int, **options: Any) -> None:
        """A text, image or histogram summary (``tensorboard_summaries``; arrays as numpy) at ``step``."""
        self._send(("add", (kind, tag, value, step), options))

    def hparams(self, hparams: dict[str, Any], metrics: dict[str, float], run_name: str) -> None:
        """The run's options and final scores for the HPARAMS tab, in the run ``<log_dir>/<run_name>``."""
        self._send(("hparams", (hparams, metrics, run_name), {}))

    def scalars(self, step: int, values: list[tuple[str, float]]) -> None:
        """Scalars of one step; sent in batches of steps."""
        self.pending.append((step, values))
        if len(self.pending) >= self.BATCH:
            self._send_pending()

    def _send_pending(self) -> None:
        if self.pending:
            pending, self.pending = self.pending, []
            self._write(("scalars", (pending,), {}))

    def _send(self, message: tuple) -> None:
        self._send_pending()  # keep the order of everything sent
        self._write(message)

    def _write(self, message: tuple) -> None:
        if self.failed:
            return
        try:
            pickle.dump(message, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.process.stdin.flush()
        except OSError:  # BrokenPipeError: the writer process ended
            self._writer_ended(self.process.stdout.readline().decode("utf-8", "replace"))

    def flush(self) -> None:
        """Wait until everything sent so far is on disk."""
        self._send(("flush", (), {}))
        if not self.failed:
            answer = self.process.stdout.readline().decode("utf-8", "replace")
            if answer != "flushed\n":
                self._writer_ended(answer)

    def _writer_ended(self, answer: str) -> None:
        """WriteError saying why the writer process ended (its answer: ``failed: <reason>``, or nothing)."""
        self.failed = True
        status = self.process.wait(timeout=60)
        reason = (
            answer[len(_FAILED) :].strip() if answer.startswith(_FAILED) else f"its writer process ended ({status})"
        )
        raise WriteError(
            f"Writing the TensorBoard event files in {self.log_dir} failed: {reason}. The events written before are "
            f"intact. Free space on its disk or make it writable, then run the same command again: it continues from "
            f"the newest checkpoint (or turn TensorBoard off)."
        )

    def close(self) -> None:
        """Write the rest and end the writer process."""
        if self.process.poll() is None and not self.failed:
            self._send(("close", (), {}))
            self.process.stdin.close()
            self.process.wait(timeout=60)


if __name__ == "__main__":
    serve(sys.argv[1])
