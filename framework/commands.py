"""The installed commands: ``rnn`` (what ``python rnn.py`` runs) and ``framework-NAME`` for each tool.

``pip install`` puts them on PATH (setup.py's console scripts); ``python -m framework`` runs the
same without PATH: ``python -m framework config.py ...`` is ``rnn``, ``python -m framework NAME
...`` is the tool. A tool's code is the checkout's ``tools/NAME.py``, which setup.py ships as the
``framework_tools`` package (the users' tools of ``TOOLS`` only), so ``python tools/NAME.py`` and ``framework-NAME`` run the same file.
Nothing here imports torch: ``--help`` answers at once.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys

# Tools that work on your config, checkpoints and data: a console command each.
TOOLS = {
    "dump-dataset": "what a config's dataset delivers: keys, shapes, dtypes, labels, lengths",
    "inspect-checkpoint": "what a checkpoint holds: metadata, every tensor's shape and statistics, NaN/Inf",
    "dump-forward-stats": "per-module activation statistics of the model over a dataset",
    "replay-step": "replay a training step that stopped on NaN/Inf, every numerics check on",
    "check-determinism": "run K steps twice from the same seed and name the first thing that differs",
    "check-resume": "stop a run with real signals, resume it, and check it ends bit for bit the same",
    "import-torch-model": "import another PyTorch implementation's parameters into a checkpoint",
    "compare-models": "run two implementations on one batch and name the first module that disagrees",
    "report": "write MODEL_DIR/report.html: curves, findings, options and attention of a run, on one page",
}
# The project's own measurements and maintenance: they read the checkout (its configs, docs, harness).
PROJECT_TOOLS = {
    "benchmark-step": "the training step against a hand-written PyTorch loop",
    "benchmark-debug": "the cost of each diagnostic",
    "benchmark-data": "startup time and memory over many variable-length sequences",
    "compare-with-returnn": "the RETURNN demo trained here and with RETURNN itself (extra: returnn)",
    "checkpoint-bitflips": "flip bits in a checkpoint: is every damaged copy refused or harmless?",
    "check-elastic": "SIGKILL ranks of elastic torchrun jobs: does every job resume and end bit for bit the same?",
    "check-docs": "run every command of README.rst and docs/ and check what they quote",
    "check-accelerator": "the accelerator checks of the test suite on a device: emulated, or a real one (cuda)",
    "generate-options-doc": "write docs/options.rst from the option registry",
    "extract-returnn-options": "write framework/base/returnn_keys.py: every config key the installed RETURNN reads",
    "measure-returnn-configs": "do the collected RETURNN configs (tests/returnn/configs) start and train here?",
    "measure-corpus": "the real silent bugs and healthy setups of tests/corpus: named, hinted, wrong, silent, false alarms",
}
# Started as a script by tools that run training in child processes (``python <this file> config.py``).
RNN_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")

USAGE = """usage: python -m framework config.py [more.py ...] [++option value ...]   (the same as rnn / rnn.py)
       python -m framework NAME [args]                                       (a tool; NAME --help for its usage)

Tools, installed as framework-NAME:
{tools}

The project's own, in a checkout of the repository (python tools/NAME.py there):
{project}"""


def rnn() -> int:
    """The ``rnn`` command: ``rnn config.py [more.py ...] [++option value ...]``, as ``python rnn.py``."""
    from framework.cli import main

    if "TORCHELASTIC_RUN_ID" in os.environ:  # under torchrun: its failure summary shows this rank's traceback
        from torch.distributed.elastic.multiprocessing.errors import record

        main = record(main)
    return main(sys.argv[1:])


def tool() -> int:
    """A ``framework-NAME`` command: the tool named by the command it was started as."""
    name = os.path.splitext(os.path.basename(sys.argv[0]))[0].removeprefix("framework-")
    return run_tool(name, sys.argv[1:], f"framework-{name}")


def main(argv: list[str]) -> int:
    """``python -m framework``: a tool when the first argument names one, else ``rnn``."""
    if argv and (argv[0] in TOOLS or argv[0] in PROJECT_TOOLS):
        return run_tool(argv[0], argv[1:], f"python -m framework {argv[0]}")
    if argv and argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if not argv:
        print(_usage(), file=sys.stderr)
        return 2
    sys.argv = [sys.argv[0], *argv]
    return rnn()


def run_tool(name: str, argv: list[str], prog: str) -> int:
    """Run tool ``name`` as its script runs, with ``argv`` and ``prog`` as the program name in its usage."""
    path = _tool_path(name)
    checkout = os.path.isdir(os.path.join(os.path.dirname(path), "devkit"))  # the harness ships with no package
    if name in PROJECT_TOOLS and not checkout:
        print(f"{prog} reads a checkout of the repository: run python tools/{name}.py in a clone.", file=sys.stderr)
        return 2
    if not os.path.isfile(path):
        print(f"{prog}: {path} does not exist: reinstall the framework (pip install .).", file=sys.stderr)
        return 2
    from framework.tool_args import started_as

    started_as(prog)
    sys.argv = [path, *argv]
    runpy.run_path(path, run_name="__main__")  # a tool ends with sys.exit(status); SystemExit passes through
    return 0


def _usage() -> str:
    def listing(tools: dict[str, str]) -> str:
        return "\n".join(f"  {name:<21} {doc}" for name, doc in tools.items())

    return USAGE.format(tools=listing(TOOLS), project=listing(PROJECT_TOOLS))


def _tool_path(name: str) -> str:
    """``tools/NAME.py``: in the installed ``framework_tools`` package, or beside the package in a checkout."""
    spec = importlib.util.find_spec("framework_tools")
    if spec is not None and spec.submodule_search_locations:
        return os.path.join(list(spec.submodule_search_locations)[0], f"{name}.py")
    checkout = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
    return os.path.join(checkout, f"{name}.py")
