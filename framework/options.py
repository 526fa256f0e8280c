"""The option registry: the single source of truth for every config option.

Each option is declared once here with its name, type, default, a one-line doc and the
component that reads it. The registry validates configs, prints ``rnn.py --help-options`` and
generates ``docs/options.rst``. This module imports nothing heavy, so validation and help
work before torch is loaded.

Types are written as a small union language, e.g. ``"int"``, ``"float | None"``,
``"str | list[str] | None"``, ``"dict | callable"``. ``float`` accepts ints; ``int`` rejects
bools; ``list`` accepts tuples; ``any`` accepts everything (the component validates further).
"""

from __future__ import annotations

import difflib
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

    def check(self, value: Any) -> str | None:
        """Return None when ``value`` fits this option, else a sentence saying what is wrong."""
        if not type_matches(self.type, value):
            return f"option {self.name!r} expects {self.type}, but got {_describe(value)}"
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(repr(c) for c in self.choices)
            return f"option {self.name!r} must be one of {allowed}, but got {value!r}"
        return None


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


def register(
    name: str,
    type: str,
    default: Any,
    doc: str,
    component: str,
    choices: Iterable[Any] | None = None,
) -> Option:
    """Declare an option. Each name may be registered once."""
    if name in _REGISTRY:
        raise ValueError(f"option {name!r} is registered twice")
    for atom in type.split("|"):
        _atom_matches(atom.strip(), None)  # fails early on a typo in the type spec
    option = Option(name, type, default, doc, component, tuple(choices) if choices else None)
    _REGISTRY[name] = option
    return option


def get(name: str) -> Option | None:
    """The registered option called ``name``, or None."""
    return _REGISTRY.get(name)


def all_options() -> list[Option]:
    """Every registered option, sorted by component, then name."""
    return sorted(_REGISTRY.values(), key=lambda o: (o.component, o.name))


def closest_name(name: str, cutoff: float = 0.8) -> str | None:
    """The registered option name closest to ``name``, if any is close enough to be a typo."""
    matches = difflib.get_close_matches(name, list(_REGISTRY), n=1, cutoff=cutoff)
    return matches[0] if matches else None


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

_C = "framework.engine"
register("device", "str", "auto", "Device to run on: auto (cuda if available, else cpu), cpu, cuda, cuda:N, mps.", _C)
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
register("num_epochs", "int", 1, "Number of (sub-)epochs to train.", _C)
register(
    "accum_grad_multiple_step",
    "int",
    1,
    "Accumulate gradients over this many batches per update; equivalent to a batch that many times larger.",
    _C,
)
register("random_seed", "int", 42, "Seed for torch, numpy, random and dataset shuffling.", _C)
register(
    "torch_distributed",
    "dict | None",
    None,
    "Train on the processes torchrun starts: {} or {'backend': 'gloo'|'nccl', 'find_unused_parameters': bool, 'param_sync_step': K}.",
    "framework.distributed",
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
    "Your own callbacks: {event: fn(engine) or [fns]}, events as in framework.events.Event (e.g. 'epoch_end', 'finish').",
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
    "int",
    1000,
    "Max padded frames per batch (max sequence length x number of sequences; non-sequence data: one per entry).",
    _C,
)
register("max_seqs", "int | None", None, "Max sequences per batch (None: no cap).", _C)
register(
    "torch_dataloader_opts",
    "dict | None",
    None,
    "Options for torch.utils.data.DataLoader, e.g. {'num_workers': 2, 'pin_memory': True}; None: load in the main process.",
    _C,
)

_C = "framework.optim"
register(
    "optimizer",
    "dict | str",
    {"class": "adam"},
    "{'class': adam|adamw|sgd|'module.Class', **kwargs}; kwargs go to the optimizer ('epsilon' means eps).",
    _C,
)
register("learning_rate", "float", 1e-3, "Initial learning rate.", _C)
register(
    "learning_rates",
    "list[float] | None",
    None,
    "Fixed learning rates for the first epochs (e.g. warmup); control takes over after.",
    _C,
)
register(
    "learning_rate_control",
    "str",
    "constant",
    "How the learning rate changes per epoch.",
    _C,
    choices=("constant", "newbob"),
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
)
register(
    "newbob_relative_error_threshold",
    "float",
    -0.01,
    "Newbob: decay when (new - old) / old of the watched score is above this.",
    _C,
)
register("min_learning_rate", "float", 0.0, "Lower bound for the learning rate under learning-rate control.", _C)
register(
    "dynamic_learning_rate",
    "callable | None",
    None,
    "dynamic_learning_rate(*, global_train_step, epoch, learning_rate, **kwargs) -> lr, applied every step.",
    _C,
)
register(
    "gradient_clip_global_norm", "float | None", None, "Clip gradients to this global L2 norm before each update.", _C
)
register("gradient_clip", "float | None", None, "Clip each gradient value to [-x, x] before each update.", _C)

