"""Loading RETURNN-style Python configs: files, ``++key value`` overrides, validation, access.

A config is one or more plain Python files executed, in order, in one shared namespace; its
globals are the options. The namespace holds an injected ``config`` object, so code in the file
can read overrides (``config.int("num_layers", 2)``) while the file is still executing.
Overrides are applied to the namespace after the files ran, so functions in the config that
read a global at call time see the overridden value.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import shlex
import sys
import sysconfig
import traceback
import types
from collections.abc import Iterable
from typing import Any

from framework.base import options, returnn_config, returnn_options
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.base.safe_create import open_for_reading

register(
    "task",
    "str",
    "train",
    "What to run: train, eval (score dev/eval sets) or forward.",
    __name__,
    choices=("train", "eval", "forward"),
)
register("config", "any", None, "Reserved: the injected Config object (read-only in configs).", __name__)
register(
    "backend",
    "str",
    "torch",
    "RETURNN's backend option: 'torch' is what runs here; RETURNN's TensorFlow and JAX backends are not supported.",
    __name__,
    choices=("torch",),
)


_MISSING = object()

# Closer than this to a registered option name, an unknown global is taken for a typo.
_TYPO_CUTOFF = 0.85

# An unknown global starting with one of these is taken for an option name the user believes in
# (``debug_check_numerics``, ``lr_shedule``), however far from a real one. Exempt are functions
# and classes (``def debug_print_stats``), and any name the config's code reads: RETURNN configs
# keep their own settings as globals (``learning_rate_warmup_steps``, read by their
# ``dynamic_learning_rate`` with ``config.int(...)``).
OPTION_FAMILIES = (
    "debug_",
    "torch_",
    "tf_",
    "learning_rate",
    "lr_",
    "newbob_",
    "early_stopping",
    "gradient_clip",
    "tensorboard",
    "accum_grad",
)


class Config:
    """The options of one run: the config files' globals plus overrides, typed access."""

    def __init__(self, values: dict[str, Any] | None = None, overrides: dict[str, Any] | None = None):
        self.namespace: dict[str, Any] = {} if values is None else values
        self.overrides: dict[str, Any] = dict(overrides or {})
        self.derived: dict[str, Any] = {}  # set by a plugin's mode (Plugin.prepare), e.g. a verdict run's epochs
        self.files: list[str] = []
        self.without_effect: dict[str, str] = {}  # RETURNN options set without effect here -> why (startup note)
        # RETURNN's accum_grad_multiple_step given as a function (framework.core.accumulation.update_boundary)
        self.accum_function: Any = None
        self.aliased: set[str] = set()  # RETURNN fork options applied as an option here (returnn_options.FORK_ALIASES)
        self.namespace["config"] = self

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Config:
        """A config from a dict of option values, as if a file had defined them as globals (validated)."""
        config = cls(dict(values))
        config.validate()
        return config

    def has(self, name: str) -> bool:
        """Whether the config files or overrides set ``name``."""
        return name in self.derived or name in self.overrides or name in self.namespace

    def derive(self, values: dict[str, Any], by: str) -> None:
        """Set option values that a plugin's mode needs (``Plugin.prepare``), checked like ``++`` overrides.

        They win over files and overrides; printed commands (``command_args``) do not repeat them,
        as the mode sets them again.
        """
        for name, value in values.items():
            option = options.get(name)
            problem = f"{name!r} is not a registered option" if option is None else option.check(value)
            if problem:
                raise ConfigError(f"The plugin {by} sets {name} = {value!r}, which is invalid: {problem}")
        self.derived.update(values)

    def typed_value(self, name: str, default: Any = _MISSING) -> Any:
        """The value of ``name``: a plugin mode's, else the override, else the files' value, else the default."""
        if name in self.derived:
            return self.derived[name]
        if name in self.overrides:
            return self.overrides[name]
        if name in self.namespace:
            return self.namespace[name]
        if default is not _MISSING:
            return default
        option = options.get(name)
        if option is None:
            raise KeyError(f"config has no value for {name!r} and it is not a registered option")
        return option.default

    get = typed_value

    def __getitem__(self, name: str) -> Any:
        return self.typed_value(name)

    def __contains__(self, name: str) -> bool:
        return self.has(name)

    def int(self, name: str, default: Any = _MISSING) -> int | None:
        """``name`` as an int (RETURNN's ``config.int``)."""
        value = self.typed_value(name, default)
        return None if value is None else int(value)

    def float(self, name: str, default: Any = _MISSING) -> float | None:
        """``name`` as a float."""
        value = self.typed_value(name, default)
        return None if value is None else float(value)

    def bool(self, name: str, default: Any = _MISSING) -> bool:
        """``name`` as a bool; strings such as "true"/"0" are understood."""
        value = self.typed_value(name, default)
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return bool(value)

    def int_or_off(self, name: str) -> int | None:
        """A ``bool | int`` option: None when off (False, None, 0), its declared ``true_means`` for True, else the int."""
        value = self.typed_value(name)
        if value is None or value is False or value == 0:
            return None
        if value is True:
            return int(options.get(name).true_means)
        return int(value)

    def str(self, name: str, default: Any = _MISSING) -> str | None:
        """``name`` as a str."""
        value = self.typed_value(name, default)
        return None if value is None else str(value)

    def command_args(self) -> str:
        """The config files and ``++`` overrides of this run, shell-quoted: what a printed command must repeat."""
        overrides = [part for key, value in self.overrides.items() for part in (f"++{key}", _override_text(value))]
        return " ".join(shlex.quote(part) for part in [*self.files, *overrides])

    def _task(self) -> Any:
        return self.namespace.get("task", "train")

    def validate(self) -> None:
        """Check every option value's type and flag globals that look like misspelled options."""
        import_plugin_modules(self)  # their modules register their options
        problems, culprits = [], set()
        used = None
        for name, value in list(self.namespace.items()):  # a fork alias adds its option (FORK_ALIASES)
            if name == "config" or name.startswith("_") or isinstance(value, types.ModuleType):
                continue
            option = options.get(name)
            if option is not None and value is None and name in _TRAINING_ONLY_NONE and self._task() != "train":
                # i6's forward configs set it to None (zeyer's SharedPostConfig); RETURNN reads it only in training
                # (Engine.train_epoch: config.int(..., 1) gives None, which its training would fail on): unset here
                del self.namespace[name]
                continue
            if name == "accum_grad_multiple_step" and callable(value):
                # RETURNN calls it after each step for the window's size (Engine.train_epoch); the option here is
                # then 1 for what reads it as a number, and the windows are RETURNN's (RunState.at_update_boundary)
                self.accum_function = value
                self.namespace[name] = 1
                continue
            if option is not None:
                problem = option.check(value)
                if problem:
                    problems.append(problem + (f" (from ++{name})." if name in self.overrides else "."))
                    culprits.add(name)
                continue
            if name in returnn_options.FORK_ALIASES and value:
                target = returnn_options.FORK_ALIASES[name][0]
                problem = options.get(target).check(value)
                if problem:
                    problems.append(f"{name} (applied as {target}): {problem}.")
                    culprits.add(name)
                elif not self.has(target):
                    self.namespace[target] = value
                self.aliased.add(name)
                continue
            without_effect = returnn_options.without_effect(name, value, self.has)
            if without_effect is not None:
                self.without_effect[name] = without_effect
                continue
            used = _names_used_by(self) if used is None else used
            problem = None if name in used else _unknown_name_problem(name, value, returnn_style=self.has("backend"))
            if problem:
                problems.append(problem)
                culprits.add(name)
        if problems:
            in_files = self.files and not culprits <= set(self.overrides)
            where = (
                f" in {', '.join(self.files)}" if in_files else " (command-line overrides)" if self.overrides else ""
            )
            raise ConfigError(f"Invalid config{where}: " + " ".join(problems))


