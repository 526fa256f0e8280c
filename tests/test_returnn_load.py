"""RETURNN's ``load``, ``start_epoch`` and ``load_model_post_hooks``: the checkpoint a run starts from is chosen as
RETURNN's ``EngineBase.get_epoch_model`` chooses it (compared on a grid of options and files), and a training and a
forward that start from ``load`` run as RETURNN's do (compared with RETURNN running the same config)."""

from __future__ import annotations

import itertools
import os

import pytest
import torch

from conftest import run_module, run_rnn
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.training import checkpoint, start_checkpoint

NUM_EPOCHS = 5


def _files(root, existing: tuple[int, ...]) -> dict[str, str]:
    """A model prefix with epoch checkpoints ``existing`` (RETURNN's model and optimizer files; this framework's model
    file has RETURNN's name), another run's checkpoint with an epoch in its name, one without, and an import."""
    paths = {
        "model": str(root / "run" / "model"),
        "numbered": str(root / "other" / "model.004"),
        "plain": str(root / "other" / "init"),
        "import": str(root / "imp" / "model"),
    }
    for directory in ("run", "other", "imp"):
        (root / directory).mkdir(exist_ok=True)
    for epoch in existing:
        for suffix in (".pt", ".opt.pt"):
            (root / "run" / f"model.{epoch:03d}{suffix}").write_bytes(b"")
    for name in ("numbered", "plain", "import"):
        open(paths[name] + ".pt", "wb").close()
    return paths


def _returnns_choice(options: dict):
    """(epoch, model file, train start epoch) by RETURNN's code, or the exception's type name."""
    from returnn.config import Config as ReturnnConfig
    from returnn.engine.base import EngineBase
    from returnn.util.basic import BackendEngine

    BackendEngine.select_engine(engine=BackendEngine.Torch)
    config = ReturnnConfig(dict(options))
    try:
        epoch, path = EngineBase.get_epoch_model(config)
        start = EngineBase.get_train_start_epoch(config) if options.get("task", "train") == "train" else None
    except (AssertionError, ValueError, KeyError) as exc:
        return type(exc).__name__
    return epoch, path, start


def _our_choice(options: dict):
    config = Config.from_dict({k: v for k, v in options.items() if k != "task"} | {"task": options.get("task")})
    existing = checkpoint.list_checkpoints(options["model"])
    try:
        epoch, path = start_checkpoint.epoch_model(config, existing, options.get("task", "train"))
    except ConfigError:
        return "error"
    start = start_checkpoint.train_start_epoch((epoch, path)) if options.get("task", "train") == "train" else None
    # RETURNN names a file without '.pt'
    return epoch, None if path is None else path.removesuffix(".pt"), start


GRID = list(
    itertools.product(
        ("train", "forward"),
        ("auto", 1, 3),  # start_epoch
        (None, "numbered", "plain"),  # load
        (None, 1, 2),  # load_epoch
        (False, True),  # import_model_train_epoch1
        ((), (1, 2), (1, 2, 3, 4)),  # the model's checkpoints
    )
)


@pytest.mark.parametrize("task, start_epoch, load, load_epoch, imported, existing", GRID)
def test_the_checkpoint_a_run_starts_from_is_returnns_choice(
    tmp_path, task, start_epoch, load, load_epoch, imported, existing
):
    paths = _files(tmp_path, existing)
    options = {"task": task, "model": paths["model"], "num_epochs": NUM_EPOCHS, "start_epoch": start_epoch}
    if load:
        options["load"] = paths[load] + (".pt" if load == "plain" else "")  # with and without '.pt'
    if load_epoch:
        options["load_epoch"] = load_epoch
    if imported:
        options["import_model_train_epoch1"] = paths["import"] + ".pt"
    theirs = _returnns_choice(options)
    ours = _our_choice(options)
    if isinstance(theirs, str):
        assert ours == "error", (theirs, ours)
    else:
        assert ours == theirs