_C = "framework.checkpoint"
register(
    "model",
    "str | None",
    None,
    "Checkpoint path prefix: writes <model>.001.pt, ...; a rerun resumes from the newest one. None: no checkpoints.",
    _C,
)
register("load_epoch", "int | None", None, "Checkpoint epoch to load for eval/forward (None: newest).", _C)
register(
    "import_model_train_epoch1",
    "str | None",
    None,
    "Checkpoint whose parameters start a fresh training (e.g. from tools/import-torch-model.py); ignored on resume.",
    _C,
)

_C = "framework.forward"
register(
    "forward_data",
    "str",
    "eval",
    "Dataset option that task=forward runs on: train, dev or eval.",
    _C,
    choices=("train", "dev", "eval"),
)
register("output_file", "str | None", None, "task=forward output (.npz); None: <model>.<epoch>.forward.npz.", _C)

_C = "framework.log"
register("log", "str | list[str] | None", None, "Log file(s) that receive everything printed to stdout (appended).", _C)
register(
    "log_verbosity",
    "int",
    4,
    "3: epoch summaries, 4: plus setup info, 5: plus a line per step.",
    _C,
    choices=(0, 1, 2, 3, 4, 5),
)

_C = "framework.debug.numerics"
register(
    "stop_on_nonfinite_train_score",
    "bool",
    True,
    "Stop before the optimizer step when an optimized loss is NaN/Inf, and name the culprit by replaying the step.",
    _C,
)
register(
    "num_allowed_consec_invalid_gradient_steps",
    "int",
    0,
    "Skip up to this many consecutive updates whose loss or gradient is non-finite (logged), then stop.",
    _C,
)
register(
    "debug_add_check_numerics_on_output",
    "bool",
    False,
    "Check every module's output and all gradients for NaN/Inf each step; on failure replay the step and name the module.",
    _C,
)
register(
    "debug_add_check_numerics_ops",
    "bool",
    False,
    "Check every aten op's output for NaN/Inf, forward and backward; names op and source line.",
    _C,
)
register(
    "debug_check_numerics_skip_modules",
    "list[str]",
    [],
    "Module path patterns (fnmatch, e.g. 'decoder.*.attn') whose outputs may be non-finite on purpose.",
    _C,
)
register(
    "debug_check_numerics_nan_only",
    "bool",
    False,
    "Numerics checks flag NaN only, not +-Inf (e.g. -inf attention masks).",
    _C,
)

_C = "framework.debug.layers"
register(
    "debug_print_layer_output_template",
    "bool",
    False,
    "At startup, print every module's output shape/dtype with symbolic dims (meta-device dry run); reports device bugs.",
    _C,
)
register(
    "debug_print_layer_output_shape", "bool", False, "Print every module's actual output shapes, one line per step.", _C
)

