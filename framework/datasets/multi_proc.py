"""RETURNN's ``MultiProcDataset``: another dataset's sequences read in worker processes.

The wrapped dataset is built once here (its index, order and lengths); ``num_workers`` processes, forked from
this one when the first batch is read, each read every ``num_workers``-th sequence of a batch (RETURNN's
round-robin), up to ``buffer_size`` of them per request, and send them back. Epochs, order and sequences are
exactly the wrapped dataset's. Options other than ``dataset``, ``num_workers`` and ``buffer_size`` (e.g.
``partition_epoch``, ``seq_ordering``) go to the wrapped dataset where it does not set them, as in RETURNN.

Where this process cannot have children (a DataLoader worker of ``dataloader_opts``, which reads batches ahead
itself), the sequences are read here.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import traceback
from multiprocessing.connection import Connection
from typing import Any, NoReturn

import numpy as np

from framework.base.errors import ConfigError, DataError
from framework.datasets.base import Dataset, collate
from framework.datasets.registry import init_dataset


class MultiProcDataset(Dataset):
    """The sequences of ``dataset``, read by ``num_workers`` worker processes.

    :param dataset: the wrapped dataset dict.
    :param num_workers: worker processes (at least 1).
    :param buffer_size: the most sequences a worker is asked for at once (at least 1).
    :param sharding_method: RETURNN's "seq_order" (the default: the wrapped dataset's order, dealt to the workers);
        its "dedicated" (each worker orders its own shard, which changes the order) is refused.
    """

    returnn_window = "ignores"  # what RETURNN's class does with window (context_window.py)

    def __init__(
        self,
        dataset: dict[str, Any],
        num_workers: int,
        buffer_size: int,
        sharding_method: str = "seq_order",
        **kwargs: Any,
    ):
        if sharding_method != "seq_order":
            raise ConfigError(
                f"MultiProcDataset: sharding_method = {sharding_method!r}: only RETURNN's default 'seq_order' is "
                f"available here (the wrapped dataset's order, dealt to the workers); 'dedicated' lets each worker "
                f"order its own shard, another order of the sequences. Leave sharding_method out."
            )
        given = {key: kwargs[key] for key in ("seq_ordering", "partition_epoch", "fixed_random_seed") if key in kwargs}
        super().__init__(**kwargs)
        if num_workers < 1 or buffer_size < 1:
            raise ConfigError(
                f"MultiProcDataset: num_workers ({num_workers}) and buffer_size ({buffer_size}) must be at least 1."
            )
        if not isinstance(dataset, dict):
            raise ConfigError(f"MultiProcDataset: 'dataset' must be a dataset dict, got {dataset!r}.")
        spec = {**given, **dataset}
        self._inherits_ordering = "seq_ordering" not in spec
        self.inner = init_dataset(spec, option="MultiProcDataset dataset", random_seed=self.random_seed, parent=self)
        self.partition_epoch = self.inner.partition_epoch
        self.sharded_by_rank = self.inner.sharded_by_rank  # a DistributeFilesDataset's files of this rank
        self.num_workers, self.buffer_size = num_workers, buffer_size
        self._epoch = 1
        self._workers: list[tuple[multiprocessing.Process, Connection]] = []
        self._pid = os.getpid()
        self.name = f"MultiProcDataset({self.inner.name}, {num_workers} workers)"

    @property
    def num_seqs(self) -> int:
        return self.inner.num_seqs

    def key_info(self) -> dict[str, dict[str, Any]]:
        return self.inner.key_info()

    def seq_tag(self, index: int) -> str:
        return self.inner.seq_tag(index)

    def seq_lengths(self) -> np.ndarray:
        return self.inner.seq_lengths()

    def get_seq_order(self, epoch: int) -> np.ndarray:
        if self._inherits_ordering:
            self.inner.seq_ordering = self.seq_ordering
        return self.filtered(self.inner.get_seq_order(epoch))

    def use_epoch(self, epoch: int) -> None:
        self._epoch = epoch
        self.inner.use_epoch(epoch)

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        return self.read([index])[0]

    def get_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        return collate(self.read([int(i) for i in indices]), self.key_info())

    def read(self, indices: list[int]) -> list[dict[str, np.ndarray]]:
        """The sequences ``indices`` of the current epoch, read by the workers: position j by worker j % N."""
        workers = self._started()
        if not workers:
            return [self.inner.get_seq(i) for i in indices]
        seqs: list[dict[str, np.ndarray] | None] = [None] * len(indices)
        positions = [list(range(k, len(indices), len(workers))) for k in range(len(workers))]
        for start in range(0, max(len(p) for p in positions), self.buffer_size):
            asked = []
            for (_, conn), mine in zip(workers, positions, strict=True):
                chunk = mine[start : start + self.buffer_size]
                if chunk:
                    try:
                        conn.send((self._epoch, [indices[j] for j in chunk]))
                    except OSError:  # BrokenPipeError: the worker is gone
                        self._worker_lost(conn)
                    asked.append((conn, chunk))
            for conn, chunk in asked:
                for j, seq in zip(chunk, self._receive(conn), strict=True):
                    seqs[j] = seq
        return seqs  # type: ignore[return-value]

    def _receive(self, conn: Connection) -> list[dict[str, np.ndarray]]:
        try:
            status, value = conn.recv()
        except (EOFError, OSError):  # OSError: ConnectionResetError when it died while sending
            self._worker_lost(conn)
        if status == "error":
            exc, text = value
            exc.add_note(f"(raised in a worker of {self.name}:\n{text})")
            raise exc
        return value

    def _worker_lost(self, conn: Connection) -> NoReturn:
        """DataError naming the worker behind ``conn`` that ended without answering, and how it ended."""
        process = next(p for p, c in self._workers if c is conn)
        process.join(timeout=1)
        code = process.exitcode
        how = (
            "is still running but closed its connection"
            if code is None
            else f"was killed by {signal.Signals(-code).name}"
            if code < 0 and -code in signal.valid_signals()
            else f"exited with status {code}"
        )
        self._stop()
        raise DataError(
            f"{self.name}: worker process {process.pid} (of num_workers = {self.num_workers}) ended without answering: "
            f"it {how}{' (SIGKILL: often the out-of-memory killer; dmesg says)' if code == -signal.SIGKILL else ''}. "
            f"The batch it was reading is lost; run the same command again to continue from the newest checkpoint."
        ) from None

    def _started(self) -> list[tuple[multiprocessing.Process, Connection]]:
        """The workers of this process, started when first needed; none where this process cannot have children."""
        if self._pid != os.getpid():  # a copy in another process (pickled or forked): its own workers
            self._workers, self._pid = [], os.getpid()
        if not self._workers and not multiprocessing.current_process().daemon:
            context = multiprocessing.get_context("fork")
            for _ in range(self.num_workers):
                here, there = context.Pipe()
                ours = [conn for _, conn in self._workers] + [here]  # a forked worker holds copies: it closes them
                process = context.Process(target=_serve, args=(self.inner, there, ours), daemon=True, name=self.name)
                process.start()
                there.close()
                self._workers.append((process, here))
        return self._workers

    def _stop(self) -> None:
        for process, conn in self._workers:
            conn.close()
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
        self._workers = []

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_workers": []}

    def __del__(self) -> None:
        if getattr(self, "_pid", None) == os.getpid():
            self._stop()

    def __repr__(self) -> str:
        return f"<{self.name}: {self.num_seqs} seqs>"


def _serve(dataset: Dataset, conn: Connection, parent_ends: list[Connection]) -> None:
    """A worker: read the sequences asked for until the parent closes the pipe; an exception goes back to it."""
    for end in parent_ends:  # else the pipe stays open here when the parent closes its end
        end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes the pipe
    while True:
        try:
            epoch, indices = conn.recv()
        except EOFError:
            return
        try:
            dataset.use_epoch(epoch)
            conn.send(("ok", [dataset.get_seq(i) for i in indices]))
        except Exception as exc:  # noqa: BLE001 - the parent raises it
            text = traceback.format_exc()
            try:
                conn.send(("error", (exc, text)))
            except Exception:  # noqa: BLE001 - an exception that cannot be pickled
                conn.send(("error", (DataError(f"{type(exc).__name__}: {exc}"), text)))


DATASETS = (MultiProcDataset,)
