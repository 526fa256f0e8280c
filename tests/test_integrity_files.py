"""The model directory cannot be turned against the user, the lock binds for the whole run, and damaged or odd
input files get one paragraph that names them.

Real symlinks, hard links, flocks, deleted directories, /dev/full, file size limits and HDF files.
"""

import fcntl
import os
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import h5py
import numpy as np
import pytest
import torch

from conftest import TINY_CONFIG, run_rnn, run_script, start_rnn, tiny_config_with, write_config
from framework.base import disk
from framework.base.errors import DataError, PlantedLinkError
from framework.datasets.hdf import HDFDataset, write_hdf
from framework.training import checkpoint
from framework.training.lr_file import write_lr_file


def _victim(tmp_path) -> str:
    path = tmp_path / "victim.txt"
    path.write_text("the user's own file\n")
    return str(path)


def _assert_untouched(victim: str) -> None:
    with open(victim) as f:
        assert f.read() == "the user's own file\n"


# ----------------------------------------------------------------------------------- planted links
@pytest.mark.parametrize("planted", ["model.lock", "train.log"])
def test_a_planted_link_at_a_file_the_run_creates_stops_it_naming_the_link(tmp_path, planted):
    victim, directory = _victim(tmp_path), tmp_path / "models"
    directory.mkdir()
    os.symlink(victim, directory / planted)
    result = run_rnn(TINY_CONFIG, "++model", str(directory / "model"), "++log", str(directory / "train.log"))
    assert result.returncode == 2
    assert f"ERROR: {directory / planted} (" in result.stderr and f"is a symbolic link to {victim!r}" in result.stderr
    assert f"(rm {directory / planted})" in result.stderr and "Traceback" not in result.stderr
    _assert_untouched(victim)
    assert os.path.islink(directory / planted) and not os.path.exists(directory / "model.001.pt")


def test_planted_links_at_probe_and_temporary_files_are_refused_and_their_targets_untouched(tmp_path):
    victim = _victim(tmp_path)
    probe, model = tmp_path / f".write-probe-{os.getpid()}", str(tmp_path / "model.002.pt")
    os.symlink(victim, probe)
    with pytest.raises(PlantedLinkError, match=f"{probe} \\(the write probe of the model directory\\) is a symbolic"):
        disk.probe_directory(str(tmp_path), "model directory", "model")
    os.symlink(victim, f"{model}.tmp{os.getpid()}")
    with pytest.raises(PlantedLinkError, match="a checkpoint being written\\) is a symbolic link"):
        checkpoint.save_checkpoint(model, {"model": {"w": torch.ones(3)}, "epoch": 2})
    lr_file = str(tmp_path / "lr.txt")
    os.symlink(victim, f"{lr_file}.tmp{os.getpid()}")
    with pytest.raises(PlantedLinkError, match="the learning_rate_file\\) is a symbolic link"):
        write_lr_file(lr_file, {1: 0.1}, {})
    _assert_untouched(victim)
    assert not os.path.exists(model) and not os.path.exists(lr_file)


def test_a_stale_temporary_file_of_this_pid_is_replaced_not_written_through(tmp_path):
    path = str(tmp_path / "model.001.pt")
    shutil.copy(_victim(tmp_path), f"{path}.tmp{os.getpid()}")  # a regular file: left by a killed run of this PID
    checkpoint.save_checkpoint(path, {"model": {"w": torch.ones(3)}, "epoch": 1})
    assert checkpoint.load_checkpoint(path)["epoch"] == 1 and sorted(os.listdir(tmp_path)) == [
        "model.001.pt",
        "victim.txt",
    ]


def test_a_hard_linked_or_directory_lock_is_refused(tmp_path):
    victim, prefix = _victim(tmp_path), str(tmp_path / "model")
    os.link(victim, f"{prefix}.lock")
    result = run_rnn(TINY_CONFIG, "++model", prefix)
    assert result.returncode == 2 and f"{prefix}.lock (the lock of this model prefix) is a file with 2 names" in (
        result.stderr
    )
    _assert_untouched(victim)
    os.remove(f"{prefix}.lock")
    os.mkdir(f"{prefix}.lock")
    result = run_rnn(TINY_CONFIG, "++model", prefix)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"ERROR: {prefix}.lock (the lock of this model prefix) is a directory" in result.stderr


def test_what_a_lock_file_says_about_its_holder_is_printed_with_control_characters_escaped(tmp_path):
    prefix = str(tmp_path / "model")
    fd = os.open(f"{prefix}.lock", os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"pid 4242 \x1b[2J\x1b]0;pwned\x07 \xff\xfe garbage")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by this test process
        result = run_rnn(TINY_CONFIG, "++model", prefix)
    finally:
        os.close(fd)
    assert result.returncode == 2
    assert "Another run is training model" in result.stderr and "\\x1b[2J\\x1b]0;pwned\\x07" in result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr


