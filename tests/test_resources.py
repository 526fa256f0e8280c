"""Memory, time, profiling and TensorBoard, checked with real runs and tensorboard's own reader."""

import cProfile
import json
import os
import pstats
import re

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from conftest import ROOT, TINY_CONFIG, run_rnn, run_script, tiny_config_with
from framework.training.threads import allowed_cpus

LEAKY = """
keep_losses = True
history = []
_train_step = train_step


def train_step(*, run_ctx, **kwargs):
    _train_step(run_ctx=run_ctx, **kwargs)
    if keep_losses and run_ctx.train_flag:
        history.append(run_ctx.losses["ce"].loss)
"""


@pytest.mark.parametrize("keep_losses", [True, False])
def test_leak_warning_for_stored_losses_and_silence_without(tmp_path, keep_losses):
    config = tiny_config_with(tmp_path, LEAKY)
    result = run_rnn(config, "++keep_losses", str(keep_losses), "++debug_leak_check_interval", "2", "++num_epochs", "4")
    assert result.returncode == 0, result.stderr
    warning = re.search(
        r"Possible memory leak: live tensors grew by \d+ in \d+ steps .*: \+\d+ of shape \[\] float32 "
        r"with grad_fn NllLossBackward0; \d+ of them hold an autograd graph\. .*loss\.item\(\)",
        result.stdout,
    )
    assert bool(warning) == keep_losses, result.stdout
    assert result.stdout.count("Possible memory leak") == int(keep_losses)  # once


# A model that samples noise in eval mode too (like a VAE): tracing its graph draws random numbers.
NOISY_MODEL = (
    "\nimport torch\n"
    "class Noise(nn.Module):\n"
    "    def forward(self, x):\n"
    "        return x + 0.1 * torch.randn_like(x)\n"
    "def get_model(**_kwargs):\n"
    "    return nn.Sequential(nn.Linear(4, hidden), Noise(), nn.ReLU(), nn.Linear(hidden, 3))\n"
)


