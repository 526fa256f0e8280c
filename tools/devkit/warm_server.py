"""Imported by the server that forks the test suite's runs (``preloaded.PRELOAD``): what every run would otherwise
redo in its own child, done once. A run reads the options its plugins declare (parsed from the plugin modules'
source, about 0.1 s) and imports the built-in plugin modules (compiled from source again in each child where
``PYTHONDONTWRITEBYTECODE`` is set); a forked child starts with both done. Then every object there is gets frozen
(``gc.freeze``): the children's garbage collections (one at every run's exit: ``framework.base.quick_exit``) skip the
millions of objects torch is made of."""

import gc
import os
import sys

from framework.assembly import plugin_classes
from framework.base import options

# The server's own sys.path less its first entry (the server runs as ``python -c``) and its PYTHONPATH's entries
# (tools/, devkit's home): what a fresh ``python SCRIPT`` has after the script's directory and its own PYTHONPATH
# (devkit/preloaded.py's _as_a_fresh_interpreter puts it back in each run; the forked child starts with the test
# process's sys.path, which multiprocessing hands over).
_pythonpath = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
FRESH_SYS_PATH = [entry for entry in sys.path[1:] if entry not in _pythonpath]

options.all_options()
plugin_classes()
gc.freeze()
