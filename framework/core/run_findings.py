"""What a run found: every finding of the run, kept for the checks that read them, in ``findings.jsonl``, and
judged against ``findings_fail_level``.

While a task runs, this is a sink of ``framework.base.findings`` and the clock that stamps findings with
the epoch and global step (0 before the first epoch and step). Each finding is appended to ``state.control.findings`` (the verdict runs
and the sanity check's summary read them) and, in the process that writes checkpoints, written to
``<model directory>/findings.jsonl`` as one JSON object per line at once, so a run killed a moment later
keeps it; a resumed run appends to the same file (``framework.base.record_file``: a line a dead run cut short is set
aside first, and a failed write leaves no partial line). The file is opened without following a planted link
(a link there stops the run at its first finding),
at the first finding, or at the end of a run that did its work and found nothing, so that an empty file
says "nothing found"; a run that refused to start or failed before finding anything leaves no file.
"""

from __future__ import annotations

import datetime
import os

from framework.base import findings, log
from framework.base.config import Config
from framework.base.disk import beside_checkpoints, describe_os_error
from framework.base.errors import PlantedLinkError, WriteError
from framework.base.findings import SEVERITIES, Finding, standing
from framework.base.record_file import RecordFile
from framework.base.safe_create import refuse_unless_regular
from framework.core.state import RunState

FILE_NAME = "findings.jsonl"
# rnn.py's exit status when the run did its work but reported a finding at findings_fail_level or above.
FINDINGS_EXIT_STATUS = 3


class RunFindings:
    """The findings of one task run (train, eval or forward); ``start`` before it, ``stop`` after it."""

    def __init__(self, config: Config, state: RunState, writes_files: bool):
        self.config = config
        self.state = state
        self.writes_files = writes_files  # False: this process writes no findings file (a rank other than 0)
        self.fail_level = config.get("findings_fail_level")
        self._file: RecordFile | None = None
        self._unwritable = False

    @property
    def path(self) -> str | None:
        """``findings.jsonl`` beside the checkpoints; None without checkpoints (no 'model', a verdict run, not
        rank 0). Read when needed: a plugin's mode may set 'model' after the run started."""
        prefix = self.config.get("model")
        return beside_checkpoints(prefix, FILE_NAME) if prefix and self.writes_files else None

    @property
    def found(self) -> list[Finding]:
        return self.state.control.findings

    def start(self) -> None:
        """Take the findings reported from now on; a link or a special file (FIFO, socket) where the file will be is
        refused now (it is opened at the first finding, or at the end: a healthy run would find out only then)."""
        path = self.path
        if path is not None and os.path.lexists(path):
            refuse_unless_regular(path, "the findings file", os.lstat(path))
        findings.add_sink(self.take)
        findings.set_clock(self._now)

    def stop(self, did_its_work: bool) -> None:
        """Stop taking findings. After a run that ``did_its_work`` the file exists from here on (empty when
        nothing was found); after one that failed it exists only if something was found."""
        findings.remove_sink(self.take)
        findings.set_clock(None)
        if did_its_work and self._file is None and self.path is not None and os.path.isdir(os.path.dirname(self.path)):
            try:
                self._open()
            except PlantedLinkError as exc:  # the run is over: nothing was written through it, the log says so
                log.v1(str(exc))
        if self._file is not None:
            self._file.close()
            self._file = None

    def _now(self) -> tuple[int | None, int | None]:
        return self.state.epoch, self.state.global_step

    def take(self, finding: Finding) -> None:
        """The sink: keep ``finding`` and append it to the file."""
        self.found.append(finding)
        if self.path is None or (self._file is None and not self._open()):
            return
        time = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        try:
            self._file.append([finding.as_json(time=time)])  # on disk for any reader at once
        except WriteError as exc:
            self._give_up(str(exc))

    def _open(self) -> bool:
        if self._unwritable:
            return False
        file = RecordFile(self.path, "the findings file", "The findings are still logged. This is said once.")
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            file.open()
        except OSError as exc:  # the directory cannot be made
            self._give_up(
                f"The findings file {self.path} cannot be written ({describe_os_error(exc)}). The findings are still "
                f"logged. This is said once."
            )
            return False
        except WriteError as exc:
            self._give_up(str(exc))
            return False
        self._file = file
        return True

    def _give_up(self, why: str) -> None:
        """A findings file that cannot be written (full disk): said once; the log still has every finding."""
        self._unwritable = True
        if self._file is not None:
            self._file.close()
            self._file = None
        log.v2(why)

    def counts(self) -> dict[str, int]:
        """How many standing findings (not withdrawn) of each severity, most severe first."""
        kept = standing(self.found)
        return {s: n for s in reversed(SEVERITIES) if (n := sum(f.severity == s for f in kept))}

    def failing(self) -> list[Finding]:
        """The standing findings (not withdrawn) at ``findings_fail_level`` or above (none when it is off)."""
        if self.fail_level is None:
            return []
        level = SEVERITIES.index(self.fail_level)
        return [f for f in standing(self.found) if SEVERITIES.index(f.severity) >= level]