@pytest.mark.slow  # seconds of work: the full suite runs it, the fast subset does not
def test_tensorboard_scalars_histograms_graph_images_and_hparams(tmp_path):
    config = tiny_config_with(
        tmp_path,
        NOISY_MODEL
        + (
            "\n_train_step = train_step\n"
            "def train_step(*, model, extern_data, run_ctx, **kwargs):\n"
            "    _train_step(model=model, extern_data=extern_data, run_ctx=run_ctx, **kwargs)\n"
            "    if run_ctx.train_flag and run_ctx.step == 3:\n"
            "        run_ctx.log_image('inputs', extern_data['data'][None] / 10 + 0.5)\n"
            "        run_ctx.log_scalar('mean_input', extern_data['data'].mean())\n"
        ),
    )
    tb = tmp_path / "tb"
    result = run_rnn(
        config, "++tf_log_dir", str(tb), "++debug_grad_summaries", "5", "++gradient_clip_global_norm", "5.0"
    )
    assert result.returncode == 0, result.stderr
    events = EventAccumulator(str(tb), size_guidance={"scalars": 0, "histograms": 0, "images": 0})
    events.Reload()
    tags = events.Tags()
    ce = events.Scalars("train/ce")
    assert [e.step for e in ce] == list(range(20))  # every step of 2 epochs x 10 steps
    for tag in ("train/learning_rate", "train/step_time_sec", "train/grad_norm", "memory/rss_mb", "train/mean_input"):
        assert tag in tags["scalars"], tag
    assert [e.step for e in events.Scalars("epoch/dev/ce")] == [1, 2]
    dev_ce = float(re.findall(r"Epoch 2 evaluation: dev: ce (\S+)", result.stdout)[0])
    assert events.Scalars("epoch/dev/ce")[-1].value == pytest.approx(dev_ce, abs=1e-3)
    assert {"params/0.weight", "grads/0.weight"} <= set(tags["histograms"])
    assert [e.step for e in events.Scalars("grad_norm/0.weight")] == [0, 5, 10, 15]
    assert tags["images"] == ["train/inputs"] and tags["graph"]
    (image,) = events.Images("train/inputs")  # the batch [16, 4] as a gray image [1, 16, 4] (CHW)
    assert (image.step, image.width, image.height) == (3, 4, 16)
    for histogram in events.Histograms("params/0.weight") + events.Histograms("grads/0.weight"):
        h = histogram.histogram_value  # Linear(4, hidden=8).weight
        assert h.num == 32 and sum(h.bucket) == 32 and h.min <= h.sum / h.num <= h.max
    assert [e.step for e in events.Histograms("grads/0.weight")] == [0, 5, 10, 15]
    assert [e.step for e in events.Scalars("grad_health/update_ratio/0.weight")] == [0]  # debug_grad_health default
    # tracing the graph runs the model (dropout): training must be the same as without TensorBoard
    (tmp_path / "plain").mkdir()
    without = run_rnn(tiny_config_with(tmp_path / "plain", NOISY_MODEL), "++gradient_clip_global_norm", "5.0")
    scores = re.compile(r"Epoch \d train: [^,]*")
    assert scores.findall(without.stdout) == scores.findall(result.stdout) and len(scores.findall(result.stdout)) == 2
    hparams = EventAccumulator(str(tb / "hparams"))
    hparams.Reload()
    assert "hparam/dev_ce" in hparams.Tags()["scalars"]
    assert hparams.Scalars("hparam/dev_ce")[0].value == pytest.approx(dev_ce, abs=1e-3)
    content = {tag: HParamsPluginData.FromString(c) for tag, c in hparams.PluginTagToContent("hparams").items()}
    table = content["_hparams_/session_start_info"].session_start_info.hparams  # the HPARAMS tab's row of this run
    assert table["learning_rate"].number_value == 0.01 and table["hidden"].number_value == 8
    assert table["tf_log_dir"].string_value == str(tb) and table["debug_grad_summaries"].number_value == 5
    metrics = [m.name.tag for m in content["_hparams_/experiment"].experiment.metric_infos]
    assert sorted(metrics) == ["hparam/dev_ce", "hparam/dev_fer", "hparam/train_ce", "hparam/train_fer"]


@pytest.mark.slow  # seconds of work: the full suite runs it, the fast subset does not
def test_an_untraceable_model_graph_is_skipped_quietly_not_a_crash(tmp_path):
    config = tiny_config_with(
        tmp_path,
        (
            "\nclass DictModel(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.linear = nn.Linear(4, 3)\n"
            "    def forward(self, batch):\n"
            "        return self.linear(batch['data'])\n"
            "def get_model(**_kwargs):\n"
            "    return DictModel()\n"
            "def train_step(*, model, extern_data, run_ctx, **_kwargs):\n"
            "    logits = model(extern_data)\n"
            "    run_ctx.mark_as_loss(name='ce', loss=nn.functional.cross_entropy(logits, extern_data['classes']))\n"
        ),
    )
    result = run_rnn(config, "++tensorboard_dir", str(tmp_path / "tb"), "++num_epochs", "1", "++log_verbosity", "5")
    assert result.returncode == 0, result.stderr
    # Many models take a dict or keywords: not the run's problem, so a detail of the verbose log, and torch's own
    # messages from the failed trace are not shown.
    assert "TensorBoard: no model graph: tracing with the first batch failed (tried model(data)" in result.stdout
    quiet = run_rnn(config, "++tensorboard_dir", str(tmp_path / "tb2"), "++num_epochs", "1")
    assert "model graph" not in quiet.stdout + quiet.stderr and "Error occurs" not in quiet.stdout + quiet.stderr
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert "train/ce" in events.Tags()["scalars"]


