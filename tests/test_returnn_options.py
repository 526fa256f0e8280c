"""RETURNN's options in real RETURNN configs: accepted without effect with one startup note, honoured as RETURNN's
torch engine honours them, or refused all at once; checked against RETURNN's own code where it runs cheaply."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import run_module, run_script, run_torchrun
from framework.base import returnn_options
from framework.base.config import Config, load_config
from framework.base.errors import CheckpointError, ConfigError
from framework.training.distributed import check_reduce_type
from framework.training.lr_control import LearningRateControl
from framework.training.optim import weight_decay_groups
from framework.training.preload import preload_from_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "tests", "returnn", "configs")
FIXTURES = sorted(glob.glob(os.path.join(CONFIGS, "*.config")))
# The lines of the collected configs that still stop the run (each changes the trained model and is not reproduced
# here; docs/returnn_options.inc says why). tools/measure-returnn-configs.py runs the whole collection.
STILL_REFUSED: dict[str, set[str]] = {}
# The default suite trains a sample: a RETURNN demo, a written i6_core config (torchrun, get_global_config), a
# MiniReturnn-style config, a hybrid one with chunking, one of RETURNN's engine tests.
SAMPLE = [
    os.path.join(CONFIGS, name)
    for name in (
        "01_returnn_demo_torch.config",
        "16_gaudino_rf_transducer_written.config",
        "17_hilmes_ctc_bpe_frontend.config",
        "33_hilmes_tedlium_hybrid_blstm.config",
        "39_returnn_test_lion_optimizer.config",
    )
]


def _rnn(*args: str, cwd: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", FIXTURE_OUT=cwd, PYTHONPATH=CONFIGS + os.pathsep + ROOT)
    return run_script(os.path.join(ROOT, "rnn.py"), *args, cwd=cwd, env=env, timeout=300)


def _write(directory, text: str, name: str = "returnn.config") -> str:
    path = os.path.join(str(directory), name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


# A 12AX config in RETURNN's notation that sets the options under test; its functions print what they receive.
OPTIONS_CONFIG = """
import torch
from torch import nn
from framework import get_run_ctx

backend = "torch"
behavior_version = 21
target = "classes"
num_inputs = 9
cache_size = "0"
window = 1
use_horovod = False
tf_log_memory_usage = True
rf_att_dropout_broadcast = False
use_last_best_model = None

train = {"class": "Task12AXDataset", "num_seqs": 40}
dev = {"class": "Task12AXDataset", "num_seqs": 20, "fixed_random_seed": 1}
extern_data = {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True}}
batch_size = {"data": 300}
max_seq_length = {"data": 30}
min_seq_length = 3
max_seqs = 8
num_epochs = 3
save_interval = 2
model = "out/model"
learning_rate = 0.01
optimizer = {"class": "nadam", "weight_decay": 0.01, "weight_decay_modules_blacklist": ["torch.nn.Embedding"]}
gradient_clip = 0
gradient_noise = 0.01
log_verbosity = 5
log_batch_size = True


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(9, 16)
        self.norm = nn.LayerNorm(16)
        self.out = nn.Linear(16, 2)

    def forward(self, x):
        return self.out(self.norm(torch.relu(self.linear(x))))


def get_model(**_kwargs):
    return Model()


def dynamic_learning_rate(*, global_train_step, epoch, epoch_continuous, learning_rate, **kwargs):
    print(f"schedule step {global_train_step} epoch {epoch} continuous {epoch_continuous:.4f}", flush=True)
    return learning_rate


def train_step(*, model, extern_data, **_kwargs):
    lengths = extern_data["data:seq_len"]
    logits = model(extern_data["data"])
    mask = torch.arange(logits.shape[1])[None, :] < lengths[:, None]
    loss = nn.functional.cross_entropy(logits[mask], extern_data["classes"][mask].long(), reduction="none")
    get_run_ctx().mark_as_loss(name="ce", loss=loss)


def forward_step(*, model, extern_data):
    get_run_ctx().mark_as_default_output(model(extern_data["data"]), seq_len=extern_data["data:seq_len"])


class Callback:
    def init(self, *, model):
        self.seqs = 0
        print("callback init", type(model).__name__)

    def process_seq(self, *, seq_tag, outputs):
        self.seqs += 1
        assert outputs["output"].shape[1] == 2 and outputs["output"].ndim == 2

    def finish(self):
        print("callback finish", self.seqs, "sequences")