# ---------------------------------------------------------------------------- the lock, all run long
@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
@pytest.mark.parametrize("removed", ["directory", "lock file"])
def test_a_run_whose_model_directory_or_lock_is_removed_stops_before_its_next_checkpoint(tmp_path, removed):
    directory, marker, fifo = tmp_path / "models", str(tmp_path / "holding"), str(tmp_path / "release")
    os.mkfifo(fifo)
    config = tiny_config_with(
        tmp_path,
        f"\n_held = []\ndef _hold(state):\n    if not _held:\n        _held.append(1)\n"
        f"        open({marker!r}, 'w').close()\n        open({fifo!r}).read()\ncallbacks = {{'step_start': _hold}}\n",
    )
    log_file = tmp_path / "train.log"
    run = start_rnn(config, "++model", str(directory / "model"), "++log", str(log_file))
    try:
        _wait_for(lambda: os.path.exists(marker), run)
        if removed == "directory":
            shutil.rmtree(directory)
        else:
            os.remove(directory / "model.lock")
        with open(fifo, "w") as f:
            f.write("go on")
        _, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 1, stderr
    problem = (
        f"the model directory {directory} was deleted"
        if removed == "directory"
        else f"its lock file {directory / 'model.lock'} was deleted or replaced"
    )
    message = f"ERROR: This run no longer holds the lock of model {str(directory / 'model')!r}: {problem} while it ran."
    assert message in stderr and f"stopped before writing {directory / 'model.001.pt'}" in stderr
    assert message in log_file.read_text()
    assert not os.path.exists(directory / "model.001.pt") and os.path.exists(directory) == (removed != "directory")


def _wait_for(condition, process, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the run ended early: {process.communicate()}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# ------------------------------------------------------------------------------------- log files
def test_a_log_file_that_cannot_be_written_is_reported_once_on_stderr_and_the_run_goes_on(tmp_path):
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), "++log", "/dev/full", "++num_epochs", "2")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines() == [
        "WARNING: the log file /dev/full cannot be written (No space left on device). The run goes on and stdout "
        "shows everything; the log file misses the lines from here on until writing works again, and a line there "
        "will then say how many are missing. This is reported once."
    ]
    assert f"Saved checkpoint {tmp_path / 'model.002.pt'}" in result.stdout


