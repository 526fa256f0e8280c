"""Shared helpers: running rnn.py as a real subprocess, and the tiny test config."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_CONFIG = os.path.join(ROOT, "tests", "data", "tiny_config.py")
sys.path.insert(0, ROOT)


def run_rnn(*args: str, cwd: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python rnn.py ARGS`` and capture its output."""
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "rnn.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


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