forward_callback = Callback  # RETURNN: the class, or a function returning the object
"""


@pytest.mark.slow
def test_a_returnn_config_trains_with_its_options_as_returnn_runs_them_and_forwards_to_its_callback(tmp_path):
    config = _write(tmp_path, OPTIONS_CONFIG)
    train = _rnn(config, cwd=str(tmp_path))
    out = train.stdout + train.stderr
    assert train.returncode == 0, out
    notes = [line for line in out.splitlines() if line.startswith("RETURNN options without effect here")]
    assert len(notes) == 1  # one note lists them all
    for name in (
        "target",
        "num_inputs",
        "cache_size",
        "use_horovod",
        "rf_att_dropout_broadcast",
    ):
        assert f"{name} (" in notes[0]
    # save_interval = 2 of 3 epochs: epochs 2 and 3 (the last) are written, as in RETURNN
    assert sorted(f for f in os.listdir(tmp_path / "out") if f.endswith(".pt")) == ["model.002.pt", "model.003.pt"]
    # RETURNN's weight-decay groups: biases and the blacklist (here: Embedding) do not decay
    assert "weight_decay 0.01 on 3 parameter tensors; not on 3 (biases and Embedding" in out
    # max_seq_length / min_seq_length leave out sequences; log_batch_size shows the batch in the step line
    assert re.search(r"Dataset train: \d+ of 40 sequences left out by their length", out)
    steps = [line for line in out.splitlines() if line.startswith("ep 1 train, step")]
    assert steps and all("num_seqs" in line and "max_size:data" in line for line in steps)
    assert all(int(re.search(r"max_size:data (\d+)", line).group(1)) <= 30 for line in steps)
    # per-key batch_size: num_seqs x longest data sequence stays within 300 frames (unless one sequence is alone)
    for line in steps:
        seqs, longest = (int(re.search(p, line).group(1)) for p in (r"num_seqs (\d+)", r"max_size:data (\d+)"))
        assert seqs == 1 or seqs * longest <= 300
    # dynamic_learning_rate gets RETURNN's epoch_continuous (returnn/torch/engine.py): epoch - 1 at the epoch's first
    # step, then epoch - 1 plus the fraction of the epoch's sequences in the batches already trained
    continuous = [(int(e), float(c)) for e, c in re.findall(r"schedule step \d+ epoch (\d+) continuous ([\d.]+)", out)]
    firsts = [c for e, c in continuous if e == 1]
    assert firsts[0] == 0.0 and 0 < firsts[1] < firsts[-1] < 1 and firsts == sorted(firsts)
    assert [c for e, c in continuous if e == 2][0] == 1.0

    forward = _rnn(
        config,
        "++task",
        "forward",
        "++forward_data",
        "{'class': 'Task12AXDataset', 'num_seqs': 7, 'fixed_random_seed': 3}",
        cwd=str(tmp_path),
    )
    assert forward.returncode == 0, forward.stdout + forward.stderr
    assert "callback init Model" in forward.stdout
    handed = int(re.search(r"callback finish (\d+) sequences", forward.stdout).group(1))
    assert 0 < handed <= 7 and f"Forward: wrote {handed} sequences (output) to forward_callback" in forward.stdout


def test_refused_returnn_options_are_named_in_one_message_each_with_its_way_forward(tmp_path):
    config = _write(
        tmp_path,
        "train = {'class': 'Task12AXDataset', 'num_seqs': 20}\n"
        "pretrain = 'default'\nuse_horovod = True\ngrad_clip = 1.5\nstart_batch = 5\n"
        "network = {}\n",
    )
    with pytest.raises(ConfigError) as error:
        load_config([config])
    message = str(error.value)
    # without get_model, network and pretrain make a TensorFlow config; RETURNN's torch engine stops on the others
    assert message.count("a RETURNN option that changes the trained model") == 2
    assert message.count("RETURNN's own torch engine stops on, so it stops here too") == 3
    assert "torch_distributed" in message and "option is called gradient_clip_global_norm" in message
    assert "custom start_batch not supported" in message


# A RETURNN torch config whose epoch_end prints the model's parameter checksum (TENSORFLOW_LINES are added to it).
CHECKSUM_CONFIG = """#!rnn.py
import sys