# Options RETURNN reads only when it trains, which i6's pipelines set to None in every config: outside training, None
# is the option unset.
_TRAINING_ONLY_NONE = ("accum_grad_multiple_step",)


def _names_used_by(config: Config) -> set[str]:
    """Every name and string the config's code reads: its files and the modules of the functions it holds."""
    paths = set(config.files)
    for value in config.namespace.values():
        module = sys.modules.get(getattr(value, "__module__", None) or "")
        path = getattr(module, "__file__", None)
        if path and (inspect.isfunction(value) or inspect.isclass(value)) and not _is_library(path):
            paths.add(path)
    used: set[str] = set()
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                used.add(node.value)
    return used


def _is_library(path: str) -> bool:
    """Installed packages, the standard library and the framework: none of them reads a config's globals."""
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the framework package
    path = os.path.abspath(path)
    return any(path.startswith(root + os.sep) for root in roots)


def _unknown_name_problem(name: str, value: Any, returnn_style: bool = False) -> str | None:
    """Why the unregistered global ``name`` looks like a misspelled, imagined or RETURNN-only option, or None.

    In a RETURNN config (it sets ``backend``) a name that is no near-miss of an option is the config's variable, as
    RETURNN takes it (configs keep hyperparameters as globals), whatever its prefix."""
    keep = "(If it is a helper of your own, rename it or prefix it with '_'.)"
    refused = returnn_options.refusal(name)
    if refused is not None:
        return f"{name!r} is {refused}. {keep}"
    guess = options.closest_name(name, cutoff=_TYPO_CUTOFF)
    if guess is not None:
        return f"{name!r} is not an option; did you mean {guess!r}? {keep}"
    family = next((prefix for prefix in OPTION_FAMILIES if name.startswith(prefix)), None)
    if family is None or returnn_style or inspect.isfunction(value) or inspect.isclass(value):
        return None
    close = options.closest_names(name, n=3, cutoff=0.5)
    hint = f"; the closest are {', '.join(map(repr, close))}" if close else ""
    return f"{name!r} is not an option, though its name looks like one ({family}...){hint}. See rnn.py --help-options. {keep}"


