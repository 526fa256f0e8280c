"""Shared helpers: running rnn.py and the tools as child processes (tools/devkit/preloaded.py), the tiny test
config, and capturing the framework's log of an in-process run."""

from __future__ import annotations

import compileall
import contextlib
import gc
import logging
import os
import sys
from collections.abc import Iterator

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_CONFIG = os.path.join(ROOT, "tests", "data", "tiny_config.py")
sys.path[:0] = [ROOT, os.path.join(ROOT, "tools")]  # the development harness lives in tools/devkit

from devkit.preloaded import (  # noqa: E402, F401  (the tests import them from here)
    StartedRun,
    run_module,
    run_rnn,
    run_script,
    run_torchrun,
    start_rnn,
    start_script,
    start_torchrun,
)

from framework.base import log  # noqa: E402


@contextlib.contextmanager
def captured_log(verbosity: int, stdout: bool = True) -> Iterator[list[str]]:
    """The framework's log at ``verbosity``; within the block, its messages are appended to the yielded list."""
    log.setup(verbosity=verbosity, stdout=stdout)
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    log.logger.addHandler(handler)
    try:
        yield lines
    finally:
        log.logger.removeHandler(handler)


def zoo_log(*zoo_files: str, **overrides) -> str:
    """The log (verbosity 4) of an in-process training of the configs ``zoo_files`` of tests/zoo, loaded in that
    order, with ``overrides`` and no checkpoints."""
    from framework.assembly import Engine
    from framework.base.config import load_config

    with captured_log(4) as lines:
        files = [os.path.join(ROOT, "tests", "zoo", f) for f in zoo_files]
        Engine(load_config(files, {"model": None, **overrides})).run("train")
    return "\n".join(lines)


@pytest.fixture
def output():
    """Log at verbosity 4; return a function that gives (and forgets) what was logged so far."""
    with captured_log(4) as lines:

        def take():
            text = "\n".join(lines)
            lines.clear()
            return text

        yield take


@pytest.fixture(scope="session", autouse=True)
def one_thread() -> Iterator[None]:
    """One intra-op torch thread for the tests' in-process runs, as rnn.py picks on a busy machine: on shared
    cores (the suite runs a worker per core) a second thread spin-waits, which cost several times the CPU."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def no_page_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-process training run with a model path draws no report.html unless its config sets ``report_html``,
    as run_rnn's runs (devkit/preloaded.py's ``without_page``): the page is a separate process of about 2 s of CPU
    at the run's end, at idle priority, which the run waits for, seconds of a busy worker's time for a tiny run. The
    page's own tests set ``report_html`` (tests/test_run_page.py, tests/test_run_record.py)."""
    from framework.debug.run_page import RunPage

    drawn = RunPage.from_config.__func__

    def from_config(cls, config, state):
        return drawn(cls, config, state) if config.has("report_html") else None

    monkeypatch.setattr(RunPage, "from_config", classmethod(from_config))


@pytest.fixture
def tiny_config() -> str:
    """Path of the tiny training config."""
    return TINY_CONFIG


# A train_step that raises in user code, with a local variable to find in the debugger.
FAILING_TRAIN_STEP = (
    "\ndef train_step(*, model, extern_data, run_ctx, **_kwargs):\n"
    "    secret_local = 'found-me'\n"
    "    raise RuntimeError('boom in user code: ' + secret_local)\n"
)


def tiny_config_with(directory, extra: str) -> str:
    """The tiny config with ``extra`` appended (a later definition replaces the tiny config's)."""
    with open(TINY_CONFIG, encoding="utf-8") as f:
        return write_config(directory, f.read() + extra)


