"""The option registry: consistency, help output, generated docs."""

import os

import pytest

from conftest import ROOT, run_rnn
from framework.base import options, returnn_options
from framework.base.options_doc import format_returnn_rst, format_rst


def test_every_option_is_documented_and_its_default_fits_its_type():
    for option in options.all_options():
        assert option.doc.strip(), option.name
        assert option.check(option.default) is None, option.name


def test_type_checks_reject_wrong_values_with_a_clear_sentence():
    problem = options.get("batch_size").check("64")
    assert "batch_size" in problem and "int" in problem and "'64'" in problem
    assert options.get("batch_size").check(True) is not None  # a bool is no int
    assert options.get("learning_rate").check(1) is None  # an int is a fine float
    assert options.get("log").check(["a.log", "b.log"]) is None
    assert options.get("log").check(["a.log", 3]) is not None
    assert "must be one of" in options.get("task").check("trian")


def test_closest_name_suggests_a_typo_fix():
    assert options.closest_name("learning_rate_contrl") == "learning_rate_control"
    assert options.closest_name("accum_grad_multiple_steps") == "accum_grad_multiple_step"
    assert options.closest_name("hidden_dim") is None


def test_registering_a_name_twice_fails():
    with pytest.raises(ValueError, match="twice"):
        options.register("task", "str", "train", "again", "test")


def test_docs_options_reference_is_generated_from_the_registry():
    with open(os.path.join(ROOT, "docs", "options.rst"), encoding="utf-8") as f:
        on_disk = f.read()
    assert on_disk == format_rst(), "docs/options.rst is stale: run python tools/generate-options-doc.py"
    with open(os.path.join(ROOT, "docs", "returnn_options.inc"), encoding="utf-8") as f:
        assert f.read() == format_returnn_rst(), "docs/returnn_options.inc is stale: run tools/generate-options-doc.py"


def test_every_returnn_option_is_honoured_refused_or_without_effect_never_two_of_them():
    honoured = set(returnn_options.HONOURED)
    refused = set(returnn_options.ADVICE) | set(returnn_options.RETURNN_REFUSES)
    without = {name for name, (accepts, _) in returnn_options.WITHOUT_EFFECT.items() if accepts is None}
    off_value_only = set(returnn_options.WITHOUT_EFFECT) - without
    assert not honoured & refused and not honoured & set(returnn_options.WITHOUT_EFFECT) and not without & refused
    assert off_value_only <= refused  # another value is refused with its way forward
    assert all(options.get(name) is not None for name in honoured)
    assert not [name for name in refused | without if options.get(name) is not None]


def test_help_options_lists_every_option():
    result = run_rnn("--help-options")
    assert result.returncode == 0
    for option in options.all_options():
        assert f"  {option.name}  (" in result.stdout
