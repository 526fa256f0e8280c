"""``report_html``: the run writes its own ``report.html`` (``python -m framework report``) beside its checkpoints.

At each epoch's end, after the metrics are written, the page is rendered by a separate process at low
priority, so the training loop never waits for it (one at a time: an epoch that ends while the previous
page is still being drawn skips its own). At the run's end, however it ends, a page still being drawn is
stopped and the final one is drawn, with how the run ended and the finding of its failure: the run waits
for it (at most ``WAIT_SECONDS``), except after an interruption (Ctrl-C, a signal), where it is left to
finish on its own so that the run exits at once. The page is written atomically (temporary file, then
rename). Rank 0 of a training run writes it.
"""

from __future__ import annotations

import os
import subprocess
import time

from framework.base import log
from framework.base.config import Config
from framework.base.disk import beside_checkpoints
from framework.base.options import register
from framework.base.util import start_framework_process
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "report_html",
    "bool",
    True,
    "Write <model directory>/report.html (the page of 'python -m framework report') at each epoch's end, in a "
    "background process, and at the run's end, however it ends.",
    __name__,
)

PAGE_NAME = "report.html"
# Between two pages drawn during the run: drawing one costs seconds of CPU (a Python process importing the
# framework), which short epochs on few cores would feel; the final page is drawn however soon.
REFRESH_SECONDS = 60.0
WAIT_SECONDS = 120.0  # the final page of a run that is still drawn after this is left to finish on its own
_NICENESS = 19  # where SCHED_IDLE is refused: the lowest priority there is


class RunPage(Plugin):
    """Renders ``report.html`` in a separate process at each epoch's end and at the end of the run."""

    after = ("RunMetrics",)  # the page draws what RunMetrics has just written

    def __init__(self, directory: str):
        self.directory = directory
        self.process: subprocess.Popen | None = None
        self.started = -REFRESH_SECONDS  # time.monotonic() when the latest page was started
        self.said_failure = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> RunPage | None:
        prefix = config.get("model")
        writes = state.distributed is None or state.distributed.rank == 0
        if not config.bool("report_html") or not prefix or not writes or state.task != "train":
            return None
        return cls(os.path.dirname(beside_checkpoints(prefix, PAGE_NAME)))

    @on(Event.EPOCH_END)
    def on_epoch_end(self, state: RunState) -> None:
        """Draw the page of the run so far, unless the previous epoch's is still being drawn or was started less
        than ``REFRESH_SECONDS`` ago."""
        if self.process is not None and self.process.poll() is None:
            return
        if time.monotonic() - self.started < REFRESH_SECONDS:
            return
        self._say_failure()
        self.process = self._start()

    @on(Event.CLOSE)
    def close(self, state: RunState) -> None:
        """Draw the final page: the run waits for it, unless it was interrupted."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # drawing the page of an earlier epoch, which the final one replaces
            self.process.wait()
        if not os.path.isdir(self.directory):  # removed while the run went on: a page would create it again
            return
        self.process = self._start()
        if state.outcome == "interrupted":
            log.v4(
                f"The page {os.path.join(self.directory, PAGE_NAME)} is being written by process {self.process.pid}."
            )
            return
        try:
            self.process.wait(timeout=WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            log.v3(
                f"The page {os.path.join(self.directory, PAGE_NAME)} is still being written after {WAIT_SECONDS:.0f} "
                f"s (process {self.process.pid}); it finishes on its own."
            )
            return
        self._say_failure()

    def _start(self) -> subprocess.Popen:
        self.started = time.monotonic()
        process = start_framework_process(
            "framework",
            "report",
            self.directory,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C in the terminal stops the run, not the page it leaves behind
        )
        # The page is drawn beside training and must take only the cores training leaves idle: at a mere lower
        # priority it still preempts the threads of torch's parallel ops, which then wait for each other at every
        # op (measured: a small model's epoch on 2 cores 13x slower at niceness 10 than without the page).
        try:
            os.sched_setscheduler(process.pid, os.SCHED_IDLE, os.sched_param(0))
        except (OSError, AttributeError):  # it ended already, or no SCHED_IDLE here (not Linux)
            try:
                os.setpriority(os.PRIO_PROCESS, process.pid, _NICENESS)
            except OSError:  # the system refuses: the page is drawn at the run's priority
                pass
        return process

    def _say_failure(self) -> None:
        """Once per run: why the page could not be written (a damaged record file, a full disk)."""
        process = self.process
        if process is None or process.returncode in (None, 0) or self.said_failure:
            return
        self.said_failure = True
        message = process.stderr.read().decode("utf-8", "replace").strip() if process.stderr else ""
        log.v2(f"report.html was not written (exit status {process.returncode}): {message}")


PLUGINS = (RunPage,)
