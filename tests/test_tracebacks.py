"""Compact tracebacks show the library frame that uses the user's settings (issue 27, item 6).

A library that raises on what the user set names the symptom ("Target 3 is out of bounds"); the
line that names the cause (``self.num_labels``, the ``nn.Embedding``'s ``num_embeddings``) is in a
library frame, which the compact traceback otherwise folds.
"""

import os
import re
import sys
import textwrap
import traceback
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from framework.check_library.tracebacks import format_compact
from tests.conftest import run_rnn, write_config

_TOKENS = """
import numpy as np
from torch import nn

_rng = np.random.default_rng(0)
_tokens = _rng.integers(1, 32, size=(64, 8))
_labels = _rng.integers(0, {classes}, 64)
train = {{"class": "NumpyDataset", "arrays": {{"data": _tokens, "classes": _labels}},
         "sparse_dims": {{"data": 32, "classes": {classes}}}}}
extern_data = {{"data": {{"shape": (8,), "dtype": "int64", "sparse_dim": 32}},
               "classes": {{"shape": (), "dtype": "int64", "sparse_dim": {classes}}}}}
batch_size = 16
num_epochs = 1
optimizer = {{"class": "adam"}}
learning_rate = 1e-3
"""

_BERT = """
import transformers

transformers.logging.set_verbosity_error()


def get_model(**_kwargs):
    config = transformers.BertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=16, num_labels=2,
    )
    return transformers.BertForSequenceClassification(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    out = model(input_ids=extern_data["data"], labels=extern_data["classes"])
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
"""

_EMBEDDING = """
vocab_size = 10  # the ids go up to 31


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 16)
        self.out = nn.Linear(16, 2)

    def forward(self, tokens):
        return self.out(self.embed(tokens).mean(1))


def get_model(**_kwargs):
    return Net()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
"""


def _traceback_of(stderr: str) -> str:
    return stderr[stderr.rindex("Traceback (most recent call last") :]  # the last one, if chained


def _library_frame(text: str) -> list[str]:
    """The lines of the unfolded library frame: its header, statement and values."""
    lines = text.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith("  Library frame using your settings: ")]
    end = start + 1
    while end < len(lines) and lines[end].startswith("    "):
        end += 1
    return lines[start:end]


@pytest.mark.slow  # a run that imports transformers' BERT: about 9 s of CPU
def test_a_hugging_face_head_left_at_two_labels_shows_the_line_with_num_labels(tmp_path):
    pytest.importorskip("transformers")
    config = write_config(tmp_path, _TOKENS.format(classes=4) + _BERT)
    result = run_rnn(config, "++model", "'out/model'", cwd=str(tmp_path))
    assert result.returncode == 1
    text = _traceback_of(result.stderr)
    assert re.search(r"IndexError: Target \d is out of bounds\.", text)  # the error as torch raised it
    frame = _library_frame(text)
    assert re.fullmatch(
        r"  Library frame using your settings: transformers/models/bert/modeling_bert\.py:\d+ in forward", frame[0]
    )
    assert frame[1] == "    loss = loss_fct(logits.view(-1, self.num_labels), labels.view(-1))"
    assert "      self.num_labels = 2" in frame
    assert any(re.match(r"      logits = tensor\[16, 2\]", line) for line in frame)
    assert any(re.match(r"      labels = tensor\[16\] i64 x∈\[0, 3\]", line) for line in frame)
    assert len(frame) <= 10  # the frame, not a wall
    # It sits between the user's frame and the error; torch's frames inside the loss stay folded.
    assert text.index("in train_step\n    out = model(") < text.index(frame[0]) < text.index("IndexError")
    assert "library frame(s): torch/nn/modules/module.py" in text.split(frame[0])[1]


def test_an_embedding_with_too_few_rows_shows_num_embeddings_and_the_ids(tmp_path):
    config = write_config(tmp_path, _TOKENS.format(classes=2) + _EMBEDDING)
    result = run_rnn(config, "++model", "'out/model'", cwd=str(tmp_path))
    assert result.returncode == 1
    text = _traceback_of(result.stderr)
    assert "IndexError: index out of range in self" in text
    frame = _library_frame(text)
    assert re.fullmatch(r"  Library frame using your settings: torch/nn/modules/sparse\.py:\d+ in forward", frame[0])
    assert frame[1].startswith("    return F.embedding(input, self.weight, ")  # the call, joined into one line
    assert "      self = <Embedding module num_embeddings=10, embedding_dim=16>" in frame
    assert any(re.match(r"      input = tensor\[16, 8\] i64 .*x∈\[\d+ .*\| 31\]", line) for line in frame)
    assert text.index("in forward\n    return self.out(self.embed(tokens)") < text.index(frame[0])
    # The note names the module too, also when the step ran on a first-step check's copy of the model.
    assert "module call path: (model) -> embed (Embedding)" in text
    assert "parameters of embed: weight=[10, 16] float32 cpu" in text


