"""A command's process ends without Python's garbage collections over every object at teardown.

After the last atexit handler, Python tears the interpreter down: it clears every module and runs its
cyclic garbage collector over all objects, more than once. With torch imported those are millions of objects:
1 to 3 seconds of CPU after the run has printed its summary, while a shell, a script or a scheduler waits. At
exit, ``collect_once_then_freeze`` collects the garbage there is, so its finalizers run as they would have,
and then freezes every object (``gc.freeze``): the collections at teardown skip them, and the memory goes
back to the system with the process.
"""

from __future__ import annotations

import atexit
import gc

_registered = False


def collect_once_then_freeze() -> None:
    """Arrange, once per process, for one collection and a freeze after the atexit handlers registered later
    (they run in reverse order of registration): call it where a command starts."""
    global _registered
    if not _registered:
        _registered = True
        atexit.register(_collect_and_freeze)


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()
