"""The data-bottleneck warning's advice fits the measurement: workers only on cores that training leaves free,
and with workers, a comparison with batches built without them."""

import re

import pytest

from conftest import run_rnn, tiny_config_with
from framework.training.threads import allowed_cpus

# get_batch sleeps SECONDS, in the worker processes only (WORKERS_ONLY) or wherever it runs: long enough that
# the steps wait for data even when training itself is slowed down by other processes.
SLOW_DATASET = """
import time as _time
import torch as _torch
from framework.datasets import GaussianClustersDataset
class SlowDataset(GaussianClustersDataset):
    def get_batch(self, indices):
        if not {workers_only} or _torch.utils.data.get_worker_info() is not None:
            _time.sleep({seconds})
        return super().get_batch(indices)
train = dict(train, num_seqs=480, **{{'class': SlowDataset}})  # about 24 steps: a median past the prefetched batches
"""
# Workers get the config's dataset class by fork, as rnn.py's do on Linux (the tests' runs start from a forkserver).
FORK = "'multiprocessing_context': 'fork'"
pytestmark = pytest.mark.slow  # training runs whose data takes seconds on purpose
WARNING = re.compile(r"Data loading is a bottleneck: \d+% of epoch 1's typical step time .* To fix it, (.*)\.$", re.M)


def _advice(tmp_path, workers: int, seconds: float, workers_only: bool) -> str:
    config = tiny_config_with(tmp_path, SLOW_DATASET.format(workers_only=workers_only, seconds=seconds))
    result = run_rnn(
        config,
        *("++num_epochs", "1", "++model", "None", "++torch_dataloader_opts", f"{{'num_workers': {workers}, {FORK}}}"),
        cwd=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    found = WARNING.search(result.stdout)
    assert found, result.stdout
    return found.group(1)


def test_workers_slower_than_the_process_itself_are_named_with_both_times(tmp_path):
    advice = _advice(tmp_path, workers=1, seconds=0.08, workers_only=True)
    built, waited = map(
        float,
        re.search(
            r"without workers a batch takes ([\d.]+) ms .*less than the ([\d.]+) ms each step waited", advice
        ).groups(),
    )
    # The worker sleeps 80 ms a batch; on a loaded machine slower steps overlap part of it (58.8 ms seen).
    assert built < waited and waited >= 40
    assert advice.startswith("use fewer workers") and "num_workers=0 is faster here" in advice


def test_workers_that_help_get_more_only_while_cores_are_left(tmp_path):
    cores = allowed_cpus()[0]
    # 200 ms a batch: two workers still leave each step waiting ~100 ms, whatever a loaded machine adds to a step.
    advice = _advice(tmp_path, workers=2, seconds=0.2, workers_only=False)
    assert "fewer workers" not in advice  # two workers halve the wait for a batch that takes 200 ms anywhere
    if cores > 3:
        assert re.search(rf"use more workers than num_workers=2 \(at most {cores - 1} on {cores} cores\)", advice)
    else:
        assert advice.startswith("make the dataset's get_batch faster")
        assert f"num_workers=2 already uses the {cores} cores" in advice