import torch
from torch import nn

backend = "torch"
train = {"class": "Task12AXDataset", "num_seqs": 12, "fixed_random_seed": 1}
extern_data = {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True}}
batching = "sorted"
batch_size = 5000
max_seqs = 4
num_epochs = 2
optimizer = {"class": "sgd"}
learning_rate = 0.1
model = "out/model"
device = "cpu"


def get_model(**_kwargs):
    torch.manual_seed(1)
    return nn.Linear(9, 2)


def train_step(*, model, extern_data, **_kwargs):
    if "returnn.torch.engine" in sys.modules:  # RETURNN itself runs this config
        from returnn.frontend import get_run_ctx
    else:
        from framework import get_run_ctx
    x, y = (getattr(extern_data[k], "raw_tensor", extern_data[k]) for k in ("data", "classes"))
    get_run_ctx().mark_as_loss(name="ce", loss=nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten().long()))


def epoch_end(*, epoch, model, **_kwargs):
    print("CALL epoch_end", epoch, round(float(sum(p.detach().double().abs().sum() for p in model.parameters())), 6))
"""
# RETURNN's TensorFlow-network options next to get_model and backend = "torch" (get_network would raise if called)
TENSORFLOW_LINES = """
network = {"output": {"class": "softmax", "loss": "ce", "from": "data"}}
pretrain = "default"
pretrain_repetitions = 2
pretrain_greedy = True
pretrain_construction_algo = "from_output"
pretrain_copy_output_layer = True
pretrain_learning_rate = 5.0
use_tensorflow = True


def get_network(epoch, **kwargs):
    raise Exception("get_network called")