def test_the_grid_covers_every_kind_of_choice(tmp_path):
    """Resume, continue an older epoch, import, load for a new training, scratch, and RETURNN's errors all occur."""
    kinds = set()
    for task, start_epoch, load, load_epoch, imported, existing in GRID:
        root = tmp_path / f"{len(kinds)}_{task}_{start_epoch}_{load}_{load_epoch}_{imported}_{len(existing)}"
        root.mkdir()
        paths = _files(root, existing)
        options = {"task": task, "model": paths["model"], "num_epochs": NUM_EPOCHS, "start_epoch": start_epoch}
        options |= {"load": paths[load]} if load else {}
        options |= {"load_epoch": load_epoch} if load_epoch else {}
        options |= {"import_model_train_epoch1": paths["import"] + ".pt"} if imported else {}
        choice = _returnns_choice(options)
        if isinstance(choice, str):
            kinds.add(choice)
        else:
            epoch, path, _ = choice
            kinds.add(
                "scratch"
                if path is None
                else "import"
                if epoch == 0
                else "load"
                if path.startswith(str(root / "other"))
                else f"epoch {epoch}"
            )
    assert {"scratch", "import", "load", "epoch 4", "epoch 2", "ValueError", "AssertionError"} <= kinds, kinds


def test_a_planted_bug_in_the_choice_fails_the_comparison(tmp_path, monkeypatch):
    """The comparison can fail: ignoring start_epoch = 1 (resuming anyway) gives another choice than RETURNN's."""
    paths = _files(tmp_path, (1, 2))
    options = {"task": "train", "model": paths["model"], "num_epochs": NUM_EPOCHS, "start_epoch": 1}
    assert _our_choice(options) == _returnns_choice(options)
    real = start_checkpoint.start_epoch_value
    monkeypatch.setattr(
        start_checkpoint, "start_epoch_value", lambda config: None if real(config) == 1 else real(config)
    )
    assert _our_choice(options) != _returnns_choice(options)


@pytest.mark.parametrize("value", [0, -1, "first", True])
def test_a_start_epoch_returnn_refuses_is_a_config_error(value):
    with pytest.raises(ConfigError, match="start_epoch"):
        start_checkpoint.start_epoch_value(Config.from_dict({"start_epoch": value}))


def test_a_load_that_does_not_exist_is_a_config_error(tmp_path):
    config = Config.from_dict({"load": str(tmp_path / "nothing.005")})
    with pytest.raises(ConfigError, match="does not exist"):
        start_checkpoint.load_path(config)


# -------------------------------------------------------------------------------------- runs, RETURNN's and ours
# A RETURNN torch config that both run; get_model, the hooks and the epoch functions print what they get.
LOAD_CONFIG = """#!rnn.py
import sys

import torch
from torch import nn

backend = "torch"
task = "train"
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
start_epoch = 1
load = LOAD_PATH


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(9, 2)

    def forward(self, x):
        return self.linear(x)


def get_model(*, epoch, step, **_kwargs):
    print("CALL get_model", epoch, step, flush=True)
    return Model()


def checksum(model):
    return round(float(sum(p.detach().double().abs().sum() for p in model.parameters())), 6)


def double_the_bias(*, model, **_kwargs):
    print("CALL hook", type(model).__name__, checksum(model), flush=True)
    with torch.no_grad():
        model.linear.bias.mul_(2.0)


load_model_post_hooks = [double_the_bias]


def train_step(*, model, extern_data, **_kwargs):
    if "returnn.torch.engine" in sys.modules:  # RETURNN itself runs this config
        from returnn.frontend import get_run_ctx
    else:
        from framework import get_run_ctx
    x, y = (getattr(extern_data[k], "raw_tensor", extern_data[k]) for k in ("data", "classes"))
    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten().long())
    get_run_ctx().mark_as_loss(name="ce", loss=loss)


def epoch_start(*, epoch, step, model, dataset_name, **_kwargs):
    print("CALL epoch_start", epoch, step, checksum(model), dataset_name, flush=True)
"""


def _calls(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("CALL ")]