def test_torch_profile_writes_a_trace_with_named_regions_and_checkpoints_still_work(tmp_path):
    result = run_rnn(
        TINY_CONFIG,
        "++torch_profile",
        "{'wait': 1, 'warmup': 1, 'active': 2}",
        "++model",
        str(tmp_path / "m"),
        "++cprofile",
        str(tmp_path / "run.prof"),
    )
    assert result.returncode == 0, result.stderr
    trace = json.loads((tmp_path / "profile" / "trace.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {"forward", "backward", "optimizer", "data"} <= names
    assert any(name and name.startswith("aten::") for name in names)
    assert re.search(r"Top ops by self CPU time:\n-+", result.stdout)
    assert os.path.exists(tmp_path / "m.002.pt")
    stats = pstats.Stats(str(tmp_path / "run.prof"))
    functions = {f"{os.path.basename(file)}:{name}" for file, _, name in stats.stats}
    assert "engine.py:train_epoch" in functions and "config.py:load_config" not in functions  # loop, not setup


@pytest.mark.slow
def test_python_m_cprofile_works(tmp_path):
    # cProfile's main runs rnn.py as __main__ in globals of its own, profiled from the first line: run as
    # `python -m cProfile` does it, forked with torch imported (the imports are not what is tested).
    out = tmp_path / "whole.prof"
    result = run_script(
        cProfile.__file__, "-o", str(out), os.path.join(ROOT, "rnn.py"), TINY_CONFIG, "++num_epochs", "1"
    )
    assert result.returncode == 0, result.stderr
    assert any(name == "train_epoch" for _, _, name in pstats.Stats(str(out)).stats)


def test_memory_and_time_per_step_and_per_epoch(tmp_path):
    result = run_rnn(TINY_CONFIG, "++torch_log_memory_usage", "True", "++log_verbosity", "5", "++num_epochs", "1")
    assert result.returncode == 0, result.stderr
    assert re.search(
        r"^ep 1 train, step 3, .*complete 40\.00%, time data [\d.]+ms forward [\d.]+ms backward "
        r"[\d.]+ms optimizer [\d.]+ms, mem_usage:rss [\d.]+MB$",
        result.stdout,
        re.MULTILINE,
    )
    assert re.search(
        r"^Epoch 1 training steps took [\d.]+ sec in all: data \d+%, forward \d+%, backward \d+%, optimizer \d+%$",
        result.stdout,
        re.MULTILINE,
    )
    assert re.search(r"^Epoch 1 memory: rss [\d.]+MB \(peak [\d.]+MB\)$", result.stdout, re.MULTILINE)
    assert "bottleneck" not in result.stdout


def test_slow_data_loading_is_flagged_with_the_fix(tmp_path):
    config = tiny_config_with(
        tmp_path,
        (
            "\nimport time as _time\n"
            "from framework.datasets import GaussianClustersDataset\n"
            "class SlowDataset(GaussianClustersDataset):\n"
            "    def get_batch(self, indices):\n"
            "        _time.sleep(0.02)\n"
            "        return super().get_batch(indices)\n"
            "train = dict(train, **{'class': SlowDataset})\n"
        ),
    )
    result = run_rnn(config, "++num_epochs", "1")
    assert result.returncode == 0, result.stderr
    advice = re.search(
        r"Data loading is a bottleneck: \d+% of epoch 1's typical step time \([\d.]+ ms per step, typically\) is "
        r"spent "
        r"waiting for batches\. To fix it, .*torch_dataloader_opts = \{'num_workers': (\d+)",
        result.stdout,
    )
    assert advice and 1 <= int(advice.group(1)) < allowed_cpus()[0]  # never more workers than the cores left free


@pytest.mark.slow
def test_watch_memory_reports_main_process_and_dataloader_workers(tmp_path):
    log_file = tmp_path / "train.log"
    result = run_rnn(
        TINY_CONFIG,
        "++watch_memory",
        "True",
        "++torch_dataloader_opts",
        "{'num_workers': 2}",
        "++step_sleep",
        "0.1",
        "++num_epochs",
        "1",
        "++log",
        str(log_file),
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("watch_memory: ")]
    assert any(re.fullmatch(r"watch_memory: main: rss [\d.]+MB pss [\d.]+MB uss [\d.]+MB", line) for line in lines)
    children = {m.group(1) for line in lines if (m := re.match(r"watch_memory: child (\d+): rss", line))}
    assert len(children) >= 2, lines  # the two DataLoader workers
    assert "watch_memory: main: rss" in log_file.read_text()
