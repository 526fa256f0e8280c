"""The commands of the walkthrough pages (docs/health.rst, docs/walkthrough_vae.rst and the pages between and after
them that tests/test_doc_commands.py leaves to this file) run as written, in order, in a fresh copy of their own, and
print what the pages quote. A file of its own so that the two halves of the docs' commands (each a minute or more of
runs) go to the two workers of the suite instead of one."""

import pytest
from test_doc_commands import WALKTHROUGHS, check_pages


@pytest.mark.slow
def test_every_command_of_the_walkthroughs_runs_and_prints_what_the_docs_quote():
    run, quotes = check_pages(WALKTHROUGHS)
    assert run >= 10 and quotes >= 8
