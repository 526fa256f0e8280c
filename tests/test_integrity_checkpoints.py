"""A checkpoint that loads is the checkpoint that was written: damaged, unreadable, older, newer and non-finite
checkpoints are refused with one paragraph (exit 2) that names the newest usable one; nothing is changed.

Real runs write the checkpoints; the damage is real (flipped bits, chmod, torch.save of edited states).
"""

import os
import shlex
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch
from torch import nn

from conftest import ROOT, TINY_CONFIG, run_rnn, run_script
from framework.base.config import load_config
from framework.base.errors import CheckpointError
from framework.training import checkpoint, checkpoint_integrity
from framework.training.preload import preload_from_files

RNN = os.path.join(ROOT, "rnn.py")


@pytest.fixture(scope="module")
def trained_once(tmp_path_factory) -> str:
    """The directory of one real run's checkpoints of epochs 1 and 2 (prefix ``model``), trained once per module."""
    directory = tmp_path_factory.mktemp("trained")
    result = run_rnn(TINY_CONFIG, "++model", str(directory / "model"), "++num_epochs", "2")
    assert result.returncode == 0, result.stderr
    return str(directory)


@pytest.fixture
def trained(trained_once, tmp_path) -> str:
    """The prefix of a copy, in this test's directory, of everything that real run wrote: each test damages its own."""
    shutil.copytree(trained_once, tmp_path, dirs_exist_ok=True)
    return str(tmp_path / "model")


def _flip_bit_in_tensor_data(path: str) -> None:
    """Flip one bit in the values of the largest tensor (the end of its record: past the record's header)."""
    with zipfile.ZipFile(path) as archive:
        largest = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        start = data.index(b"PK\x07\x08", largest.header_offset) - 1  # its last byte, before the data descriptor
        data[start] ^= 0x10
        f.seek(0)
        f.write(data)


