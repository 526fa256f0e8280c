"""The option registry: the single source of truth for every config option.

Each option is declared once, with its name, type, default, a one-line doc, the component that
reads it and optionally choices, a range and what ``True`` means: the core options here, each
diagnostic's in its own plugin module (``framework.core.plugin``), whose declarations are read from
the source without importing it. The registry validates configs, prints ``rnn.py --help-options``
and generates ``docs/options.rst``; validation and help work before torch is loaded.

Types are written as a small union language, e.g. ``"int"``, ``"float | None"``,
``"str | list[str] | None"``, ``"dict | callable"``. ``float`` accepts ints; ``int`` rejects
bools; ``list`` accepts tuples; ``any`` accepts everything (the component validates further).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    """One registered config option."""

    name: str
    type: str
    default: Any
    doc: str
    component: str
    choices: tuple[Any, ...] | None = None
    range: str | None = None  # an interval such as "[1, inf)" or "(0, 1]"; lists: each element, dicts: each value
    true_means: Any = None  # for "bool | int" options: the number that True stands for

    def check(self, value: Any) -> str | None:
        """Return None when ``value`` fits this option, else a sentence saying what is wrong."""
        if not type_matches(self.type, value):
            return f"option {self.name!r} expects {self.type}, but got {_describe(value)}"
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(repr(c) for c in self.choices)
            return f"option {self.name!r} ({self.doc.rstrip('.')}) must be one of {allowed}, but got {value!r}"
        numbers = (
            list(value.values()) if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
        )
        for number in numbers:
            if not _is_number(number):
                continue
            if number != number:
                return f"option {self.name!r} is NaN; give a number"
            if self.range is not None and not in_interval(self.range, number):
                where = (
                    ""
                    if number is value
                    else f" ({'a value' if isinstance(value, dict) else 'element'} {number!r} of {value!r})"
                )
                return (
                    f"option {self.name!r} ({self.doc.rstrip('.')}) must be in {self.range}, but got {number!r}{where}"
                )
        return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_INTERVAL = re.compile(r"^([\[(])\s*(-inf|[-+0-9.e]+)\s*,\s*(inf|[-+0-9.e]+)\s*([\])])$")


def parse_interval(text: str) -> tuple[float, bool, float, bool]:
    """``"[1, inf)"`` -> (low, low included, high, high included); ValueError if malformed."""
    match = _INTERVAL.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"range {text!r} is not an interval such as '[1, inf)' or '(0, 1]'")
    opening, low, high, closing = match.groups()
    return float(low), opening == "[", float(high), closing == "]"


def in_interval(text: str, value: float) -> bool:
    """Whether ``value`` lies in the interval ``text`` (e.g. ``"(0, 1]"``)."""
    low, low_closed, high, high_closed = parse_interval(text)
    above = value >= low if low_closed else value > low
    below = value <= high if high_closed else value < high
    return above and below


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(value).__name__} {text}"


def _atom_matches(atom: str, value: Any) -> bool:
    if atom == "any":
        return True
    if atom == "None":
        return value is None
    if atom == "bool":
        return isinstance(value, bool)
    if atom == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if atom == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if atom == "str":
        return isinstance(value, str)
    if atom == "dict":
        return isinstance(value, dict)
    if atom == "callable":
        return callable(value)
    if atom.startswith("list"):
        if not isinstance(value, (list, tuple)):
            return False
        if atom == "list":
            return True
        inner = atom[len("list[") : -1]
        return all(_atom_matches(inner, v) for v in value)
    raise ValueError(f"unknown type atom {atom!r} in the option registry")


def type_matches(type_spec: str, value: Any) -> bool:
    """Whether ``value`` matches a union type spec such as ``"int | None"``."""
    return any(_atom_matches(atom.strip(), value) for atom in type_spec.split("|"))


_REGISTRY: dict[str, Option] = {}
_plugins_read = False


def register(
    name: str,
    type: str,
    default: Any,
    doc: str,
    component: str,
    choices: Iterable[Any] | None = None,
    range: str | None = None,
    true_means: Any = None,
) -> Option:
    """Declare an option. Each name is declared once (a plugin module's declaration may be read twice:
    from its source without importing it, then when it is imported)."""
    for atom in type.split("|"):
        _atom_matches(atom.strip(), None)  # fails early on a typo in the type spec
    option = Option(name, type, default, doc, component, tuple(choices) if choices else None, range, true_means)
    if name in _REGISTRY and _REGISTRY[name] != option:
        raise ValueError(f"option {name!r} is registered twice")
    if range is not None:
        parse_interval(range)  # fails early on a malformed range
    if option.range is not None and option.check(default) is not None:
        raise ValueError(f"option {name!r}: its default {default!r} is outside its range")
    _REGISTRY[name] = option
    return option


def _read_plugin_options() -> None:
    """Register the options the framework's plugin modules declare, without importing them (and torch).

    A plugin module declares its options with top-level ``register(...)`` calls; the files are found by a
    scan of the package's source (a text search first, so only the declaring modules are parsed).
    """
    global _plugins_read
    if _plugins_read:
        return
    _plugins_read = True
    package = os.path.dirname(os.path.abspath(__file__))
    for directory, _, files in sorted(os.walk(package)):
        for name in sorted(files):
            path = os.path.join(directory, name)
            if not name.endswith(".py") or path == os.path.abspath(__file__):
                continue
            with open(path, encoding="utf-8") as f:
                source = f.read()
            if "\nregister(" in source:
                module = os.path.relpath(path[:-3], os.path.dirname(package)).replace(os.sep, ".")
                read_declared_options(module, source, path)


def read_declared_options(module_name: str, source: str | None = None, path: str | None = None) -> None:
    """Register the options that ``module_name`` declares at its top level, from its source.

    Declarations with anything but literals as arguments make the module be imported instead.
    """
    if source is None:
        path = importlib.util.find_spec(module_name).origin
        with open(path, encoding="utf-8") as f:
            source = f.read()
    tree = ast.parse(source, path)
    for node in tree.body:
        call = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "register"):
            continue
        try:
            args = [_literal(a, module_name) for a in call.args]
            kwargs = {k.arg: _literal(k.value, module_name) for k in call.keywords}
        except ValueError:
            importlib.import_module(module_name)  # registers as it runs
            return
        register(*args, **kwargs)


def _literal(node: ast.expr, module_name: str) -> Any:
    if isinstance(node, ast.Name) and node.id == "__name__":
        return module_name
    return ast.literal_eval(node)


def get(name: str) -> Option | None:
    """The registered option called ``name``, or None."""
    if name not in _REGISTRY:
        _read_plugin_options()
    return _REGISTRY.get(name)


def all_options() -> list[Option]:
    """Every registered option, sorted by component, then name."""
    _read_plugin_options()
    return sorted(_REGISTRY.values(), key=lambda o: (o.component, o.name))


def closest_name(name: str, cutoff: float = 0.8) -> str | None:
    """The registered option name closest to ``name``, if any is close enough to be a typo."""
    matches = closest_names(name, n=1, cutoff=cutoff)
    return matches[0] if matches else None


def closest_names(name: str, n: int, cutoff: float) -> list[str]:
    """Up to ``n`` registered option names similar to ``name``, the closest first."""
    _read_plugin_options()
    return difflib.get_close_matches(name, list(_REGISTRY), n=n, cutoff=cutoff)


# ---------------------------------------------------------------------------------------------
# The options. Names follow RETURNN wherever RETURNN has the concept.

_C = "framework.config"
register(
    "task",
    "str",
    "train",
    "What to run: train, eval (score dev/eval sets) or forward.",
    _C,
    choices=("train", "eval", "forward"),
)
register("config", "any", None, "Reserved: the injected Config object (read-only in configs).", _C)
register(
    "backend",
    "str",
    "torch",
    "RETURNN's backend option: 'torch' is what runs here; RETURNN's TensorFlow and JAX backends are not supported.",
    _C,
    choices=("torch",),
)

_C = "framework.core.engine"
register(
    "device",
    "str",
    "auto",
    "Device to run on: auto (cuda if available, else cpu), cpu, cuda, cuda:N, mps, or gpu (RETURNN's value: the "
    "machine's accelerator, an error without one).",
    _C,
)
register(
    "torch_num_threads",
    "int | str",
    "auto",
    "torch's CPU threads: a number, or 'auto' (OMP_NUM_THREADS if set, else the cores that CPU affinity and the "
    "cgroup quota allow, less those other processes keep busy at startup).",
    "framework.training.threads",
)
register("get_model", "callable | None", None, "get_model(*, epoch, step, **kwargs) -> nn.Module builds the model.", _C)
register(
    "train_step",
    "callable | None",
    None,
    "train_step(*, model, extern_data, run_ctx, **kwargs): computes losses via run_ctx.mark_as_loss.",
    _C,
)
register(
    "forward_step",
    "callable | None",
    None,
    "forward_step(*, model, extern_data, run_ctx, **kwargs): marks outputs via run_ctx.mark_as_output.",
    _C,
)
register("num_epochs", "int", 1, "Number of (sub-)epochs to train.", _C, range="[1, inf)")
register(
    "accum_grad_multiple_step",
    "int",
    1,
    "Accumulate gradients over this many batches per update; equivalent to a batch that many times larger.",
    _C,
    range="[1, inf)",
)
register("random_seed", "int", 42, "Seed for torch, numpy, random and dataset shuffling.", _C, range="[0, 4294967295]")
register(
    "torch_distributed",
    "dict | None",
    None,
    "Train on the processes torchrun starts: {} or {'backend': 'gloo'|'nccl', 'find_unused_parameters': bool, "
    "'param_sync_step': K}, or with FSDP2 {'fsdp': {fully_shard options}} (docs/fsdp.rst).",
    "framework.training.distributed",
)
register(
    "eval_datasets",
    "dict | None",
    None,
    "Extra evaluation datasets: {name: dataset spec}, scored after each epoch.",
    _C,
)
register(
    "callbacks",
    "dict",
    {},
    "Your own callbacks: {event: fn(state) or [fns]}, events as in framework.core.events.Event (e.g. 'epoch_end', 'close').",
    _C,
)
register(
    "plugins",
    "list",
    [],
    "Your own diagnostics: module names (each with PLUGINS = (...)) or Plugin classes; see docs/writing_a_diagnostic.rst.",
    _C,
)

_C = "framework.datasets"
register(
    "extern_data",
    "dict | None",
    None,
    "Batch keys: {key: {shape, dtype, sparse_dim}}; None axes are variable-length. None: take from the train dataset.",
    _C,
)
register("train", "any", None, "Training dataset: {'class': Name, ...}, 'module.Class' dict, callable or Dataset.", _C)
register("dev", "any", None, "Development dataset, scored after each epoch; drives newbob learning-rate control.", _C)
register("eval", "any", None, "Evaluation dataset, scored after each epoch and used by task=eval/forward.", _C)
register(
    "batch_size",
    "int | dict",
    1000,
    "Max padded frames per batch (max sequence length x number of sequences; non-sequence data: one per entry); "
    "a dict {key: N} limits each named key's padded frames (RETURNN's per-key batch_size).",
    _C,
    range="[1, inf)",
)
register(
    "max_seq_length",
    "int | dict | None",
    None,
    "Leave out sequences longer than this (every dataset, as in RETURNN's torch engine); a dict {key: N} checks the "
    "named keys only.",
    _C,
    range="[0, inf)",
)
register(
    "min_seq_length",
    "int | dict | None",
    None,
    "Leave out sequences shorter than this (every dataset); a dict {key: N} checks the named keys only.",
    _C,
    range="[0, inf)",
)
register("max_seqs", "int | None", None, "Max sequences per batch (None: no cap).", _C, range="[1, inf)")
register(
    "batching",
    "str | None",
    None,
    "RETURNN's name for the train dataset's seq_ordering (random, sorted, laplace:N, ...) when its dict sets none.",
    _C,
)
register(
    "torch_dataloader_opts",
    "dict | None",
    None,
    "Options for torch.utils.data.DataLoader, e.g. {'num_workers': 2, 'pin_memory': True}; None: load in the main process.",
    _C,
)

_C = "framework.training.optim"
register(
    "optimizer",
    "dict | str",
    {"class": "adam"},
    "{'class': any torch.optim name (adam, adamw, nadam, sgd, ...) | 'module.Class' | callable, **kwargs}; kwargs "
    "go to the optimizer ('epsilon' means eps). With weight_decay, biases and the parameters of "
    "weight_decay_modules_blacklist (default: LayerNorm, Embedding) do not decay, as in RETURNN.",
    _C,
)
register("learning_rate", "float", 1e-3, "Initial learning rate.", _C, range="[0, inf)")
register(
    "learning_rates",
    "list[float] | None",
    None,
    "Fixed learning rates for the first epochs (e.g. warmup); control takes over after.",
    _C,
    range="[0, inf)",
)
register(
    "learning_rate_control",
    "str",
    "constant",
    "How the learning rate changes per epoch.",
    _C,
    choices=("constant", "newbob", "newbob_rel", "newbob_relative", "newbob_multi_epoch"),
)
register(
    "newbob_multi_num_epochs",
    "int",
    5,
    "newbob_multi_epoch: the mean relative change over this many epochs decides (RETURNN's option).",
    _C,
    range="[1, inf)",
)
register(
    "newbob_multi_update_interval",
    "int | None",
    None,
    "newbob_multi_epoch: decide every this many epochs (None: newbob_multi_num_epochs).",
    _C,
    range="[1, inf)",
)
register(
    "learning_rate_control_relative_error_relative_lr",
    "bool",
    False,
    "Newbob: divide the relative change by learning rate / initial learning rate (RETURNN's option).",
    _C,
)
register(
    "learning_rate_control_min_num_epochs_per_new_lr",
    "int",
    0,
    "Newbob: keep a new learning rate at least this many epochs (RETURNN's option).",
    _C,
    range="[0, inf)",
)
register(
    "newbob_relative_error_div_by_old",
    "bool",
    False,
    "Newbob: the relative change is (new - old) / |old| instead of RETURNN's default (new - old) / |new|.",
    _C,
)
register(
    "learning_rate_control_error_measure",
    "str | None",
    None,
    "Score that newbob watches, as '<dataset>_<loss>' (e.g. dev_ce); None: first loss on the first dev set.",
    _C,
)
register(
    "newbob_learning_rate_decay",
    "float",
    0.5,
    "Newbob: multiply the learning rate by this when the score stops improving.",
    _C,
    range="(0, 1]",
)
register(
    "learning_rate_decay",
    "float | None",
    None,
    "RETURNN's name for newbob_learning_rate_decay; wins over it when both are set.",
    _C,
    range="(0, 1]",
)
register(
    "newbob_relative_error_threshold",
    "float",
    -0.01,
    "Newbob: decay when the relative change (new - old) / |new| of the watched score is above this.",
    _C,
)
register(
    "min_learning_rate",
    "float",
    0.0,
    "Lower bound for the learning rate under learning-rate control.",
    _C,
    range="[0, inf)",
)
register(
    "dynamic_learning_rate",
    "callable | None",
    None,
    "dynamic_learning_rate(*, global_train_step, epoch, epoch_continuous, learning_rate, **kwargs) -> lr, applied "
    "every step (the arguments RETURNN passes; a function without **kwargs gets those it names).",
    _C,
)
register(
    "gradient_clip_global_norm",
    "float | None",
    None,
    "Clip gradients to this global L2 norm before each update (0: off, as in RETURNN).",
    _C,
    range="[0, inf)",
)
register(
    "gradient_clip",
    "float | None",
    None,
    "Clip each gradient value to [-x, x] before each update (0: off, as in RETURNN).",
    _C,
    range="[0, inf)",
)
register(
    "gradient_noise",
    "float",
    0.0,
    "Add truncated normal noise with this std to the gradients before clipping (RETURNN's option; 0: off).",
    _C,
    range="[0, inf)",
)

_C = "framework.training.checkpoint"
register(
    "output_dir",
    "str | None",
    None,
    "Where the shipped configs put this run's files (checkpoints, logs, TensorBoard, images): "
    "framework.config.run_output_dir(), output/<config file names joined by '+'>. ++output_dir moves them.",
    _C,
)
register(
    "model",
    "str | None",
    None,
    "Checkpoint path prefix: writes <model>.001.pt, ...; a rerun resumes from the newest one. None: no checkpoints.",
    _C,
)
register(
    "load_epoch", "int | None", None, "Checkpoint epoch to load for eval/forward (None: newest).", _C, range="[1, inf)"
)
register(
    "frozen_params",
    "list[str]",
    [],
    "Parameter name patterns (fnmatch) that must not change in training; the sanity and gradient checks verify it.",
    _C,
)
register(
    "import_model_train_epoch1",
    "str | None",
    None,
    "Checkpoint whose parameters start a fresh training (e.g. from framework-import-torch-model); ignored on resume.",
    _C,
)
register(
    "save_interval",
    "int",
    1,
    "Write the epoch checkpoint every this many epochs, and after the last (RETURNN's option).",
    _C,
    range="[1, inf)",
)
register(
    "preload_from_files",
    "dict | None",
    None,
    "RETURNN's {name: {'filename': ckpt, 'prefix', 'checkpoint_key', 'ignore_missing', 'var_name_mapping', "
    "'init_for_train'}}: parameters loaded into the model (init_for_train: when a training starts fresh).",
    _C,
)

register(
    "resume_learning_rate",
    "str",
    "checkpoint",
    "On resume, whose learning rate counts: the checkpoint's schedule (RETURNN's rule) or the config's learning_rate from the resumed epoch on.",
    "framework.training.resume",
    choices=("checkpoint", "config"),
)

_C = "framework.training.forward"
register(
    "forward_data",
    "str | dict",
    "eval",
    "What task=forward runs on: the dataset option train, dev or eval, or a dataset dict (as in RETURNN).",
    _C,
)
register(
    "forward_callback",
    "any",
    None,
    "RETURNN's forward callback: an object (or a function returning one) with init(*, model), "
    "process_seq(*, seq_tag, outputs) and finish(); it gets each sequence's outputs instead of output_file.",
    _C,
)
register(
    "output_file",
    "str | None",
    None,
    "task=forward output: RETURNN's HDF format for a .hdf name, else .npz; None: <model>.<epoch>.forward.npz.",
    _C,
)
register(
    "model_outputs",
    "dict | None",
    None,
    "Forward outputs, RETURNN's notation: {name: {'dim': D} or {'shape': ..., 'dtype': ...}}; marked outputs are checked against it.",
    _C,
)

_C = "framework.log"
register(
    "findings_fail_level",
    "str | None",
    None,
    "'warning' or 'error': after doing its work, the run exits with status 3 if a check reported a finding of that "
    "severity or above (for CI). None: findings do not change the exit status.",
    "framework.core.run_findings",
    choices=(None, "warning", "error"),
)
register(
    "log",
    "str | list[str] | None",
    None,
    "Log file(s) that receive everything printed to stdout (appended); a failing write is reported once on stderr "
    "and the run goes on.",
    _C,
)
register(
    "log_verbosity",
    "int",
    4,
    "3: epoch summaries, 4: plus setup info, 5: plus a line per step.",
    _C,
    choices=(0, 1, 2, 3, 4, 5),
)
register(
    "log_batch_size",
    "bool",
    False,
    "With log_verbosity 5, each step line shows the batch's sequences and frames per key (RETURNN's option).",
    _C,
)

_C = "framework.training.exit_log"
register(
    "stop_grace_seconds",
    "float",
    10.0,
    "How long an ending run waits for the current step after SIGINT/SIGTERM/SIGHUP, and for threads the config left "
    "running after the task; then it writes every thread's stack to the log and exits (SIGTERM: 143).",
    _C,
    range="(0, inf)",
)

_C = "framework.training.periodic_checkpoints"
register(
    "checkpoint_every_n_steps",
    "int | None",
    None,
    "Also write <model>.interrupted.pt inside an epoch, every N training steps (at an update boundary); a restart "
    "resumes from it bit for bit. None: epoch checkpoints only.",
    _C,
    range="[1, inf)",
)
register(
    "checkpoint_every_n_minutes",
    "float | None",
    None,
    "Also write <model>.interrupted.pt inside an epoch when this many minutes passed since the last checkpoint.",
    _C,
    range="(0, inf)",
)

_C = "framework.training.preemption"
register(
    "requeue_signal",
    "str | int | None",
    None,
    "A signal (e.g. 'SIGUSR2', sent by SLURM's --signal=USR2@90) on which training writes its checkpoint at the "
    "next update boundary, runs requeue_command on rank 0 and exits 130. None: off (SIGUSR1 dumps the stacks).",
    _C,
)
register(
    "requeue_command",
    "list[str] | None",
    None,
    "The command that requeues the job after a requeue_signal stop. None: scontrol requeue $SLURM_JOB_ID when "
    "running under SLURM, else none.",
    _C,
)

_C = "framework.inspection.tracebacks"
register(
    "use_better_exchook",
    "bool",
    False,
    "Full tracebacks (better_exchook): every frame with its variables. Default: your frames only, library frames folded.",
    _C,
)
register(
    "use_lovely_tensors",
    "bool",
    False,
    "Tensor reprs everywhere (logs, shells, tracebacks) are lovely-tensors summaries.",
    _C,
)
register(
    "startup_callback",
    "callable | None",
    None,
    "startup_callback(config=config) is called once, early, e.g. to install your own tools.",
    _C,
)
