"""What the processes of a run that did not end were doing, for the error of a test that timed out.

A run that hangs in CI is seen once and gone: the report must say where each of its processes stood. The
stacks come from gdb attached to each process, which reads the Python frames of every thread from the
interpreter's own structures (CPython 3.11's layout) without needing the GIL: the one thread that could
print them may be the one that is stuck. Without gdb, or where it cannot attach, each process gets its state and
kernel wait channel only.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile

import psutil

_HARNESS = os.path.join("tools", "devkit", "preloaded.py")
# Every thread of the interpreter, innermost frame first: file, line, function.
_PYTHON_FRAMES = """
set $ts = _PyRuntime.interpreters.head->threads.head
while $ts
  printf "  thread %lu\\n", $ts->thread_id
  set $f = $ts->cframe->current_frame
  while $f
    printf "    %s:%d in %s\\n", PyUnicode_AsUTF8($f->f_code->co_filename), _PyInterpreterFrame_GetLine($f), PyUnicode_AsUTF8($f->f_code->co_name)
    set $f = $f->previous
  end
  set $ts = $ts->next
end
"""


def process_tree(pid: int) -> list[psutil.Process]:
    """The process ``pid`` and its descendants (torchrun's workers start sessions of their own but stay its
    children); empty if it is gone."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def describe(processes: list[psutil.Process], timeout: float = 20) -> str:
    """One block per process: pid, name, state, what the kernel says it waits in, and its Python stacks."""
    gdb = shutil.which("gdb")
    blocks = []
    with tempfile.NamedTemporaryFile("w", suffix=".gdb") as script:
        script.write(_PYTHON_FRAMES)
        script.flush()
        for process in processes:
            try:
                with open(f"/proc/{process.pid}/wchan", encoding="utf-8") as f:
                    wchan = f.read()
                head = f"process {process.pid} ({process.name()}), {process.status()}, waiting in {wchan or '-'}"
            except (psutil.NoSuchProcess, OSError):
                continue
            stacks = _python_stacks(gdb, process.pid, script.name, timeout) if gdb else "  (no gdb: no stacks)"
            blocks.append(f"{head}\n{stacks}")
    return "\n".join(blocks)


def _python_stacks(gdb: str, pid: int, script: str, timeout: float) -> str:
    try:
        result = subprocess.run(
            # Python's symbols only (not torch's libraries): 0.5 s a process instead of 5.
            [gdb, "-p", str(pid), "-batch", "-nx", "-iex", "set auto-solib-add off", "-ex", "sharedlibrary libpython"]
            + ["-x", script],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return "  (gdb took too long)"
    lines, harness = [], False
    for line in result.stdout.splitlines():
        if line.startswith("  thread"):
            harness = False
        elif _HARNESS in line:  # the frames that forked the run, outside it
            harness = True
        if line.startswith("  ") and not harness:
            lines.append(line)
    return (
        "\n".join(lines) or "  (gdb read no Python frames: " + (result.stderr.strip().splitlines() or ["?"])[-1] + ")"
    )


def kill(processes: list[psutil.Process]) -> None:
    """SIGKILL every process of the list that is still there, the last first: torchrun's workers before the launcher,
    whose death would send them SIGINT (torch.multiprocessing's parent-death signal), adding to their output."""
    for process in reversed(processes):
        try:
            os.kill(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