def _returnn(config, cwd):
    """``python -m returnn CONFIG`` in ``cwd``: the installed RETURNN, forked from the preloaded server (run_module,
    tools/devkit/preloaded.py: without importing torch and torch._dynamo again), its data loaders in its own process
    (torch_dataloader_opts num_workers 0, in a copy of the config for RETURNN only: its default worker is a spawned
    interpreter that imports torch and RETURNN, ~5 s of CPU for each dataset of a run). The CALL lines these tests
    compare, checksums and all, are a fresh RETURNN's with its default workers (compared on each config here)."""
    own = config.with_name(f"{config.stem}.returnn.config")
    own.write_text(config.read_text() + "\ntorch_dataloader_opts = {'num_workers': 0}\n")
    return run_module("returnn", str(own), cwd=str(cwd), timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.slow
@pytest.mark.parametrize("saved_as", ["returnn", "plain"])
def test_a_training_from_load_runs_as_returnns(tmp_path, saved_as):
    """start_epoch = 1 and load: RETURNN and rnn.py build the model with the checkpoint's epoch and step, load its
    parameters, call the hook with them, and start at epoch 1 with the checkpoint's global train step."""
    torch.manual_seed(3)
    init = torch.nn.Linear(9, 2)
    state = {f"linear.{k}": v for k, v in init.state_dict().items()}
    path = tmp_path / "init.pt"
    torch.save({"model": state, "epoch": 7, "step": 40} if saved_as == "returnn" else state, path)
    config = tmp_path / "load.config"
    config.write_text(LOAD_CONFIG.replace("LOAD_PATH", repr(str(path))))
    (tmp_path / "returnn").mkdir()
    (tmp_path / "here").mkdir()
    theirs = _returnn(config, tmp_path / "returnn")
    assert theirs.returncode == 0, theirs.stdout[-3000:] + theirs.stderr[-3000:]
    ours = run_rnn(str(config), "++report_html", "False", cwd=str(tmp_path / "here"), timeout=300)
    assert ours.returncode == 0, ours.stdout + ours.stderr
    calls = _calls(theirs.stdout)
    step = 40 if saved_as == "returnn" else 1
    assert calls[:2] == [
        f"CALL get_model {7 if saved_as == 'returnn' else 1} {step - 1}",
        f"CALL hook Model {round(float(sum(p.detach().double().abs().sum() for p in init.parameters())), 6)}",
    ]
    assert calls[2].startswith(f"CALL epoch_start 1 {step} ")
    mine = _calls(ours.stdout)
    assert mine[:3] == calls[:3]  # the loaded parameters, after the hook, start epoch 1
    # Later parameters differ with the data: Task12AXDataset here is not RETURNN's (other sequences)
    assert [line.rsplit(" ", 2)[0] for line in mine[3:]] == [line.rsplit(" ", 2)[0] for line in calls[3:]]


# A forward_step that marks nothing (no model_outputs): RETURNN hands each sequence to process_seq with no outputs
FORWARD_PART = """
forward_data = {'class': 'Task12AXDataset', 'num_seqs': 4, 'fixed_random_seed': 5}
from returnn.forward_iface import ForwardCallbackIface
class Callback(ForwardCallbackIface):
    def process_seq(self, *, seq_tag, outputs):
        print('CALL process_seq', len(getattr(outputs, 'data', outputs)), flush=True)
    def finish(self):
        print('CALL finish', flush=True)
forward_callback = Callback()
def forward_step(*, model, extern_data, **_kwargs):
    print('CALL forward_step', checksum(model), flush=True)
"""


@pytest.mark.slow
def test_a_forward_with_load_runs_as_returnns(tmp_path):
    """task forward with load = a RETURNN checkpoint: the same get_model arguments, hook call, and parameters forwarding."""
    torch.manual_seed(4)
    init = torch.nn.Linear(9, 2)
    path = tmp_path / "trained.012.pt"
    torch.save({"model": {f"linear.{k}": v for k, v in init.state_dict().items()}, "epoch": 12, "step": 96}, path)
    text = LOAD_CONFIG.replace("LOAD_PATH", repr(str(path)[: -len(".pt")]))
    text = text.replace('task = "train"', 'task = "forward"').replace("start_epoch = 1\n", "")
    text += FORWARD_PART
    config = tmp_path / "forward.config"
    config.write_text(text)
    (tmp_path / "returnn").mkdir()
    (tmp_path / "here").mkdir()
    theirs = _returnn(config, tmp_path / "returnn")
    assert theirs.returncode == 0, theirs.stdout[-3000:] + theirs.stderr[-3000:]
    ours = run_rnn(str(config), "++report_html", "False", cwd=str(tmp_path / "here"), timeout=300)
    assert ours.returncode == 0, ours.stdout + ours.stderr
    calls = _calls(theirs.stdout)
    assert calls[:2] == [
        "CALL get_model 12 95",
        f"CALL hook Model {round(float(sum(p.detach().double().abs().sum() for p in init.parameters())), 6)}",
    ]
    assert calls[2].startswith("CALL forward_step ") and calls[2] != calls[1].replace("hook Model", "forward_step")
    assert calls.count("CALL process_seq 0") == 4 and calls[-1] == "CALL finish"  # each sequence, no outputs
    assert _calls(ours.stdout) == calls


def _both(tmp_path, configs: list[str]) -> tuple[list[str], list[str]]:
    """The CALL lines of RETURNN and of rnn.py running the config texts ``configs`` one after the other, each in its
    own directory (a later run finds the checkpoints of the earlier ones); without checksums and dataset names,
    which differ with the data (Task12AXDataset here is not RETURNN's)."""
    results: dict[str, list[str]] = {"returnn": [], "here": []}
    for who in results:
        (tmp_path / who).mkdir()
    for i, text in enumerate(configs):
        config = tmp_path / f"c{i}.config"
        config.write_text(text)
        theirs = _returnn(config, tmp_path / "returnn")
        assert theirs.returncode == 0, theirs.stdout[-3000:] + theirs.stderr[-3000:]
        ours = run_rnn(str(config), "++report_html", "False", cwd=str(tmp_path / "here"), timeout=300)
        assert ours.returncode == 0, ours.stdout + ours.stderr
        for who, output in (("returnn", theirs.stdout), ("here", ours.stdout)):
            for line in _calls(output):
                words = line.split()
                keep = {"get_model": 4, "epoch_start": 4, "hook": 3, "forward_step": 2}.get(words[1], len(words))
                results[who].append(" ".join(words[:keep]))
    return results["returnn"], results["here"]


@pytest.mark.slow
def test_resume_and_forward_from_the_model_prefix_get_returnns_model_arguments(tmp_path):
    """2 epochs, a rerun with num_epochs = 3 that resumes the newest checkpoint, and a forward from the model prefix:
    get_model gets RETURNN's arguments each time (the loaded checkpoint's epoch and its global step - 1), and the
    resumed epoch starts at RETURNN's global step. 12 sequences of at most 4 per batch: 3 steps per epoch in both."""
    train = LOAD_CONFIG.replace("load = LOAD_PATH\n", "").replace("start_epoch = 1\n", "")
    more = train.replace("num_epochs = 2", "num_epochs = 3")
    # RETURNN forwards from the newest checkpoint up to num_epochs (epoch 2 with num_epochs = 2): the forward says 3
    forward = more.replace('task = "train"', 'task = "forward"') + FORWARD_PART
    theirs, ours = _both(tmp_path, [train, more, forward])
    assert theirs == [
        "CALL get_model 1 0",
        "CALL hook Model",
        "CALL epoch_start 1 0",
        "CALL epoch_start 2 3",
        "CALL get_model 2 5",  # resumed after epoch 2 (6 steps): RETURNN's _load_model
        "CALL hook Model",
        "CALL epoch_start 3 6",
        "CALL get_model 3 8",  # forward from the newest, epoch 3 (9 steps)
        "CALL hook Model",
        "CALL forward_step",
        *["CALL process_seq 0"] * 4,
        "CALL finish",
    ], theirs
    assert ours == theirs


@pytest.mark.slow
@pytest.mark.parametrize("saved_as", ["returnn", "plain"])
def test_a_training_from_import_model_train_epoch1_runs_as_returnns(tmp_path, saved_as):
    """import_model_train_epoch1: RETURNN builds the model with get_model(epoch=0, step=<checkpoint step> - 1), loads
    it, and trains epoch 1 on from the checkpoint's global step (1 for a plain state dict); so does rnn.py."""
    torch.manual_seed(5)
    init = torch.nn.Linear(9, 2)
    state = {f"linear.{k}": v for k, v in init.state_dict().items()}
    path = tmp_path / "imported.pt"
    torch.save({"model": state, "epoch": 7, "step": 40} if saved_as == "returnn" else state, path)
    text = LOAD_CONFIG.replace("load = LOAD_PATH\n", f"import_model_train_epoch1 = {str(path)!r}\n")
    theirs, ours = _both(tmp_path, [text.replace("start_epoch = 1\n", "")])
    step = 40 if saved_as == "returnn" else 1
    assert theirs[:3] == [f"CALL get_model 0 {step - 1}", "CALL hook Model", f"CALL epoch_start 1 {step}"], theirs
    assert ours == theirs


def test_a_numbered_load_without_a_checkpoint_to_resume_stops_with_returnns_reason(tmp_path):
    """RETURNN would continue at epoch 5 and read out/model.004.opt.pt (FileNotFoundError): a config error here."""
    path = tmp_path / "other.004.pt"
    torch.save({"model": {}, "epoch": 4, "step": 8}, path)
    config = tmp_path / "c.config"
    config.write_text(LOAD_CONFIG.replace("LOAD_PATH", repr(str(path))).replace("start_epoch = 1\n", ""))
    result = run_rnn(str(config), "++report_html", "False", cwd=str(tmp_path), timeout=300)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "FileNotFoundError" in result.stdout + result.stderr and "start_epoch = 1" in result.stdout + result.stderr


@pytest.mark.slow
def test_start_epoch_continues_from_the_epoch_before_it(tmp_path):
    """After 3 epochs, start_epoch = 3 continues from epoch 2's checkpoint (RETURNN's rule), not the newest; the
    global step and parameters are those of epoch 2 (the hook, called after every load, sees them)."""
    text = (
        LOAD_CONFIG.replace("load = LOAD_PATH\n", "")
        .replace("start_epoch = 1\n", "")
        .replace("num_epochs = 2", "num_epochs = 3")
    )
    config = tmp_path / "c.config"
    config.write_text(text)
    first = run_rnn(str(config), "++report_html", "False", cwd=str(tmp_path), timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    starts = [line for line in _calls(first.stdout) if line.startswith("CALL epoch_start")]
    assert len(starts) == 3
    again = run_rnn(str(config), "++start_epoch", "3", "++report_html", "False", cwd=str(tmp_path), timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    calls = _calls(again.stdout)
    assert calls[0] == f"CALL get_model 2 {int(starts[2].split()[3]) - 1}"  # epoch 2's, as RETURNN's _load_model
    # the hook sees epoch 2's parameters, where the first run's epoch 3 started; epoch 3 starts at its step
    assert calls[1] == f"CALL hook Model {starts[2].split()[4]}"
    assert calls[2].split()[:4] == starts[2].split()[:4]


# ------------------------------------------------------------------------------------- in process, planted bugs
IN_PROCESS = """
import torch
from torch import nn

train = {"class": "Task12AXDataset", "num_seqs": 8, "fixed_random_seed": 1}
extern_data = {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True}}
batch_size = 5000
max_seqs = 4
num_epochs = 1
optimizer = {"class": "sgd"}
learning_rate = 0.0
model = MODEL
start_epoch = 1
load = LOAD_PATH
debug_first_step_reruns = False
SEEN = []


def get_model(*, epoch, step, **_kwargs):
    SEEN.append(("get_model", epoch, step))
    return nn.Linear(9, 2)


def hook(*, model, **_kwargs):
    SEEN.append(("hook", model.bias.detach().clone()))
    with torch.no_grad():
        model.bias.add_(1.0)


load_model_post_hooks = [hook]


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    SEEN.append(("train_step", model.bias.detach().clone()))
    loss = nn.functional.cross_entropy(model(extern_data["data"]).flatten(0, 1), extern_data["classes"].flatten().long())
    run_ctx.mark_as_loss(name="ce", loss=loss)
"""


def _run_in_process(tmp_path, hooks_called: bool = True):
    from framework.assembly import Engine
    from framework.base.config import load_config

    bias = torch.tensor([0.25, -0.5])
    path = tmp_path / "init.pt"
    torch.save({"model": {"weight": torch.zeros(2, 9), "bias": bias}, "epoch": 3, "step": 10}, path)
    text = IN_PROCESS.replace("MODEL", repr(str(tmp_path / "out" / "model"))).replace("LOAD_PATH", repr(str(path)))
    config_path = tmp_path / "c.py"
    config_path.write_text(text)
    config = load_config([str(config_path)])
    engine = Engine(config)
    engine.run("train")
    return config.get("SEEN"), engine.state, bias


def test_a_training_from_load_gets_its_parameters_step_and_the_hook(tmp_path):
    seen, state, bias = _run_in_process(tmp_path)
    assert seen[0] == ("get_model", 3, 9)  # the checkpoint's epoch and step - 1, as RETURNN's _load_model
    assert seen[1][0] == "hook" and torch.equal(seen[1][1], bias)  # the hook sees the loaded parameters
    assert seen[2][0] == "train_step" and torch.equal(seen[2][1], bias + 1)  # and trains what it made
    assert state.epoch == 1 and state.global_step == 10 + 2  # epoch 1, the global step continued: 2 steps


def test_a_planted_bug_hooks_not_called_fails_the_check(tmp_path, monkeypatch):
    monkeypatch.setattr(start_checkpoint, "call_post_hooks", lambda config, model: None)
    seen, _, bias = _run_in_process(tmp_path)
    assert seen[1][0] != "hook"  # the check above would fail
    assert torch.equal(seen[1][1], bias)  # the parameters are loaded without the hook's change