_C = "framework.debug.tracebacks"
register(
    "use_better_exchook",
    "bool",
    True,
    "Extended tracebacks (better_exchook): each frame with the values in its failing statement; tensors compact.",
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

_C = "framework.debug.shell"
register(
    "debug_shell_in_runner",
    "bool | int | list[int]",
    False,
    "Open a shell right before training steps: True (every step), a global step, or a list of them. SIGUSR2: next step.",
    _C,
)
register("debug_shell_on_exception", "bool", False, "On an exception, open a shell in the frame that raised it.", _C)

_C = "framework.debug.crash"
register(
    "watch_stall",
    "float | None",
    None,
    "Print every thread's stack when no step finishes within this many seconds (and again while it lasts).",
    _C,
)

_C = "framework.debug.memory"
register(
    "torch_log_memory_usage",
    "bool",
    False,
    "Memory per step in the step line (CUDA allocated, else process RSS) and current/peak per epoch.",
    _C,
)
register(
    "watch_memory",
    "bool",
    False,
    "A separate watcher process reports RSS/PSS/USS of this process and its children when they change.",
    _C,
)
register("debug_leak_check", "bool", True, "Warn once when RSS, CUDA memory or live Python objects grow steadily.", _C)
register(
    "debug_leak_check_interval", "int", 200, "Steps between two samples of the leak check (a sample costs ~0.7 ms).", _C
)

_C = "framework.debug.profiling"
register(
    "torch_profile",
    "bool | dict",
    False,
    "Profile a window of steps with torch.profiler: True or {wait, warmup, active, activities, record_shapes, ...}.",
    _C,
)
register(
    "torch_profile_dir", "str | None", None, "Where torch_profile writes trace.json (None: <model dir>/profile).", _C
)
register(
    "cprofile",
    "str | None",
    None,
    "Run cProfile over the training loop and write the stats to this file (snakeviz).",
    _C,
)

_C = "framework.debug.tensorboard"
register(
    "tensorboard_dir", "str | None", None, "Write TensorBoard summaries (scalars, graph, hparams, images) here.", _C
)
register("tf_log_dir", "str | None", None, "RETURNN's name for tensorboard_dir.", _C)
register("tensorboard_log_interval", "int", 1, "Steps between two per-step TensorBoard scalar writes.", _C)
register(
    "debug_grad_summaries",
    "bool | int",
    False,
    "Histograms of parameters and gradients and per-parameter gradient norms in TensorBoard: True (every 100 steps) or N.",
    _C,
)

_C = "framework.debug.sanity"
register(
    "debug_sanity_check",
    "bool | int",
    True,
    "Check the data (first N batches, True: 4) and the first step (losses, gradients, output ranges) before training.",
    _C,
)
register(
    "debug_output_ranges",
    "dict",
    {},
    "{module path pattern: (low, high)}: the sanity check and framework.testing verify these outputs; '(model)' = root.",
    _C,
)
register(
    "frozen_params",
    "list[str]",
    [],
    "Parameter name patterns (fnmatch) that must not change in training; the sanity and gradient checks verify it.",
    _C,
)

_C = "framework.debug.grad_health"
register(
    "debug_grad_health",
    "bool | int",
    100,
    "Every N updates (True: 10, False: off): per-layer gradient norms and |dW|/|W|; warns on vanishing/exploding.",
    _C,
)

_C = "framework.debug.learning_watch"
register(
    "debug_loss_window",
    "int",
    200,
    "Warn when the mean train loss of the latest N steps is not below that of the first N steps (0: off).",
    _C,
)
register(
    "debug_dev_divergence_epochs",
    "int",
    2,
    "Warn of overfitting when a dev loss rose for this many epochs in a row while the train loss fell (0: off).",
    _C,
)

_C = "framework.early_stopping"
register(
    "early_stopping_patience",
    "int | None",
    None,
    "End training when the watched score did not improve for this many epochs (None: never).",
    _C,
)
register(
    "early_stopping_error_measure",
    "str | None",
    None,
    "Score that early stopping watches, e.g. 'dev_ce'; None: the learning-rate control's (first dev loss).",
    _C,
)
register("early_stopping_min_delta", "float", 0.0, "Early stopping: an improvement must be larger than this.", _C)

_C = "framework.debug.verdicts"
register(
    "debug_overfit_batches",
    "int | None",
    None,
    "Train on the first N batches only (no shuffling, no checkpoints) and say whether the loss reaches near zero.",
    _C,
)
register("debug_overfit_steps", "int", 300, "Steps of a debug_overfit_batches run.", _C)
register(
    "debug_overfit_loss_ratio",
    "float",
    0.05,
    "debug_overfit_batches verdict 'learns': the final loss is at most this fraction of the first.",
    _C,
)
register(
    "debug_synthetic_data",
    "bool",
    False,
    "Swap train/dev for synthetic data of the same extern_data with a learnable relation; say whether the model learns it.",
    _C,
)
register(
    "debug_synthetic_loss_ratio",
    "float",
    0.5,
    "debug_synthetic_data verdict 'learns': the final dev loss is at most this fraction of the untrained model's.",
    _C,
)

_C = "framework.debug.fingerprints"
register(
    "debug_fingerprint_file",
    "str | None",
    None,
    "Write per-step hashes of batch, module outputs, gradients and parameters here (tools/check-determinism.py).",
    _C,
)
register("debug_fingerprint_steps", "int", 5, "Steps to fingerprint; training ends after them.", _C)
