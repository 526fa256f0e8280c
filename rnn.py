#!/usr/bin/env python3
"""Run a RETURNN-style config: ``python rnn.py config.py [more.py ...] [++option value ...]``.

The same as the installed ``rnn`` command (``framework.commands.rnn``) and ``python -m framework``.
Under ``python -m pdb`` or ``ipython --pdb`` the debugger opens where the exception was raised; the
exception's note says how many ``up`` steps reach your own code.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from framework.commands import rnn  # noqa: E402

if __name__ == "__main__":
    sys.exit(rnn())
