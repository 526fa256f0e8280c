"""Config files, overrides, validation and their errors."""

import pytest

from conftest import write_config
from framework.base.config import Config, load_config, parse_args, parse_override_value
from framework.base.errors import ConfigError


def test_parse_args_splits_files_and_literal_overrides():
    files, overrides = parse_args(["a.py", "b.py", "++learning_rate", "1e-3", "++model", "out/m", "++log", "['x.log']"])
    assert files == ["a.py", "b.py"]
    assert overrides == {"learning_rate": 1e-3, "model": "out/m", "log": ["x.log"]}
    assert parse_override_value("None") is None
    assert parse_override_value("(1, 2)") == (1, 2)


def test_parse_args_rejects_an_override_without_value_and_unknown_flags():
    with pytest.raises(ConfigError, match="no value"):
        parse_args(["a.py", "++batch_size"])
    with pytest.raises(ConfigError, match="Unknown command-line flag"):
        parse_args(["a.py", "--batch_size", "3"])


def test_overrides_reach_registered_options_helpers_and_code_in_the_file(tmp_path):
    path = write_config(
        tmp_path,
        "hidden_dim = 16\n"
        "num_layers = config.int('num_layers', 2)\n"
        "layer_sizes = [hidden_dim] * num_layers\n"
        "def get_hidden():\n    return hidden_dim\n",
    )
    config = load_config([path], {"hidden_dim": 32, "num_layers": 3, "batch_size": 7})
    assert config.get("batch_size") == 7  # registered option the file does not set
    assert config.get("num_layers") == 3  # read via config.int while the file executed
    assert config.get("layer_sizes") == [16, 16, 16]  # computed at exec time from the file's own value
    assert config.get("get_hidden")() == 32  # functions see the override at call time


def test_an_override_of_the_wrong_kind_for_a_config_variable_names_the_override(tmp_path):
    path = write_config(tmp_path, "hidden_dim = 400\nrun_name = 'base'\nsizes = [1, 2]\nscale = None\n")
    with pytest.raises(ConfigError, match=r"Override \+\+hidden_dim '400' gives a str, .* e\.g\. \+\+hidden_dim 400\."):
        load_config([path], {"hidden_dim": "400"})  # quoted twice on the shell: ++hidden_dim "'400'"
    with pytest.raises(ConfigError, match=r"\+\+run_name 7 gives a number, but the config sets run_name = 'base'"):
        load_config([path], {"run_name": 7})
    # the same kind, int for float, or a variable that is None, lists, ...: all fine
    config = load_config([path], {"hidden_dim": 512.0, "run_name": "b", "sizes": (3,), "scale": "x"})
    assert config.get("hidden_dim") == 512.0 and config.get("scale") == "x"


def test_unknown_override_is_an_error_that_suggests_the_option(tmp_path):
    path = write_config(tmp_path, "batch_size = 3\n")
    with pytest.raises(ConfigError, match="'learning_rate'"):
        load_config([path], {"learnig_rate": 0.1})


def test_misspelled_option_in_the_file_names_the_closest_option(tmp_path):
    path = write_config(tmp_path, "learning_rate_contrl = 'newbob'\n")
    with pytest.raises(ConfigError) as info:
        load_config([path])
    assert "'learning_rate_contrl' is not an option; did you mean 'learning_rate_control'" in str(info.value)


def test_wrong_type_names_option_expected_type_and_value(tmp_path):
    path = write_config(tmp_path, "num_epochs = '5'\n")
    with pytest.raises(ConfigError) as info:
        load_config([path])
    assert "'num_epochs' expects int, but got str '5'" in str(info.value)


def test_helpers_imports_functions_and_classes_are_allowed(tmp_path):
    path = write_config(
        tmp_path,
        "import os\nimport numpy as np\nfrom torch import nn\n"
        "hidden_dim = 3\nnum_layers = 2\nnet_sizes = {}\n_private = 1\nEpochSplit = 4\n"
        "class MyModel(nn.Module):\n    pass\n"
        "def my_helper():\n    return 1\n",
    )
    config = load_config([path])
    assert config.get("hidden_dim") == 3


def test_later_files_override_earlier_ones(tmp_path):
    first = write_config(tmp_path, "batch_size = 3\nnum_epochs = 2\n", "a.py")
    second = write_config(tmp_path, "batch_size = 5\n", "b.py")
    config = load_config([first, second])
    assert (config.get("batch_size"), config.get("num_epochs")) == (5, 2)


def test_syntax_error_shows_file_and_line(tmp_path):
    path = write_config(tmp_path, "batch_size = 3\nnum_epochs = = 2\n")
    with pytest.raises(ConfigError) as info:
        load_config([path])
    assert f"{path}, line 2" in str(info.value) and "num_epochs = = 2" in str(info.value)


def test_exception_while_executing_the_config_shows_its_traceback(tmp_path):
    path = write_config(tmp_path, "batch_size = 3\nsizes = {}\nhidden = sizes['big']\n")
    with pytest.raises(ConfigError) as info:
        load_config([path])
    message = str(info.value)
    assert "KeyError" in message and "line 3" in message and "hidden = sizes['big']" in message


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config([str(tmp_path / "nope.py")])


def test_typed_access_defaults():
    config = Config.from_dict({"batch_size": 8})
    assert config.int("batch_size") == 8
    assert config.int("max_seqs") is None  # registered default
    assert config.float("learning_rate") == 1e-3
    assert config.typed_value("my_helper", "dflt") == "dflt"
    assert config.bool("my_flag", False) is False
    with pytest.raises(KeyError):
        config.typed_value("not_registered_and_not_set")


def test_command_args_repeat_the_files_and_overrides_of_a_run():
    import shlex

    from framework.base.config import Config, parse_args

    argv = ["my dir/a.py", "b.py", "++plant", "forward_log", "++lr", "1e-3", "++name", "'1'", "++d", "{'x': [1]}"]
    files, overrides = parse_args(argv)
    config = Config(overrides=overrides)
    config.files = files
    assert parse_args(shlex.split(config.command_args())) == (files, overrides)
    assert "++plant forward_log" in config.command_args()


def test_an_override_followed_by_another_override_has_no_value():
    with pytest.raises(
        ConfigError, match=r"Override '\+\+num_epochs' has no value: the argument after it, '\+\+model'"
    ):
        parse_args(["a.py", "++num_epochs", "++model", "x"])
    assert parse_args(["a.py", "++name", "'++x'"])[1] == {"name": "++x"}  # a quoted string may start with ++
