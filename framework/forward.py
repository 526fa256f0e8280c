"""task=forward: run ``forward_step`` over a dataset and write the marked outputs to an .npz file.

Why .npz and not RETURNN's HDF5: numpy reads it with no extra dependency, and the layout is
RETURNN's: per output, the sequences concatenated along their first axis plus
``<name>:seq_len`` when the length varies (fixed-shape outputs are stacked [N, ...]), and
``seq_index`` with each sequence's index in the dataset.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from framework import log
from framework.build import make_loader, resolve_extern_data
from framework.datasets import init_dataset
from framework.datasets.extern_data import check_dataset
from framework.disk import describe_os_error, probe_directory
from framework.engine import Engine
from framework.errors import ConfigError, WriteError
from framework.run_ctx import MarkedOutput
from framework.step import step_function


class OutputCollector:
    """Per-sequence outputs of a forward pass, written as one .npz file."""

    def __init__(self) -> None:
        self.seq_indices: list[int] = []
        self.outputs: dict[str, list[np.ndarray]] = {}
        self.variable: dict[str, bool] = {}

    def add(self, indices: np.ndarray, outputs: dict[str, MarkedOutput]) -> None:
        """Split a batch's outputs into sequences (cut to ``seq_len`` where given)."""
        if not outputs:
            raise ConfigError("forward_step marked no output; call run_ctx.mark_as_output(tensor, name).")
        if self.outputs and set(outputs) != set(self.outputs):
            raise ConfigError(f"forward_step marked outputs {sorted(outputs)} but earlier {sorted(self.outputs)}.")
        self.seq_indices.extend(int(i) for i in indices)
        for name, marked in outputs.items():
            values = marked.tensor.detach().cpu().numpy()
            if values.shape[0] != len(indices):
                raise ConfigError(
                    f"mark_as_output({name!r}): first axis has size {values.shape[0]}, but the batch "
                    f"has {len(indices)} sequences; outputs must be [batch, ...]."
                )
            lengths = None if marked.seq_len is None else marked.seq_len.detach().cpu().numpy()
            self.variable[name] = lengths is not None
            rows = [values[b] if lengths is None else values[b, : lengths[b]] for b in range(len(indices))]
            self.outputs.setdefault(name, []).extend(rows)

    def write(self, path: str) -> None:
        """Write atomically (temporary file, then rename)."""
        arrays = {"seq_index": np.array(self.seq_indices, dtype=np.int64)}
        for name, rows in self.outputs.items():
            if self.variable[name]:
                arrays[name] = np.concatenate(rows, axis=0)
                arrays[name + ":seq_len"] = np.array([len(r) for r in rows], dtype=np.int64)
            else:
                arrays[name] = np.stack(rows)
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise WriteError(
                f"Writing the forward output {path} failed: {describe_os_error(exc)}. The partial file was removed. "
                f"Free space or choose another path with the 'output_file' option."
            ) from None


def run_forward(engine: Engine) -> str:
    """Run the forward task; return the output file's path."""
    config = engine.config
    with engine.running():
        step_function(config, "forward")  # a missing forward_step is a config error before anything is loaded
        option = config.get("forward_data")
        if config.get(option) is None:
            raise ConfigError(f"task='forward' runs on dataset {option!r} (option forward_data), which is not set.")
        dataset = init_dataset(config.get(option), option=option, random_seed=config.int("random_seed"))
        have = dataset.key_info()
        # Targets may be absent from the data to forward; inputs needed for inference may not.
        extern_data = {
            k: v for k, v in resolve_extern_data(config, dataset).items() if k in have or v.available_for_inference
        }
        check_dataset(extern_data, dataset, option)
        engine.state.extern_data = extern_data
        loader = make_loader(config, option, dataset, extern_data, engine.state.device)
        engine.load_for_inference()
        path = config.get("output_file") or f"{config.get('model')}.{engine.state.epoch:03d}.forward.npz"
        probe_directory(os.path.dirname(path), "directory of the forward output", "output_file")
        collector = OutputCollector()
        engine.run_forward(loader, lambda indices, run_ctx: collector.add(indices, run_ctx.outputs))
        collector.write(path)
    log.v3(f"Forward: wrote {len(collector.seq_indices)} sequences ({', '.join(collector.outputs)}) to {path}")
    return path
