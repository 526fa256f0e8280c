#!/usr/bin/env python3
"""Run a RETURNN-style config: ``python rnn.py config.py [more.py ...] [++option value ...]``.

Also ``ipython --pdb rnn.py config.py`` to land in the failing frame on an exception.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from framework.cli import main  # noqa: E402

if __name__ == "__main__":
    if "TORCHELASTIC_RUN_ID" in os.environ:  # under torchrun: its failure summary shows this rank's traceback
        from torch.distributed.elastic.multiprocessing.errors import record

        main = record(main)
    sys.exit(main(sys.argv[1:]))
