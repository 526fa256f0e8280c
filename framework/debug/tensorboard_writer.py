"""A separate process that writes TensorBoard event files for the training process.

Writing a scalar with ``SummaryWriter`` costs ~70 us of the caller's time, mostly the event
writer's pure-Python CRC32C in a thread that holds the GIL; a few scalars per step would slow a
small model's training by 10% or more. The training process instead pickles small messages into
this process's stdin (a few microseconds) and this process writes: all scalars of a step as one
event (one CRC per step), histograms, images and hparams with torch's summary builders.

Started as ``python -m framework.debug.tensorboard_writer LOGDIR`` (not multiprocessing's
spawn, which would re-run the user's main script).
"""

from __future__ import annotations

import fcntl
import os
import pickle
import secrets
import socket
import subprocess
import sys
import time
from typing import Any

from framework.safe_create import create_new, make_directory
from framework.util import start_framework_process

_F_SETPIPE_SZ = 1031


def _use_fast_crc32c() -> None:
    """Event records carry CRC32C checksums, which tensorboard computes in pure Python (~0.4 ms per
    record); google-crc32c's C implementation makes that negligible."""
    try:
        import google_crc32c
    except ImportError:
        return
    from tensorboard.summary.writer import record_writer

    def masked_crc32c(data: bytes) -> int:
        crc = google_crc32c.value(data)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    record_writer.masked_crc32c = masked_crc32c


def unguessable_suffix() -> str:
    """An event file name's ending that no one can guess: SummaryWriter opens its files by name, so a link planted
    at a name it will use (``events.out.tfevents.<seconds>.<host>.<pid>``) would be written through."""
    return f".{secrets.token_hex(8)}"


class _ScalarFile:
    """Scalars written synchronously into an event file of their own (no writer thread to hand off to)."""

    def __init__(self, log_dir: str):
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.summary.writer.record_writer import RecordWriter

        name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}.scalars"
        self.file = os.fdopen(create_new(os.path.join(log_dir, name), "a TensorBoard event file"), "wb")
        self.records = RecordWriter(self.file)
        self.records.write(Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString())
        self.last_flush = time.time()

    def write(self, step: int, values: list[tuple[str, float]]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(v)) for tag, v in values])
        self.records.write(Event(wall_time=time.time(), step=step, summary=summary).SerializeToString())
        if time.time() - self.last_flush > 10:  # visible to a running TensorBoard within seconds
            self.flush()

    def flush(self) -> None:
        self.file.flush()
        self.last_flush = time.time()

    def close(self) -> None:
        self.file.close()


def serve(log_dir: str) -> None:
    """Read (method, args, kwargs) messages from stdin until EOF or "close".

    Scalars go to an event file written here directly, so that this process starts without
    importing torch (~2 s); torch's SummaryWriter is loaded for the first histogram, image or hparams.
    """
    _use_fast_crc32c()
    scalars = _ScalarFile(log_dir)
    writer = None
    stdin, stdout = sys.stdin.buffer, sys.stdout
    while True:
        try:
            method, args, kwargs = pickle.load(stdin)
        except EOFError:  # the training process is gone
            break
        if method == "close":
            break
        if method == "scalars":
            for step, values in args[0]:
                scalars.write(step, values)
        elif method == "flush":
            scalars.flush()
            if writer is not None:
                writer.flush()
            stdout.write("flushed\n")
            stdout.flush()
        else:
            if writer is None:
                from torch.utils.tensorboard import SummaryWriter

                writer = SummaryWriter(log_dir, flush_secs=10, filename_suffix=unguessable_suffix())
            if method == "add_hparams":
                _add_hparams(log_dir, *args, **kwargs)
            else:
                getattr(writer, method)(*args, **kwargs)
    scalars.close()
    if writer is not None:
        writer.close()


def _add_hparams(log_dir: str, hparams: dict, metrics: dict, run_name: str) -> None:
    """``SummaryWriter.add_hparams`` (a run of its own, ``<log_dir>/<run_name>``), never through a planted link."""
    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.summary import hparams as hparams_summaries

    directory = os.path.join(log_dir, run_name)
    make_directory(directory, "the TensorBoard hparams run")
    with SummaryWriter(directory, filename_suffix=unguessable_suffix()) as writer:
        for summary in hparams_summaries(hparams, metrics):
            writer.file_writer.add_summary(summary)
        for name, value in metrics.items():
            writer.add_scalar(name, value)


class TensorBoardWriterProcess:
    """The training side: methods named like SummaryWriter's, executed in the writer process."""

    def __init__(self, log_dir: str):
        self.process = start_framework_process(
            "framework.debug.tensorboard_writer", log_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.pending: list[tuple[int, list[tuple[str, float]]]] = []
        try:  # Linux: a 1 MB pipe, so sending never waits for the writer (e.g. while it starts up)
            fcntl.fcntl(self.process.stdin.fileno(), _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass

    BATCH = 16  # steps of scalars per message: fewer writes, fewer wake-ups of the writer process

    def call(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Run ``SummaryWriter.<method>(*args, **kwargs)`` in the writer process (arrays as numpy)."""
        self._send((method, args, kwargs))

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
        pickle.dump(message, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        self.process.stdin.flush()

    def flush(self) -> None:
        """Wait until everything sent so far is on disk."""
        self._send(("flush", (), {}))
        self.process.stdout.readline()

    def close(self) -> None:
        """Write the rest and end the writer process."""
        if self.process.poll() is None:
            self._send(("close", (), {}))
            self.process.stdin.close()
            self.process.wait(timeout=60)


if __name__ == "__main__":
    serve(sys.argv[1])