def _fake_library(tmp_path, source: str):
    """Import ``source`` as the module ``toyheads`` from a ``site-packages`` folder: library code."""
    folder = tmp_path / "site-packages"
    folder.mkdir()
    (folder / "toyheads.py").write_text(textwrap.dedent(source))
    sys.path.insert(0, str(folder))
    try:
        import toyheads
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("toyheads", None)
    return toyheads


_TOY_HEADS = """
    from torch import nn
    from torch.nn import functional as F


    class Head(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg
            self.proj = nn.Linear(cfg.dim, cfg.classes)

        def forward(self, x, labels):
            logits = self.proj(x)
            return F.cross_entropy(logits.view(-1, self.cfg.classes), labels)


    class LocalHead(Head):
        def forward(self, x, labels):
            classes = self.cfg.classes
            logits = self.proj(x)
            return F.cross_entropy(logits.view(-1, classes), labels)


    def check(cfg, x):
        if x.shape[-1] != cfg.dim:
            raise ValueError("wrong feature size")
        return x


    def library_loss(logits, labels):
        loss = nn.CrossEntropyLoss(ignore_index=-1)  # the library's own module, with its own settings
        return loss(logits, labels)
"""


@dataclass
class HeadConfig:
    dim: int = 4
    classes: int = 2


def _formatted(function) -> tuple[BaseException, str]:
    try:
        function()
    except Exception as exc:  # noqa: BLE001  (any error: the test looks at its text)
        return exc, format_compact(exc)
    raise AssertionError("did not raise")


def test_a_users_config_dataclass_read_by_library_code_is_shown(tmp_path):
    toyheads = _fake_library(tmp_path, _TOY_HEADS)
    head_config = HeadConfig()
    head = toyheads.Head(head_config)
    local_head = toyheads.LocalHead(head_config)
    labels = torch.tensor([0, 1, 2])  # three classes: the config says two

    _, text = _formatted(lambda: head(torch.zeros(3, 4), labels))
    frame = _library_frame(text)
    assert re.fullmatch(r"  Library frame using your settings: .*toyheads\.py:\d+ in forward", frame[0])
    assert frame[1] == "    return F.cross_entropy(logits.view(-1, self.cfg.classes), labels)"
    assert "      self.cfg.classes = 2" in frame

    # A local holding the setting under its name (read from the config earlier in the function).
    _, text = _formatted(lambda: local_head(torch.zeros(3, 4), labels))
    frame = _library_frame(text)
    assert frame[1] == "    return F.cross_entropy(logits.view(-1, classes), labels)"
    assert "      classes = 2" in frame

    # A check that raises: its condition is shown with the statement.
    _, text = _formatted(lambda: toyheads.check(head_config, torch.zeros(3, 5)))
    frame = _library_frame(text)
    assert frame[1] == '    if x.shape[-1] != cfg.dim: raise ValueError("wrong feature size")'
    assert "      cfg = HeadConfig(dim=4, classes=2)" in frame and "      cfg.dim = 4" in frame


def test_torch_modules_show_their_settings_not_their_defaults():
    lstm = nn.LSTM(4, 8, batch_first=True)
    _, text = _formatted(lambda: lstm(torch.zeros(2, 3, 5)))
    frame = _library_frame(text)
    assert frame[1].startswith("    if self.input_size != input.size(-1): raise RuntimeError(")
    assert "      self = <LSTM module mode='LSTM', input_size=4, hidden_size=8, batch_first=True>" in frame

    attention = nn.MultiheadAttention(16, 2, batch_first=True)
    query = torch.zeros(2, 3, 12)
    _, text = _formatted(lambda: attention(query, query, query))
    frame = _library_frame(text)
    assert any(line.startswith("      self = <MultiheadAttention module embed_dim=16, num_heads=2") for line in frame)
    assert not any("need_weights" in line or "is_causal" in line for line in frame[2:])  # arguments at defaults


def test_no_library_frame_when_the_library_uses_nothing_of_the_users(tmp_path):
    logits = torch.zeros(3, 2)
    _, text = _formatted(lambda: nn.functional.cross_entropy(logits, torch.tensor([0, 1, 3])))
    assert "Library frame" not in text and "library frame(s): torch/nn/functional.py" in text
    # A module the library makes for itself is not the user's: its settings are not the user's either.
    toyheads = _fake_library(tmp_path, _TOY_HEADS)
    _, text = _formatted(lambda: toyheads.library_loss(logits, torch.tensor([0, 1, 3])))
    assert "Library frame" not in text and "IndexError: Target 3 is out of bounds." in text


def test_the_exception_and_its_traceback_stay_as_they_are():
    layer = nn.Linear(3, 2)
    exc, _ = _formatted(lambda: layer(torch.zeros(4)))
    before = [(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__)]
    text = format_compact(exc)
    assert [(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__)] == before
    assert "Library frame using your settings: torch/nn/modules/linear.py:" in text
    assert "      self = <Linear module in_features=3, out_features=2>" in text
    assert os.path.basename(before[-1][0]) == "linear.py"  # the innermost frame is still torch's, for pdb