def test_a_log_file_that_could_not_be_written_for_a_while_says_how_many_lines_are_missing(tmp_path):
    log_file = tmp_path / "train.log"
    script = write_config(
        tmp_path,
        "import os, resource, signal\n"
        "from framework.base import log\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead\n"
        f"log.setup(3, {str(log_file)!r}, stdout=False)\n"
        "log.v3('before ' + 'x' * 2000)  # the limit (this file's size) leaves room for the warning on stderr\n"
        "_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize({str(log_file)!r}), hard))\n"
        "for i in range(3):\n"
        "    log.v3(f'lost {i}')\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))\n"
        "log.v3('after')\n",
        name="limited_log.py",
    )
    result = run_script(script)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("WARNING: the log file") == 1 and "(File too large)" in result.stderr
    # each line of the file starts with its wall-clock time ("2026-11-27 01:23:55 ")
    lines = [re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", "", line) for line in log_file.read_text().splitlines()]
    assert lines == [
        f"before {'x' * 2000}",
        "[framework] 3 log lines are missing here: writing failed (File too large).",
        "after",
    ]


# --------------------------------------------------------------------------------------- inputs
def _hdf(path: str, num_seqs: int = 6) -> None:
    rng = np.random.default_rng(0)
    data = [rng.normal(size=(3, 4)).astype("float32") for _ in range(num_seqs)]
    classes = [rng.integers(0, 3, size=(3,)) for _ in range(num_seqs)]
    write_hdf(path, {"data": data, "classes": classes}, [f"seq-{i}" for i in range(num_seqs)], "data", {"classes": 3})


def test_an_hdf_file_missing_a_targets_key_is_named_with_the_key(tmp_path):
    path = str(tmp_path / "train.hdf")
    _hdf(path)
    with h5py.File(path, "r+") as f:
        del f["targets/data/classes"]
    config = tiny_config_with(tmp_path, f"\ntrain = {{'class': 'HDFDataset', 'files': [{path!r}]}}\n")
    result = run_rnn(config, "++model", str(tmp_path / "model"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"HDFDataset: {path} is not a complete RETURNN HDF file: key 'classes' is missing in targets/data." in (
        result.stderr
    )


def test_hdf_files_carry_checksums_and_a_damaged_one_names_file_key_and_sequence(tmp_path):
    path = str(tmp_path / "forward.hdf")
    _hdf(path)
    with h5py.File(path, "r") as f:
        assert f["inputs"].fletcher32 and f["targets/data/classes"].fletcher32 and f["seqLengths"].fletcher32
        chunk = f["inputs"].id.get_chunk_info(0)
    assert HDFDataset(path).get_seq(2)["data"].shape == (3, 4)
    with open(path, "r+b") as f:
        f.seek(chunk.byte_offset + 20)
        byte = f.read(1)
        f.seek(chunk.byte_offset + 20)
        f.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(DataError) as error:
        HDFDataset(path).get_seq(2)
    assert f"HDFDataset: {path} cannot be read at key 'data' (inputs), sequence 2 ('seq-2')" in str(error.value)
    assert "The file is damaged" in str(error.value)


def test_forward_outputs_read_back_are_verified(tmp_path):
    prefix = str(tmp_path / "model")
    assert run_rnn(TINY_CONFIG, "++model", prefix, "++num_epochs", "1").returncode == 0
    result = run_rnn(TINY_CONFIG, "++model", prefix, "++task", "forward", "++forward_data", "dev")
    assert result.returncode == 0, result.stderr
    path = f"{prefix}.001.forward.npz"
    with np.load(path) as outputs:
        logits = outputs["logits"]
    with open(path, "r+b") as f:  # a bit of the logits record: the npz (zip) container's CRC-32 covers it
        data = bytearray(f.read())
        data[data.index(logits.tobytes()[:16]) + 5] ^= 0x04
        f.seek(0)
        f.write(data)
    with np.load(path) as outputs, pytest.raises(Exception, match="Bad CRC-32"):
        outputs["logits"]


def test_a_numpy_dataset_of_empty_lists_says_so(tmp_path):
    config = tiny_config_with(tmp_path, "\ntrain = {'class': 'NumpyDataset', 'arrays': {'data': [], 'classes': []}}\n")
    result = run_rnn(config, "++model", str(tmp_path / "model"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "NumpyDataset: the lists of 'data', 'classes' are empty: a dataset needs at least one sequence" in (
        result.stderr
    )


# Every output a training run can write, on at once (rank 0 of one process; forward outputs are forward's).
ALL_OUTPUTS = [
    *("++num_epochs", "1", "++checkpoint_every_n_steps", "4", "++learning_rate_file", "lr.txt"),
    *("++tensorboard_dir", "tb", "++debug_grad_summaries", "4", "++torch_profile", "True", "++cprofile", "run.prof"),
    *("++debug_fingerprint_file", "fp.jsonl", "++debug_fingerprint_steps", "100", "++watch_memory", "True"),
]


def _written(directory) -> list[str]:
    """What a run left in ``directory``: every file and directory, relative, parents first."""
    found = []
    for parent, dirs, files in os.walk(directory):
        found += [os.path.relpath(os.path.join(parent, name), directory) for name in sorted(dirs) + sorted(files)]
    return found


@pytest.mark.slow  # one real run per path the run writes
def test_no_output_of_a_run_with_every_output_on_follows_a_link_planted_at_its_path(tmp_path):
    def run(directory):
        directory.mkdir()
        return run_rnn(TINY_CONFIG, *ALL_OUTPUTS, "++model", "m", "++log", "train.log", cwd=str(directory))

    clean = run(tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    written = _written(tmp_path / "clean")
    for expected in ("m.001.pt", "train.log", "lr.txt", "fp.jsonl", "run.prof", "profile/trace.json"):
        assert expected in written  # the outputs are on; an option that stopped writing would go unnoticed
    assert {"tb", "tb/profile", "tb/hparams"} <= set(written)
    # Written and removed again, so not left behind: the lock and the mid-epoch checkpoint (superseded). Not planted
    # at: event and trace files named by time, process and (event files) a random part, never the same name twice.
    unique = re.compile(r"tfevents|\.pt\.trace\.json$")
    planted_at = [path for path in written if not unique.search(path)] + ["m.lock", "m.interrupted.pt"]

    def planted_run(k: int, planted: str) -> None:
        victim_file, victim_dir = tmp_path / f"victim{k}.txt", tmp_path / f"victim{k}"
        victim_file.write_text("the user's own file\n")
        victim_dir.mkdir()
        directory = tmp_path / f"planted{k}"
        os.makedirs(directory / os.path.dirname(planted), exist_ok=True)
        is_dir = os.path.isdir(tmp_path / "clean" / planted)
        os.symlink(victim_dir if is_dir else victim_file, directory / planted)
        result = run_rnn(TINY_CONFIG, *ALL_OUTPUTS, "++model", "m", "++log", "train.log", cwd=str(directory))
        # Refused with the path named (a link, or a learning_rate_file read at startup whose content is not one), or
        # written beside it (a finished file renamed over the link): never through it.
        refused = result.returncode == 2 and f"{planted} " in result.stderr
        assert refused or result.returncode == 0, (planted, result.stderr)
        assert victim_file.read_text() == "the user's own file\n" and os.listdir(victim_dir) == [], planted
        if is_dir:  # a directory the run writes into is never a link
            assert refused and "is a symbolic link" in result.stderr, (planted, result.stderr)

    with ThreadPoolExecutor(2) as pool:  # two runs at a time: each is mostly one process's startup
        list(pool.map(planted_run, range(len(planted_at)), planted_at))


def test_an_empty_train_dataset_is_one_paragraph_saying_what_to_check(tmp_path):
    empty = "{'class': 'GaussianClustersDataset', 'split': 'train', 'num_seqs': 0, 'dim': 4, 'num_classes': 3}"
    result = run_rnn(TINY_CONFIG, "++train", empty, "++model", str(tmp_path / "m"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "ERROR: The train dataset (GaussianClustersDataset, 0 sequences) delivered no batches in epoch 1" in (
        result.stderr
    )