def _override_text(value: Any) -> str:
    """How to write ``value`` after ``++key`` so that it parses back to itself: a plain word where possible."""
    return value if isinstance(value, str) and parse_override_value(value) == value else repr(value)


def parse_override_value(text: str) -> Any:
    """An override's value: a Python literal if it parses as one, else the plain string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def parse_args(args: Iterable[str]) -> tuple[list[str], dict[str, Any]]:
    """Split ``config.py [more.py ...] [++key value ...]`` into files and overrides."""
    files: list[str] = []
    overrides: dict[str, Any] = {}
    args = list(args)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("++"):
            key = arg[2:]
            if not key.isidentifier():
                raise ConfigError(f"Override {arg!r}: {key!r} is not a valid option name.")
            if i + 1 >= len(args):
                raise ConfigError(f"Override {arg!r} has no value; write '{arg} VALUE' (a Python literal).")
            following = args[i + 1]
            if following.startswith("++") and following[2:].isidentifier():  # a string value would be quoted: "'++x'"
                raise ConfigError(
                    f"Override {arg!r} has no value: the argument after it, {following!r}, is the next override. "
                    f"Write '{arg} VALUE {following} ...' (VALUE a Python literal)."
                )
            overrides[key] = parse_override_value(args[i + 1])
            i += 2
        elif arg.startswith("-"):
            raise ConfigError(
                f"Unknown command-line flag {arg!r}. Usage: rnn.py config.py [more.py ...] [++key value ...], "
                f"or rnn.py --help-options."
            )
        else:
            files.append(arg)
            i += 1
    return files, overrides


def _exec_file(path: str, namespace: dict[str, Any]) -> None:
    if os.path.isdir(path):
        found = sorted(f for f in os.listdir(path) if f.endswith((".py", ".config")))
        hint = f" It holds {', '.join(found[:8])}." if found else ""
        raise ConfigError(f"Config file {path!r} is a directory; give the config file in it.{hint}")
    if not os.path.exists(path):
        raise ConfigError(f"Config file {path!r} does not exist (working directory: {os.getcwd()}).")
    with os.fdopen(open_for_reading(path, "a config file"), encoding="utf-8") as f:
        source = f.read()
    try:
        code = compile(source, path, "exec")
    except SyntaxError as exc:
        line = (exc.text or "").rstrip("\n")
        caret = " " * max((exc.offset or 1) - 1, 0) + "^"
        raise ConfigError(
            f"Syntax error in config file {path}, line {exc.lineno}: {exc.msg}\n    {line}\n    {caret}"
        ) from None
    namespace["__file__"] = os.path.abspath(path)
    namespace.setdefault("__name__", "__config__")
    _register_module(namespace)
    try:
        exec(code, namespace)
    except Exception as exc:
        # Show the user's frames only: the first entry is this function's exec call.
        details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next))
        raise ConfigError(
            f"Executing config file {path} raised {type(exc).__name__}: {exc}\n"
            f"Fix the config; the traceback inside it was:\n{details.rstrip()}"
        ) from None


class _ConfigModule(types.ModuleType):
    """The config as a module in ``sys.modules`` (RETURNN registers its config as ``__returnn_config__`` so): what code
    defined in the config looks up by its ``__module__`` (a ``@dataclass``, pickling a config's class) finds it."""

    def __init__(self, name: str, namespace: dict[str, Any]):
        super().__init__(name)
        self.__dict__["_namespace"] = namespace

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_namespace"][name]
        except KeyError:
            raise AttributeError(f"config module {self.__name__!r} has no attribute {name!r}") from None


def _register_module(namespace: dict[str, Any]) -> None:
    """Register the config's namespace under its ``__name__`` unless a module of that name exists."""
    name = namespace["__name__"]
    if name not in sys.modules:
        sys.modules[name] = _ConfigModule(name, namespace)


_loading: Config | None = None  # the config whose files are executing, for run_output_dir()
_loaded: Config | None = None  # the config of this process's run, for get_global_config()


def get_global_config() -> Config:
    """The config of the running ``rnn.py`` (RETURNN's ``returnn.config.get_global_config()``), e.g. for a
    ``dynamic_learning_rate`` function that reads its own settings: ``get_global_config().float("warmup", 1)``."""
    config = _loaded if _loaded is not None else _loading
    if config is None:
        raise ConfigError(
            "get_global_config() is for code that runs under rnn.py (or load_config); no config is loaded."
        )
    return config


def run_output_dir() -> str:
    """The directory for the outputs of the run whose config files are being loaded.

    ``++output_dir`` if given, else ``output/`` plus the names of all config files of the command
    joined by ``+``: ``rnn.py configs/vae_mnist.py`` writes to ``output/vae_mnist``, and
    ``rnn.py configs/vae_mnist.py configs/vae_bugs/device.py`` to ``output/vae_mnist+device``, so
    runs of different configs never share checkpoints or logs. ``++debug_*`` overrides are part of
    the name too (``output/vae_mnist+device+debug_overfit_batches=1``): a run that investigates
    with a flag neither finds the plain run complete nor mixes its files into it. Other overrides
    (``++num_epochs 20``) keep the name, so that a rerun trains further. In a config::

        output_dir = run_output_dir()
        model = output_dir + "/model"
    """
    if _loading is None:
        raise ConfigError("run_output_dir() is for config files, while rnn.py (or load_config) executes them.")
    if _loading.overrides.get("output_dir") is not None:
        return str(_loading.overrides["output_dir"])
    names = [os.path.splitext(os.path.basename(path))[0] for path in _loading.files]
    for key, value in _loading.overrides.items():
        if key.startswith("debug_"):
            names.append(re.sub(r"[^\w.,=-]+", "_", f"{key}={value}"))
    return os.path.join("output", "+".join(names))


def load_config(files: list[str], overrides: dict[str, Any] | None = None) -> Config:
    """Execute the config files in one namespace, apply overrides, validate."""
    global _loading, _loaded
    if not files:
        raise ConfigError("No config file given. Usage: rnn.py config.py [more.py ...] [++key value ...].")
    config = Config(overrides=overrides)
    config.files.extend(files)  # all of them: run_output_dir() names the run by every file
    returnn_config.install(config)  # for a config's `from returnn.config import get_global_config`
    _loading = config
    try:
        for path in files:
            _exec_file(path, config.namespace)
    finally:
        _loading = None
    import_plugin_modules(config)  # their options are known before the overrides are checked
    for key, value in config.overrides.items():
        known = options.get(key) is not None or returnn_options.without_effect(key, value) is not None
        if not known and key not in config.namespace:
            refused = returnn_options.refusal(key)
            if refused is not None:
                raise ConfigError(f"Override ++{key}: {refused}.")
            guess = options.closest_name(key, cutoff=0.6)
            hint = f" Did you mean {guess!r}?" if guess else ""
            if not config.get("plugins"):  # a plugin's options are registered when its module is imported
                hint += " An option of a plugin of your own exists once the config's plugins = [...] loads it."
            raise ConfigError(
                f"Override ++{key}: {key!r} is neither a registered option nor a variable of the config.{hint} "
                f"See rnn.py --help-options."
            )
        if not known:
            _check_override_kind(key, config.namespace[key], value)
        config.namespace[key] = value
    config.validate()
    _loaded = config
    return config


def _check_override_kind(key: str, old: Any, new: Any) -> None:
    """A number where the config has a string, or the reverse, is a quoting slip: name the override.

    Otherwise the error surfaces later, deep in the config's code that uses the variable, and
    blames the config file for what the command line did.
    """
    kinds = [("number" if isinstance(v, (int, float)) else "str" if isinstance(v, str) else None) for v in (old, new)]
    if None in kinds or kinds[0] == kinds[1]:
        return
    fix = f"++{key} {old!r}" if kinds[0] == "number" else f'++{key} "{old!r}"'
    raise ConfigError(
        f"Override ++{key} {_override_text(new)} gives a {kinds[1]}, but the config sets {key} = {old!r}, a "
        f"{kinds[0]}. Override values are Python literals: numbers bare, strings quoted inside the shell's "
        f"quotes, e.g. {fix}."
    )


def import_plugin_modules(config: Config) -> list[tuple[str | type, types.ModuleType | None]]:
    """Import the modules the config's ``plugins`` names (importing one registers its options).

    Returns each entry with its module (None for an entry that is a class); a module without ``PLUGINS`` is a
    config error found here, before anything is loaded. The plugin seam (``framework.core.run_plugins``) checks
    the classes.
    """
    found = []
    for entry in config.get("plugins") or []:  # an override wins over the files, as for any option
        if isinstance(entry, type):
            found.append((entry, None))
            continue
        if not isinstance(entry, str):
            raise ConfigError(f"plugins: {entry!r} is neither a module name nor a Plugin subclass.")
        try:
            module = importlib.import_module(entry)
        except ImportError as exc:
            raise ConfigError(
                f"plugins: cannot import {entry!r}: {exc}. Is its directory on the Python path? rnn.py does not "
                "search the config's directory: set PYTHONPATH, or add it in the config (sys.path.insert(0, "
                "os.path.dirname(__file__))); see docs/writing_a_diagnostic.rst."
            ) from None
        if not getattr(module, "PLUGINS", None):
            raise ConfigError(f"plugins: module {entry!r} has no PLUGINS = (MyPlugin, ...) listing its plugin classes.")
        found.append((entry, module))
    return found
