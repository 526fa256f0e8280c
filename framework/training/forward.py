"""task=forward's outputs: what ``forward_step`` marks, collected per sequence and written as one file.

The engine runs the task (``Engine.run("forward")``); this module is the library it writes with.

``output_file`` ending in ``.hdf`` gets RETURNN's HDF format (RETURNN's ``HDFDataset`` and ours
read it: the output ``output``, or else the first one, is the main ``data``, the others are
target keys, with sequence tags). Any other name gets an ``.npz`` file that numpy reads without
extra dependencies, in RETURNN's layout: per output, the sequences concatenated along their first
axis plus ``<name>:seq_len`` when the length varies (fixed-shape outputs are stacked [N, ...]),
and ``seq_index`` with each sequence's index in the dataset.

``model_outputs`` (RETURNN's notation, as ``extern_data``) declares the outputs: their names,
feature dimension and whether axis 1 has a variable length; each step's outputs are checked.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO

import numpy as np

from framework.base.config import Config
from framework.base.disk import probe_directory, write_atomically
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.core.run_ctx import MarkedOutput
from framework.datasets.extern_data import DataKey, parse_extern_data
from framework.datasets.hdf import write_hdf
from framework.training import returnn_forward

register(
    "forward_data",
    "any",
    "eval",
    "What task=forward runs on: the dataset option train, dev or eval, or a dataset (a dict as in RETURNN, a "
    "callable or a Dataset, as train takes).",
    __name__,
)
register(
    "forward_callback",
    "any",
    None,
    "RETURNN's forward callback: an object (or a function returning one) with init(*, model), "
    "process_seq(*, seq_tag, outputs) and finish(); it gets each sequence's outputs instead of output_file.",
    __name__,
)
register(
    "output_file",
    "str | None",
    None,
    "task=forward output: RETURNN's HDF format for a .hdf name, else .npz; None: <model>.<epoch>.forward.npz.",
    __name__,
)
register(
    "model_outputs",
    "dict | None",
    None,
    "Forward outputs, RETURNN's notation: {name: {'dim': D} or {'shape': ..., 'dtype': ...}}; marked outputs are checked against it.",
    __name__,
)


class OutputCollector:
    """Per-sequence outputs of a forward pass, written as one .hdf or .npz file."""

    def __init__(self, declared: dict[str, DataKey] | None = None) -> None:
        self.declared = declared
        self.seq_indices: list[int] = []
        self.outputs: dict[str, list[np.ndarray]] = {}
        self.variable: dict[str, bool] = {}

    def add(self, indices: np.ndarray, outputs: dict[str, MarkedOutput], batch: Any = None) -> None:
        """Split a batch's outputs into sequences (cut to ``seq_len`` where given); the output file needs the same
        outputs from every step, and at least one. (``batch``: the step's batch, for what a callback is given.)"""
        if not outputs:
            raise ConfigError(
                "forward_step marked no output, so the output file would hold nothing; call "
                "run_ctx.mark_as_output(tensor, name) or run_ctx.mark_as_default_output(tensor), or give a "
                "forward_callback (RETURNN's way: its process_seq gets each sequence, with whatever was marked)."
            )
        if self.outputs and set(outputs) != set(self.outputs):
            raise ConfigError(f"forward_step marked outputs {sorted(outputs)} but earlier {sorted(self.outputs)}.")
        self._split(indices, outputs)

    def _split(self, indices: np.ndarray, outputs: dict[str, MarkedOutput]) -> None:
        """Check ``outputs`` against ``model_outputs`` where declared, and append them per sequence."""
        if self.declared is not None:
            check_outputs(self.declared, outputs)
        self.seq_indices.extend(int(i) for i in indices)
        for name, marked in outputs.items():
            values = marked.tensor.detach().cpu().numpy()
            if values.shape[0] != len(indices):
                raise ConfigError(
                    f"mark_as_output({name!r}): first axis has size {values.shape[0]}, but the batch "
                    f"has {len(indices)} sequences; outputs must be [batch, ...]."
                )
            lengths = None if marked.seq_len is None else marked.seq_len.detach().cpu().numpy()
            if lengths is not None and (lengths.shape != (len(indices),) or values.ndim < 2):
                raise ConfigError(
                    f"mark_as_output({name!r}, seq_len=...): the lengths have the shape {list(lengths.shape)} for an "
                    f"output of shape {list(values.shape)}, but seq_len gives one length per sequence, [batch], of "
                    f"the output's axis 1. Lengths over more axes (RETURNN's per-hypothesis lengths of a beam, a "
                    f"dyn_size_ext over [batch, beam]) have no counterpart here: mark each hypothesis as an output of "
                    f"its own with its [batch] lengths, or leave seq_len out to hand over the padded values."
                )
            self.variable[name] = lengths is not None
            rows = [values[b] if lengths is None else values[b, : lengths[b]] for b in range(len(indices))]
            self.outputs.setdefault(name, []).extend(rows)

    def write(self, path: str, tags: list[str]) -> None:
        """Write atomically (temporary file, then rename): RETURNN's HDF for a ``.hdf`` path, else .npz."""
        if path.endswith((".hdf", ".h5", ".hdf5")):
            main = "output" if "output" in self.outputs else next(iter(self.outputs))
            sparse = {k: v.sparse_dim for k, v in (self.declared or {}).items() if v.sparse_dim is not None}
            rows = {k: [r if self.variable[k] else r[None] for r in v] for k, v in self.outputs.items()}
            write_hdf(path, rows, tags, main, sparse)
            return
        arrays = {"seq_index": np.array(self.seq_indices, dtype=np.int64)}
        for name, rows in self.outputs.items():
            if self.variable[name]:
                arrays[name] = np.concatenate(rows, axis=0)
                arrays[name + ":seq_len"] = np.array([len(r) for r in rows], dtype=np.int64)
            else:
                arrays[name] = np.stack(rows)

        def write(f: BinaryIO) -> None:
            np.savez(f, **arrays)

        write_atomically(path, write, "the forward output", "Free space or choose another path with 'output_file'.")


def check_outputs(declared: dict[str, DataKey], outputs: dict[str, MarkedOutput]) -> None:
    """Raise ConfigError when the marked outputs do not match ``model_outputs``."""
    if set(outputs) != set(declared):
        raise ConfigError(
            f"forward_step marked the outputs {sorted(outputs)}, but model_outputs declares {sorted(declared)}. "
            f"Mark each declared output (mark_as_default_output marks 'output'), or fix model_outputs."
        )
    for name, marked in outputs.items():
        want, shape = declared[name], tuple(marked.tensor.shape[1:])
        if len(shape) != len(want.shape) or any(
            w is not None and w != h for w, h in zip(want.shape, shape, strict=False)
        ):
            raise ConfigError(
                f"Output {name!r} has the shape [batch, {', '.join(map(str, shape))}], but model_outputs declares "
                f"{want.shape} (without the batch axis; None = variable length)."
            )
        if want.variable and marked.seq_len is None:
            raise ConfigError(
                f"model_outputs declares a variable-length axis for {name!r}, but no lengths were given: pass "
                f"seq_len=extern_data['data:seq_len'] (or the output's own lengths) when marking it."
            )


def output_path(config: Config, epoch: int) -> str:
    """``output_file``, else ``<model>.<epoch>.forward.npz``; its directory must be writable. With a
    ``forward_callback`` (RETURNN's interface), the outputs go to it instead of a file."""
    if config.get("forward_callback") is not None:
        return "forward_callback"
    if returnn_forward.fork_forward(config):
        return "forward hooks"
    path = config.get("output_file") or f"{config.get('model')}.{epoch:03d}.forward.npz"
    probe_directory(os.path.dirname(path), "directory of the forward output", "output_file")
    return path


def output_collector(
    config: Config, dataset: Any = None, model: Any = None, extern_data: dict[str, DataKey] | None = None
) -> OutputCollector:
    """A collector that checks each step's outputs against ``model_outputs`` where it is set; with a
    ``forward_callback``, one that hands each sequence to it (its ``init`` gets ``model`` here); with MiniReturnn's
    forward hooks, none (the hooks and the step write what they write)."""
    declared = config.get("model_outputs")
    declared = None if declared is None else parse_extern_data(declared, "model_outputs")
    callback = config.get("forward_callback")
    if callback is None and returnn_forward.fork_forward(config):
        return HookSink(declared)
    if callback is None:
        return OutputCollector(declared)
    if isinstance(callback, type) or not all(callable(getattr(callback, n, None)) for n in ("init", "process_seq")):
        callback = callback() if callable(callback) else callback  # RETURNN: a class or factory of the callback
    missing = [name for name in ("init", "process_seq", "finish") if not callable(getattr(callback, name, None))]
    if missing:
        raise ConfigError(
            f"forward_callback {callback!r} has no {', '.join(missing)}: RETURNN's interface is init(*, model), "
            f"process_seq(*, seq_tag, outputs) and finish() (returnn.forward_iface.ForwardCallbackIface)."
        )
    callback.init(model=getattr(model, "returnn_rf_module", model))  # RETURNN: the model get_model returned
    return CallbackSink(callback, declared, dataset, extern_data)


class CallbackSink(OutputCollector):
    """RETURNN's ``forward_callback``: each sequence's outputs go to ``process_seq(seq_tag=, outputs=)`` as they
    come, as RETURNN's ``forward_with_callback`` gives them (a TensorDict of Tensors with numpy ``raw_tensor``s cut
    to their lengths; ``returnn_forward.sequence_outputs``); ``finish()`` at the end."""

    def __init__(
        self,
        callback: Any,
        declared: dict[str, DataKey] | None,
        dataset: Any,
        extern_data: dict[str, DataKey] | None = None,
    ):
        super().__init__(declared)
        self.callback = callback
        self.dataset = dataset
        self.extern_data = extern_data

    def add(self, indices: np.ndarray, outputs: dict[str, MarkedOutput], batch: Any = None) -> None:
        # RETURNN's forward_with_callback checks the outputs only against model_outputs (check_outputs_complete):
        # without it, a step may mark any outputs, or none, and process_seq gets each sequence with what was marked.
        start = len(self.seq_indices)
        self.outputs = {}
        self._split(indices, outputs)
        tags = sequence_tags(self.dataset, self.seq_indices[start:])
        sparse = returnn_forward.sparse_classes(outputs, self.declared, batch, self.extern_data)
        for row, tag in enumerate(tags):
            rows = {name: rows[row] for name, rows in self.outputs.items()}
            self.callback.process_seq(
                seq_tag=tag, outputs=returnn_forward.sequence_outputs(rows, self.variable, sparse)
            )
        self.outputs = {name: [] for name in self.outputs}  # handed over: not kept (the names are, for the log)

    def write(self, path: str, tags: list[str]) -> None:
        self.callback.finish()


class HookSink(OutputCollector):
    """MiniReturnn's forward: no output file; what a step marks is left (the hooks and the step write their files)."""

    def add(self, indices: np.ndarray, outputs: dict[str, MarkedOutput], batch: Any = None) -> None:
        self.seq_indices.extend(int(i) for i in indices)

    def write(self, path: str, tags: list[str]) -> None:
        pass


def sequence_tags(dataset: Any, seq_indices: list[int]) -> list[str]:
    """The dataset's tags of ``seq_indices`` (``seq-<index>`` for a dataset without tags)."""
    tag = getattr(dataset, "seq_tag", lambda index: f"seq-{index}")
    return [tag(i) for i in seq_indices]