def _one_paragraph(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.slow  # 400 loads of a flipped checkpoint
def test_bit_flips_in_a_real_checkpoint_are_refused_or_harmless_and_plain_torch_load_is_not(trained):
    tool = os.path.join(ROOT, "tools", "checkpoint-bitflips.py")
    verified = run_script(tool, f"{trained}.002.pt", "--flips", "200", "--seed", "3")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    counts = {line.split()[0]: int(line.split()[-1]) for line in verified.stdout.splitlines()[1:4]}
    assert counts["refused"] + counts["harmless"] == 200 and counts["refused"] >= 150, verified.stdout
    assert "loaded changed     0" in verified.stdout
    unverified = run_script(tool, f"{trained}.002.pt", "--flips", "200", "--seed", "3", "--unverified")
    assert unverified.returncode == 1 and "loaded changed     0" not in unverified.stdout  # what the tool would see


def test_a_damaged_newest_checkpoint_is_refused_naming_the_newest_intact_one_and_how_to_resume(trained):
    newest = f"{trained}.002.pt"
    _flip_bit_in_tensor_data(newest)
    with open(newest, "rb") as f:
        damaged = f.read()
    result = run_rnn(TINY_CONFIG, "++model", trained, "++num_epochs", "3")
    assert result.returncode == 2
    message = _one_paragraph(result.stderr)
    assert message.startswith(f"ERROR: Checkpoint {newest} is damaged: record archive/data/")
    assert "fails its CRC-32 check" in message and "It was not loaded and was left untouched." in message
    assert f"The newest intact checkpoint is {trained}.001.pt (epoch 1)." in message
    assert f"(mv {newest} {newest}.damaged) and run the same command again" in message
    assert "Resuming from" not in result.stdout and not os.path.exists(f"{trained}.003.pt")
    with open(newest, "rb") as f:
        assert f.read() == damaged

    os.rename(newest, f"{newest}.damaged")  # the advice, followed
    resumed = run_rnn(TINY_CONFIG, "++model", trained, "++num_epochs", "3")
    assert resumed.returncode == 0 and f"Resuming from {trained}.001.pt: epoch 1" in resumed.stdout, resumed.stderr


@pytest.mark.parametrize(
    "change, expected",
    [
        ("older", "lacks 'rng' (the random generators' states), 'learning_rate_control' (the learning rates"),
        ("newer", "holds entries this version of the framework does not know: 'ema_model'."),
    ],
)
def test_older_and_newer_checkpoint_formats_say_what_is_missing_or_extra_and_what_happens(trained, change, expected):
    newest = f"{trained}.002.pt"
    saved = torch.load(newest, weights_only=True)
    if change == "older":
        del saved["rng"], saved["learning_rate_control"]
    else:
        saved["ema_model"] = dict(saved["model"])
    torch.save(saved, newest)
    result = run_rnn(TINY_CONFIG, "++model", trained, "++num_epochs", "3")
    assert result.returncode == 2
    message = _one_paragraph(result.stderr)
    assert f"Checkpoint {newest} {expected}" in message
    assert "did not start" in message and f"++import_model_train_epoch1 {newest} with a new ++model prefix" in message
    if change == "newer":
        assert "resuming here would drop them at the next checkpoint" in message
    assert not os.path.exists(f"{trained}.003.pt")


def test_a_directory_named_like_a_checkpoint_is_named_as_a_directory(trained):
    os.mkdir(f"{trained}.003.pt")
    result = run_rnn(TINY_CONFIG, "++model", trained, "++num_epochs", "4")
    assert result.returncode == 2
    message = _one_paragraph(result.stderr)
    assert f"{trained}.003.pt is a directory, but its name is that of a checkpoint" in message
    assert "does not exist" not in message


@pytest.mark.slow  # a fresh interpreter in a user namespace of its own: seconds of imports
def test_an_unreadable_newest_checkpoint_is_called_unreadable_not_damaged(trained):
    newest = f"{trained}.002.pt"
    os.chmod(newest, 0)
    # root reads anything; in a user namespace of its own it is an ordinary user for files it does not map
    as_user = ["unshare", "-U"] if os.geteuid() == 0 else []
    if as_user and subprocess.run([*as_user, "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unshare -U (user namespaces) to make a file unreadable for root")
    result = subprocess.run(
        [*as_user, sys.executable, RNN, TINY_CONFIG, "++model", trained, "++num_epochs", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    message = _one_paragraph(result.stderr)
    assert f"Checkpoint {newest} cannot be read (Permission denied). The file may well be intact" in message
    assert "damaged" not in message and f"ls -l {newest}" in message


def test_non_finite_values_in_a_checkpoint_name_the_parameter_and_the_newest_finite_checkpoint(trained):
    newest = f"{trained}.002.pt"
    saved = torch.load(newest, weights_only=True)
    saved["model"]["3.weight"][1, 2] = float("nan")
    saved["model"]["3.weight"][0, 0] = float("inf")
    torch.save(saved, newest)
    result = run_rnn(TINY_CONFIG, "++model", trained, "++num_epochs", "3")
    assert result.returncode == 2
    message = _one_paragraph(result.stderr)
    assert f"Checkpoint {newest} holds non-finite values: parameter 3.weight: 1 NaN, 1 inf of 24 values." in message
    assert f"The newest finite checkpoint is {trained}.001.pt (epoch 1)." in message


def test_buffers_may_hold_inf_on_purpose_but_not_nan():
    model = nn.Linear(2, 2)
    model.register_buffer("mask", torch.full((2, 2), float("-inf")).triu(1))
    assert checkpoint.non_finite_entries(model, model.state_dict()) == []
    model.mask[0, 0] = float("nan")
    assert checkpoint.non_finite_entries(model, model.state_dict()) == ["buffer mask: 1 NaN of 4 values"]


def test_checkpoints_carry_crcs_even_when_a_config_switched_them_off_for_its_own_saves(tmp_path):
    import torch.utils.serialization.config as serialization_config

    path = str(tmp_path / "model.001.pt")
    serialization_config.save.compute_crc32 = False
    try:
        checkpoint.save_checkpoint(path, {"model": {"w": torch.arange(1000.0)}, "epoch": 1})
    finally:
        serialization_config.save.compute_crc32 = True
    assert torch.equal(checkpoint.load_checkpoint(path)["model"]["w"], torch.arange(1000.0))


def test_a_truncated_or_foreign_file_is_refused_with_its_reason(tmp_path):
    path = str(tmp_path / "model.001.pt")
    checkpoint.save_checkpoint(path, {"model": {"w": torch.arange(1000.0)}, "epoch": 1})
    shutil.copy(path, tmp_path / "whole.pt")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with pytest.raises(CheckpointError, match=r"is damaged: it is not an intact zip archive.*No other checkpoint"):
        checkpoint.load_checkpoint(path)
    with open(path, "wb") as f:
        f.write(b"\x1b]0;not a checkpoint\x07")
    with pytest.raises(CheckpointError, match="is damaged: it is not an intact zip archive"):
        checkpoint.load_checkpoint(path)


def test_inspect_checkpoint_shows_a_damaged_file_under_a_warning(trained):
    _flip_bit_in_tensor_data(f"{trained}.002.pt")
    result = run_script(os.path.join(ROOT, "tools", "inspect-checkpoint.py"), f"{trained}.002.pt")
    assert result.returncode == 1
    assert result.stdout.startswith(f"WARNING: {trained}.002.pt is damaged: record archive/data/")
    assert f"{trained}.002.pt: framework checkpoint, epoch 2" in result.stdout


def test_a_large_checkpoint_is_verified_on_several_threads_and_the_damaged_record_named(tmp_path):
    path = str(tmp_path / "model.001.pt")
    tensors = {f"w{i}": torch.full((5_000_000,), float(i)) for i in range(4)}  # 80 MB: above the parallel threshold
    checkpoint.save_checkpoint(path, {"model": tensors, "epoch": 1})
    assert checkpoint_integrity.damage(path) is None
    with zipfile.ZipFile(path) as archive:
        third = sorted((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.header_offset)[2]
    with open(path, "r+b") as f:
        f.seek(third.header_offset + 4096)
        byte = f.read(1)
        f.seek(third.header_offset + 4096)
        f.write(bytes([byte[0] ^ 0x80]))
    assert checkpoint_integrity.damage(path) == (
        f"record {third.filename} (the values of a tensor) fails its CRC-32 check: it changed after writing"
    )


def test_a_record_marked_as_a_folder_in_the_zip_directory_is_refused(trained):
    # One flipped bit (the DOS directory attribute) made torch's reader skip the record and load the tensor
    # from uninitialised memory: found by tools/checkpoint-bitflips.py --outside-records.
    path = f"{trained}.002.pt"
    with open(path, "rb") as f:
        data = bytearray(f.read())
    with zipfile.ZipFile(path) as archive:
        entry = archive.start_dir
        for info in archive.infolist():
            if "/data/" in info.filename:
                break
            name, extra, comment = (int.from_bytes(data[entry + o : entry + o + 2], "little") for o in (28, 30, 32))
            entry += 46 + name + extra + comment
    data[entry + 38] ^= 0x10  # the low byte of the entry's external attributes
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(CheckpointError, match=f"the archive's directory marks record {info.filename} as a folder"):
        checkpoint.load_checkpoint(path)


def _tiny_model() -> nn.Module:  # the tiny config's get_model
    return nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.1), nn.ReLU(), nn.Linear(8, 3))


def test_files_written_by_others_get_one_paragraph_saying_how_to_use_them(tmp_path):
    model = _tiny_model()
    torch.save({"model": model.state_dict(), "epoch": 1}, tmp_path / "old.001.pt")  # an older format: no global_step
    torch.save(
        {"model": model.state_dict(), "epoch": 1}, tmp_path / "legacy.001.pt", _use_new_zipfile_serialization=False
    )
    torch.save(model.state_dict(), tmp_path / "plain.001.pt")
    evaluate = ("++task", "'eval'", "++log", "None", "++model")
    old = _one_paragraph(run_rnn(TINY_CONFIG, *evaluate, str(tmp_path / "old")).stderr)  # forward loads it alike
    assert old.startswith(f"ERROR: Checkpoint {tmp_path / 'old.001.pt'} lacks 'global_step'")
    legacy = run_rnn(TINY_CONFIG, *evaluate, str(tmp_path / "legacy"))
    assert legacy.returncode == 2 and "in torch's legacy serialization format" in _one_paragraph(legacy.stderr)
    assert " is damaged" not in legacy.stderr
    convert = shlex.split(legacy.stderr.split("Convert it once: ")[1].split(", then use")[0])  # as a shell reads it
    assert convert[:2] == ["python", "-c"]
    (tmp_path / "convert.py").write_text(convert[2])  # the code of `python -c CODE ARGS`, run in a forked run
    converted = run_script(str(tmp_path / "convert.py"), *convert[3:], cwd=str(tmp_path))
    assert converted.returncode == 0, converted.stderr
    assert torch.equal(torch.load(tmp_path / "legacy.001.zip.pt")["model"]["0.weight"], model.state_dict()["0.weight"])
    plain = run_rnn(TINY_CONFIG, *evaluate, str(tmp_path / "plain"))
    message = _one_paragraph(plain.stderr)
    assert plain.returncode == 2 and "is a plain state_dict (4 tensors" in message
    # The way forward it names works as written: import, then evaluate the imported checkpoint.
    imported = str(tmp_path / "imported.001.pt")
    assert f"--state-dict {tmp_path / 'plain.001.pt'} --out {imported};" in message
    tool = os.path.join(ROOT, "tools", "import-torch-model.py")
    assert (
        run_script(tool, TINY_CONFIG, "--state-dict", str(tmp_path / "plain.001.pt"), "--out", imported).returncode == 0
    )
    assert f"++model {tmp_path / 'imported'}." in message
    evaluated = run_rnn(TINY_CONFIG, *evaluate, str(tmp_path / "imported"))
    assert evaluated.returncode == 0 and "Evaluation of epoch 0: dev: ce " in evaluated.stdout, evaluated.stderr
    preload = shlex.split(message.split("RETURNN's way: ")[1].split(" with a new")[0])
    trained = run_rnn(TINY_CONFIG, *preload, "++num_epochs", "1", "++model", str(tmp_path / "preloaded" / "m"))
    assert trained.returncode == 0 and "preload_from_files['init']: loaded 4 parameter tensors" in trained.stdout


def test_a_damaged_checkpoint_is_refused_alike_by_resume_eval_preload_and_the_import_tool(trained):
    damaged = f"{trained}.002.pt"
    _flip_bit_in_tensor_data(damaged)
    with pytest.raises(CheckpointError) as resume:
        checkpoint.load_training_state(damaged)
    reason = str(resume.value).split(" It was not loaded")[0]  # the rest advises which checkpoint to continue from
    assert reason.startswith(f"Checkpoint {damaged} is damaged: record ") and "fails its CRC-32 check" in reason

    config = load_config([TINY_CONFIG], {"preload_from_files": {"init": {"filename": damaged, "init_for_train": True}}})
    model = _tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError) as preloaded:
        preload_from_files(config, model, training=True)
    assert str(preloaded.value) == f"preload_from_files['init']: {resume.value}"
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # nothing was loaded

    evaluated = run_rnn(TINY_CONFIG, "++task", "'eval'", "++log", "None", "++model", trained)
    assert evaluated.returncode == 2 and reason in _one_paragraph(evaluated.stderr)
    tool = os.path.join(ROOT, "tools", "import-torch-model.py")
    imported = run_script(tool, TINY_CONFIG, "--state-dict", damaged, "--out", str(os.path.dirname(trained) + "/x.pt"))
    assert imported.returncode == 2 and reason in _one_paragraph(imported.stderr)
