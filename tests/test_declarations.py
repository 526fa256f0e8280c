"""One way to declare options, plugins and datasets: in the module that owns them, found by what they declare
(``framework.base.declarations``); a third-party package adds a check and a dataset through entry points, with no edit
to the framework.

The third-party package is written here, installed with pip into a directory of its own (``--target``: its code and its
``.dist-info`` with ``entry_points.txt``, as any installed package has them) and put on the ``PYTHONPATH`` of a
real ``python rnn.py`` run, in a fresh interpreter: entry points are read when a process starts to look for them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, write_config
from framework.base import declarations
from framework.datasets import dataset_classes

PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "acme-checks"
version = "0.1"

[project.entry-points."framework.plugins"]
label_share = "acme_checks.label_share"

[project.entry-points."framework.datasets"]
one_class = "acme_checks.one_class"
"""

# A check of its own: one option, declared the way the framework's plugins declare theirs.
PLUGIN = """\
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.base.findings import Finding, report
from framework.base.options import register

register("acme_label_share", "bool", False, "Warn when one class fills the first batch.", __name__)


class LabelShare(Plugin):
    @classmethod
    def from_config(cls, config, state):
        return cls() if config.bool("acme_label_share") else None

    @on(Event.STEP_START, once=True)
    def first_batch(self, state):
        labels = state.batch["classes"].tolist()
        share = max(labels.count(label) for label in set(labels)) / len(labels)
        if share > 0.9:
            report(Finding("warning", "acme label share", f"one class fills {share:.0%} of the first batch",
                           evidence={"share": share}, option="acme_label_share = False"))


PLUGINS = (LabelShare,)
"""

DATASET = """\
import numpy as np

from framework.datasets.numpy_dataset import NumpyDataset


class OneClassDataset(NumpyDataset):
    def __init__(self, num_seqs=64, **kwargs):
        data = np.random.default_rng(0).normal(size=(num_seqs, 4)).astype(np.float32)
        super().__init__({"data": data, "classes": np.zeros(num_seqs, np.int64)}, sparse_dims={"classes": 3}, **kwargs)


DATASETS = (OneClassDataset,)
"""

CONFIG = """\
from torch import nn

train = {"class": "OneClassDataset", "num_seqs": 32}
extern_data = {"data": {"shape": (4,), "dtype": "float32"}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 3}}
batch_size = 16
num_epochs = 1
optimizer = {"class": "adam"}
learning_rate = 1e-2
model = "out/model"
acme_label_share = True


def get_model(*, epoch, step, **_kwargs):
    return nn.Linear(4, 3)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> str:
    """The directory the package is installed into (with pip, from its pyproject.toml)."""
    source, target = tmp_path_factory.mktemp("acme_checks"), tmp_path_factory.mktemp("site")
    files = {
        "pyproject.toml": PYPROJECT,
        "acme_checks/__init__.py": "",
        "acme_checks/label_share.py": PLUGIN,
        "acme_checks/one_class.py": DATASET,
    }
    for name, text in files.items():
        os.makedirs(os.path.dirname(source / name), exist_ok=True)
        (source / name).write_text(textwrap.dedent(text))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*pip, "--target", str(target), str(source)], check=True, capture_output=True, timeout=120)
    return str(target)


# pip installs the package and a fresh interpreter runs (a forked run has read the entry points already): the
# full suite runs the two tests of the installed package, the fast subset does not
@pytest.mark.slow
def test_an_installed_package_adds_a_check_and_a_dataset_that_a_run_uses(installed, tmp_path):
    config = write_config(tmp_path, CONFIG)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [installed, os.environ.get("PYTHONPATH")]))}
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "rnn.py"), config, "++report_html", "False"],  # no page: as run_rnn
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Epoch 1 train:" in run.stdout  # the dataset of the package was trained on
    found = [json.loads(line) for line in open(tmp_path / "out" / "findings.jsonl", encoding="utf-8")]
    ours = [f for f in found if f["check"] == "acme label share"]
    assert len(ours) == 1 and ours[0]["evidence"] == {"share": 1.0}, found


@pytest.mark.slow
def test_the_options_of_an_installed_plugin_are_known_and_documented(installed):
    env = {**os.environ, "PYTHONPATH": installed}
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "rnn.py"), "--help-options"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "acme_label_share" in run.stdout and "Warn when one class fills the first batch." in run.stdout


def test_the_guide_lists_every_dataset_class_a_config_can_name():
    with open(os.path.join(ROOT, "docs", "guide.rst"), encoding="utf-8") as f:
        guide = f.read()
    shipped = guide[guide.index("Shipped datasets:") : guide.index("\nTraining\n")]
    listed = re.findall(r"``(\w*Dataset\w*)\(", shipped)  # DummyDatasetMultipleDataKeys too
    assert sorted(listed) == sorted(dataset_classes())


def test_the_framework_finds_its_own_declarations_by_what_they_declare():
    """Every module of the framework that lists PLUGINS or DATASETS is found, and only those."""
    import importlib
    import pkgutil

    import framework

    for kind, attribute in (("plugins", "PLUGINS"), ("datasets", "DATASETS")):
        names = [info.name for info in pkgutil.walk_packages(framework.__path__, "framework.") if not info.ispkg]
        declaring = [n for n in names if n.startswith(("framework.training", "framework.debug", "framework.datasets"))]
        expected = [n for n in declaring if hasattr(importlib.import_module(n), attribute)]
        assert [m for m, _, _ in declarations.framework_modules(kind)] == sorted(expected), kind