def write_config(directory, text: str, name: str = "config.py") -> str:
    """Write a config file; return its path."""
    path = os.path.join(str(directory), name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


# tests/corpus holds the corpus's configs (run by test_corpus.py), not test modules; three are named like tests
# (test_*.py, *_test.py), and collecting them ran each config (building its dataset) in every worker: ~4 s of CPU each.
collect_ignore_glob = ["corpus/*"]


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> object:
    """pytest keeps each test module with its asserts rewritten (tests/__pycache__/*-pytest-*.pyc, ignored by git) only
    where bytecode may be written: where ``PYTHONDONTWRITEBYTECODE`` is set, every worker rewrote all test modules at
    every run, ~7 s of CPU each. Collection writes them whatever that variable says (as pytest_configure compiles the
    framework); the runs the tests start see the variable as it was.

    Collection imports torch, transformers and the test modules (300,000 to 500,000 objects) with the garbage collector
    off: its full collections there, over objects that stay, cost about 1.3 s of CPU per worker. Then every object
    there is gets frozen (``gc.freeze``), as the preloaded server freezes what it imported: the in-process runs' full
    collections and the scans of every live object that checks make (live ReduceLROnPlateau schedulers, live
    tensors: ``gc.get_objects`` leaves frozen objects out) skip them. What a test or a run creates is collected and
    scanned as before. Measured (-n 0, test_split_pairing and test_plugin_state selected from a full collection;
    thread CPU inside the collector's callbacks and the scheduler scans): collections 2.4 s and scans 1.3 s before,
    0.8 s and 0.3 s after, besides the 1.3 s at collection."""
    writes = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    collecting = gc.isenabled()
    gc.disable()
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = writes
        if collecting:
            if len(session.items) > 100 and "torch" in sys.modules:
                # torch._dynamo (~120,000 objects), which the first optimizer of an in-process run imports, frozen
                # too: a session of this many tests makes such a run anyway
                import torch._dynamo  # noqa: F401
            gc.freeze()
            gc.enable()


def pytest_configure(config: pytest.Config) -> None:
    """The framework's and tools' bytecode, compiled once into their ``__pycache__`` directories (ignored by git):
    where ``PYTHONDONTWRITEBYTECODE`` is set, every fresh interpreter the suite starts (about 150: CLI runs,
    torchrun ranks, tools, TensorBoard writers) would compile them from source again, ~0.35 s each. Python reads
    bytecode it finds, whatever that variable says."""
    if not hasattr(config, "workerinput"):  # once, in pytest-xdist's controller (or the only process)
        for directory in ("framework", "tools"):
            compileall.compile_dir(os.path.join(ROOT, directory), quiet=1)
        # One intra-op thread for every run the suite starts (the workers and all their runs inherit it): the
        # suite already runs a worker per core, where the default ('auto') samples the cores' load for 0.1 s at
        # each run's start and may still pick a second thread that spin-waits. Tests of 'auto' set their own.
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        # pytest-xdist (3.x) hands out the files of ``--dist loadfile`` largest-count-first unless told not to: the
        # files with a single test of minutes (the docs' commands) or a few long ones would then start last and
        # leave the other worker idle at the end. In collection order instead, the files with slow tests come first
        # (pytest_collection_modifyitems below) and the short ones fill the end.
        if hasattr(config.option, "loadscopereorder"):
            config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slow tests first: run in parallel (pytest-xdist), the longest ones must not start last. The whole
    corpus of issue 49 (marker ``corpus``, minutes of runs) is left out unless the mark expression names it
    (``pytest -m corpus``)."""
    if "corpus" not in (config.getoption("markexpr") or ""):
        corpus = [item for item in items if item.get_closest_marker("corpus") is not None]
        if corpus:
            config.hook.pytest_deselected(items=corpus)
            items[:] = [item for item in items if item.get_closest_marker("corpus") is None]
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _tree_cpu_seconds() -> float:
    """CPU seconds of this process, its waited-for children and every live descendant (with theirs): the forked runs
    are children of the forkserver, a live child of this process, whose ``cutime`` holds them once they end. What a
    grandchild's parent never waited for is lost: tools/check-docs.py's own forkserver and its runs (measure the docs'
    commands apart, under a child subreaper)."""
    import resource

    total = sum(
        getattr(resource.getrusage(who), field)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for field in ("ru_utime", "ru_stime")
    )
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(name)] = int(fields[1])
        times[int(name)] = sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
    mine = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return total + sum(times[pid] for pid in mine if pid != os.getpid())


# FRAMEWORK_TEST_CPU_LOG=FILE: each test appends 'CPU seconds<TAB>wall seconds<TAB>node id' to FILE (its worker's and
# its runs' CPU: what a suite on 2 idle cores would take, measured on a busy machine); nothing is measured without it.
if os.environ.get("FRAMEWORK_TEST_CPU_LOG"):

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
        import time

        cpu, wall = _tree_cpu_seconds(), time.monotonic()
        try:
            return (yield)
        finally:
            with open(os.environ["FRAMEWORK_TEST_CPU_LOG"], "a", encoding="utf-8") as f:
                f.write(f"{_tree_cpu_seconds() - cpu:.2f}\t{time.monotonic() - wall:.2f}\t{item.nodeid}\n")
