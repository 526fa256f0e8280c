"""``python -m framework config.py ...`` runs a config as ``rnn.py`` does; ``python -m framework NAME ...`` runs a tool.

Tools that train in child processes start this file as a script (``framework.commands.RNN_SCRIPT``).
"""

import os
import sys

if not __package__:  # started as a file: import the package, not the modules beside this file (cli, images, ...)
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from framework.commands import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
