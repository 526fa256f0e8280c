"""Imported by the server that forks the test suite's runs (``preloaded.PRELOAD``): what every run would otherwise
redo in its own child, done once. A run reads the options its plugins declare (parsed from the plugin modules'
source, about 0.1 s) and imports the built-in plugin modules (compiled from source again in each child where
``PYTHONDONTWRITEBYTECODE`` is set); a forked child starts with both done. Then every object there is gets frozen
(``gc.freeze``): the children's garbage collections (one at every run's exit: ``framework.base.quick_exit``) skip the
millions of objects torch is made of."""

import gc

from framework.assembly import plugin_classes
from framework.base import options

options.all_options()
plugin_classes()
gc.freeze()