"""


@pytest.mark.slow
def test_tensorflow_network_options_next_to_get_model_change_nothing_in_returnn_and_are_accepted_here(tmp_path):
    """network, get_network, pretrain and its options next to get_model, use_tensorflow next to backend: RETURNN's torch
    engine trains the same parameters with them as without (it never reads them), and RETURNN stops on use_horovod =
    True; here the first config trains as the second, listing them in the startup note, and use_horovod stops it."""
    runs: dict[tuple[str, str], subprocess.CompletedProcess] = {}
    for name, extra in (("plain", ""), ("tf", TENSORFLOW_LINES), ("horovod", "use_horovod = True\n")):
        config = tmp_path / f"{name}.config"
        config.write_text(CHECKSUM_CONFIG + extra)
        # RETURNN's loaders in its own process (as tests/test_returnn_load.py): the same batches, no spawned workers
        own = tmp_path / f"{name}.returnn.config"
        own.write_text(config.read_text() + "\ntorch_dataloader_opts = {'num_workers': 0}\n")
        for who in ("returnn", "here"):
            (tmp_path / who / name).mkdir(parents=True)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        runs["returnn", name] = run_module("returnn", str(own), cwd=str(tmp_path / "returnn" / name), env=env)
        if name != "plain":  # the plain config trains here in test_returnn_load's configs already
            runs["here", name] = _rnn(str(config), "++report_html", "False", cwd=str(tmp_path / "here" / name))
    calls = {key: [line for line in run.stdout.splitlines() if line.startswith("CALL ")] for key, run in runs.items()}
    for key in (("returnn", "plain"), ("returnn", "tf"), ("here", "tf")):
        assert runs[key].returncode == 0, runs[key].stdout[-3000:] + runs[key].stderr[-3000:]
    assert len(calls["returnn", "plain"]) == 2 and calls["returnn", "tf"] == calls["returnn", "plain"]
    assert len(calls["here", "tf"]) == 2  # Task12AXDataset here draws other sequences than RETURNN's: other values
    note = next(line for line in runs["here", "tf"].stdout.splitlines() if line.startswith("RETURNN options without"))
    for name in ("network", "get_network", "pretrain", "pretrain_learning_rate", "use_tensorflow"):
        assert f"{name} (RETURNN's torch engine ignores it" in note or f"{name} (RETURNN picks" in note, (name, note)
    theirs, ours = runs["returnn", "horovod"], runs["here", "horovod"]
    assert theirs.returncode != 0 and "AssertionError" in theirs.stdout + theirs.stderr
    assert ours.returncode == 2 and "stops on use_horovod = True" in ours.stdout + ours.stderr


def test_options_at_their_off_value_or_ignored_by_returnns_torch_engine_are_accepted(tmp_path):
    accepted = {
        "use_horovod": False,
        "use_train_proc_manager": True,  # RETURNN acts on it, but the trained model is the same
        "stop_for_resubmission_when_low_time_left": True,
        "dry_run": True,
        "tf_session_opts": {},
        "nadam": True,
        "debug_runtime_sanity_checks": True,  # read only by RETURNN's TensorFlow backend (returnn_keys.py)
        "torch_amp_options": {"dtype": "bfloat16"},  # a fork's option that mainline RETURNN ignores
    }
    config = load_config([_write(tmp_path, "train = {'class': 'Task12AXDataset'}\n")], accepted)
    assert set(config.without_effect) == set(accepted)
    assert returnn_options.startup_note(config.without_effect).count("(") >= len(accepted)


def test_defaults_that_differ_from_returnns_are_named_for_returnn_configs_only():
    returnn_style = Config.from_dict({"backend": "torch", "train": {"class": "Task12AXDataset"}})
    notes = "\n".join(returnn_options.default_notes(returnn_style))
    assert "learning_rate is not set: 0.001 is used here; RETURNN's default is 1.0 (learning_rate = 1.0" in notes
    assert "optimizer is not set" in notes and "num_epochs is not set" in notes
    assert "batching is not set" not in notes  # a RETURNN config gets RETURNN's default order (test_returnn_orderings)
    assert returnn_options.default_notes(Config.from_dict({"train": {"class": "Task12AXDataset"}})) == []
    # RETURNN options without backend or behavior_version: the framework's orders, and the note says RETURNN's
    unmarked = Config.from_dict({"debug_runtime_sanity_checks": True, "train": {"class": "Task12AXDataset"}})
    assert "batching is not set" in "\n".join(returnn_options.default_notes(unmarked))
    scaled = Config.from_dict({"dynamic_learning_rate": lambda **kw: kw["learning_rate"]})
    assert [note.split(":")[0] for note in returnn_options.default_notes(scaled)] == ["learning_rate is not set"]


@pytest.mark.parametrize(
    "options",
    [
        {"learning_rate_control": "newbob", "newbob_relative_error_threshold": -0.01},
        {"learning_rate_control": "newbob", "newbob_relative_error_div_by_old": True, "learning_rate_decay": 0.7},
        {
            "learning_rate_control": "newbob_multi_epoch",
            "newbob_multi_num_epochs": 3,
            "newbob_multi_update_interval": 1,
            "learning_rate_control_relative_error_relative_lr": True,
            "learning_rate_control_min_num_epochs_per_new_lr": 2,
            "newbob_learning_rate_decay": 0.9,
            "newbob_relative_error_threshold": 0,
        },
        {"learning_rate_control": "newbob_multi_epoch", "newbob_multi_num_epochs": 4, "min_learning_rate": 4e-4},
        # the score that decides: RETURNN's key, and this framework's notation of it (the rates: RETURNN's of its key)
        {"learning_rate_control": "newbob", "learning_rate_control_error_measure": "dev_loss_fer"},
        {"learning_rate_control": "newbob", "learning_rate_control_error_measure": "dev_fer"},
    ],
)
def test_learning_rate_control_gives_returnns_rates(options):
    from returnn.config import Config as ReturnnConfig
    from returnn.learning_rate_control import load_learning_rate_control_from_config

    options = {"learning_rate": 0.001, **options}
    measure = options.get("learning_rate_control_error_measure")
    # RETURNN's torch engine records dev_loss_<name> (Engine.eval_model)
    returnn_options = {**options, "learning_rate_control_error_measure": "dev_loss_fer"} if measure else options
    theirs = load_learning_rate_control_from_config(ReturnnConfig(dict(returnn_options)))
    ours = LearningRateControl(Config.from_dict(options))
    rng = np.random.default_rng(0)
    score, error = 3.0, 0.5
    for epoch in range(1, 26):
        assert ours.learning_rate(epoch) == pytest.approx(theirs.get_learning_rate_for_epoch(epoch)), epoch
        score *= 1 + rng.uniform(-0.05, 0.02)  # falls, with setbacks
        error *= 1 + rng.uniform(-0.02, 0.03)  # the other score rises mostly: it decides other rates
        if measure:
            theirs.set_epoch_error(epoch, {"dev_loss_ce": score, "dev_loss_fer": error})
            ours.record(epoch, {"dev": {"ce": score, "fer": error}})
        else:
            theirs.set_epoch_error(epoch, {"dev_score_ce": score})
            ours.record(epoch, {"dev": {"ce": score}})
    if measure:  # the measure decided: the ce-driven rates are others
        by_ce = load_learning_rate_control_from_config(
            ReturnnConfig({**returnn_options, "learning_rate_control_error_measure": "dev_loss_ce"})
        )
        score, error, rng = 3.0, 0.5, np.random.default_rng(0)
        for epoch in range(1, 26):
            score *= 1 + rng.uniform(-0.05, 0.02)
            error *= 1 + rng.uniform(-0.02, 0.03)
            by_ce.set_epoch_error(epoch, {"dev_loss_ce": score, "dev_loss_fer": error})
        assert by_ce.get_learning_rate_for_epoch(26) != pytest.approx(theirs.get_learning_rate_for_epoch(26))


def test_weight_decay_groups_are_returnns():
    from returnn.config import Config as ReturnnConfig
    from returnn.torch.updater import Updater

    model = torch.nn.Sequential(
        torch.nn.Embedding(5, 4), torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 3, bias=False)
    )
    updater = Updater(config=ReturnnConfig({"optimizer": {"class": "adamw"}}), network=model, device="cpu")

    def names(groups):
        return [sorted(n for n, p in model.named_parameters() if any(p is q for q in g["params"])) for g in groups]

    for blacklist in (None, ["torch.nn.Embedding"], ["rf.LayerNorm", "rf.LearnedRelativePositionalEncoding"]):
        opts = {"weight_decay": 0.01} | ({} if blacklist is None else {"weight_decay_modules_blacklist": blacklist})
        if blacklist is not None and any(b.startswith("rf.") for b in blacklist):
            expected = [["0.weight", "1.weight", "3.weight"], ["1.bias", "2.bias", "2.weight"]]  # rf.LayerNorm: torch's
        else:
            expected = names(updater._get_optimizer_param_groups(torch.optim.AdamW, dict(opts)))
        assert names(weight_decay_groups(model, 0.01, blacklist, None)) == expected


def test_preload_from_files_loads_with_prefix_mapping_and_missing_as_returnn(tmp_path):
    source = torch.nn.Linear(3, 2)
    torch.save({"model": source.state_dict(), "epoch": 4}, tmp_path / "other.pt")
    torch.save({"w": source.weight.detach()}, tmp_path / "plain.pt")
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))

    def load(entry, training=True):
        preload_from_files(Config.from_dict({"preload_from_files": {"a": entry}}), model, training=training)

    load({"filename": str(tmp_path / "other.pt"), "prefix": "0.", "init_for_train": True})
    assert torch.equal(model[0].weight, source.weight) and torch.equal(model[0].bias, source.bias)
    load({"filename": str(tmp_path / "plain.pt"), "checkpoint_key": None, "var_name_mapping": {"1.weight": "w"}})
    assert not torch.equal(model[1].weight[:, :2], source.weight[:, :2])  # init_for_train False: eval/forward only
    with pytest.raises(CheckpointError, match="shapes differ"):
        load({"filename": str(tmp_path / "plain.pt"), "checkpoint_key": None, "init_for_train": True,
              "var_name_mapping": {"1.weight": "w"}, "ignore_missing": True})  # fmt: skip
    torch.save({"model": {"weight": source.weight.detach()}}, tmp_path / "partial.pt")
    with pytest.raises(CheckpointError, match="ignore_missing"):
        load({"filename": str(tmp_path / "partial.pt"), "prefix": "0.", "init_for_train": True})
    load({"filename": str(tmp_path / "partial.pt"), "prefix": "0.", "init_for_train": True, "ignore_missing": True})


def test_reduce_type_is_returnns():
    check_reduce_type({"reduce_type": "param", "param_sync_step": 100})
    check_reduce_type({})
    for options in ({"reduce_type": "param"}, {"reduce_type": "grad", "param_sync_step": 10}, {"reduce_type": "x"}):
        with pytest.raises(ConfigError):
            check_reduce_type(options)


def test_collected_returnn_configs_pass_validation():
    """Every collected config is accepted before anything runs, apart from the lines STILL_REFUSED names."""
    sys.path.insert(0, CONFIGS)
    try:
        for path in FIXTURES:
            refused = set()
            try:
                load_config([path], {"device": "cpu"})
            except ConfigError as exc:
                refused = set(re.findall(r"'(\w+)' is a RETURNN option", str(exc)))
                assert refused, (path, str(exc))
            assert refused == STILL_REFUSED.get(os.path.basename(path), set()), path
    finally:
        sys.path.remove(CONFIGS)


@pytest.mark.slow
@pytest.mark.parametrize("path", SAMPLE, ids=os.path.basename)
def test_collected_returnn_config_trains(tmp_path, path):
    """A sample of the collected configs trains an epoch, their STILL_REFUSED lines taken out."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    for name in STILL_REFUSED.get(os.path.basename(path), ()):
        source = re.sub(rf"^{name} = ", f"_{name} = ", source, flags=re.M)
    config = _write(tmp_path, source, os.path.basename(path))
    args = [config, "++device", "'cpu'", "++num_epochs", "1"]
    if "torch_distributed =" in source:
        env = dict(os.environ, OMP_NUM_THREADS="1", FIXTURE_OUT=str(tmp_path), PYTHONPATH=CONFIGS + os.pathsep + ROOT)
        nproc = ("--nproc_per_node=1", "--standalone")
        result = run_torchrun(*args, torchrun_args=nproc, cwd=str(tmp_path), env=env, timeout=300)
    else:
        result = _rnn(*args, cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Epoch 1 train:" in result.stdout


def test_default_float_dtype_builds_the_model_in_it_and_gives_the_floating_data_in_it_as_returnn_does(tmp_path):
    from framework.assembly import Engine

    config_text = (
        "import torch\n"
        "from torch import nn\n"
        "train = {'class': 'GaussianClustersDataset', 'split': 'train', 'num_seqs': 64, 'dim': 4, 'num_classes': 3}\n"
        "extern_data = {'data': {'shape': (4,)}, 'classes': {'shape': (), 'dtype': 'int64', 'sparse_dim': 3}}\n"
        "batch_size = 16\nnum_epochs = 1\noptimizer = {'class': 'adam'}\nlearning_rate = 1e-2\n"
        "default_float_dtype = 'bfloat16'\n"
        "seen = []\n"
        "def get_model(**_):\n"
        "    seen.append(torch.get_default_dtype())\n"
        "    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))\n"
        "def train_step(*, model, extern_data, run_ctx, **_):\n"
        "    seen.append((extern_data['data'].dtype, extern_data['classes'].dtype))\n"
        "    logits = model(extern_data['data'])\n"
        "    run_ctx.mark_as_loss(nn.functional.cross_entropy(logits.float(), extern_data['classes']), 'ce')\n"
    )
    path = tmp_path / "config.py"
    path.write_text(config_text)
    engine = Engine(load_config([str(path)], {"model": str(tmp_path / "model")}))
    engine.run("train")
    seen = engine.config.get("get_model").__globals__["seen"]
    assert seen[0] == torch.bfloat16 and torch.get_default_dtype() == torch.float32  # built in it, then restored
    assert set(seen[1:]) == {(torch.bfloat16, torch.int64)}
    assert {p.dtype for p in engine.state.model.parameters()} == {torch.bfloat16}
    # RETURNN's own conversion of the same raw batch gives the same dtypes and values
    extern_data_mod = pytest.importorskip("returnn.torch.data.extern_data")
    from returnn.tensor import TensorDict

    loader = engine.state.loaders["train"]
    ours = next(iter(loader.iterate(loader.plan(1)[:1])))[1]
    template = TensorDict()
    template.update(engine.config.get("extern_data"), auto_convert=True)
    raw = {key: torch.from_numpy(a) for key, a in loader.numpy_batch(loader.plan(1)[0], 1).items()}
    theirs = extern_data_mod.raw_dict_to_extern_data(
        raw, extern_data_template=template, device="cpu", float_dtype="bfloat16"
    )
    for key in ("data", "classes"):
        assert theirs.data[key].raw_tensor.dtype == ours[key].dtype
        assert torch.equal(theirs.data[key].raw_tensor, ours[key])
    engine.checkpoints.release()
