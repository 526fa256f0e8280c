"""Shells through a real pseudo-terminal, real signals, real crashes, hangs and Ctrl-C."""

import os
import re
import signal
import sys

import pexpect
import pytest
import torch
from devkit.terminal import spawn_rnn, spawn_script  # pexpect: only the terminal tests need it

from conftest import (
    FAILING_TRAIN_STEP,
    ROOT,
    TINY_CONFIG,
    StartedRun,
    run_rnn,
    start_rnn,
    tiny_config_with,
    write_config,
)

pytestmark = pytest.mark.slow  # real training runs and processes, seconds each

RNN = os.path.join(ROOT, "rnn.py")
ENV = dict(os.environ, IPY_TEST_SIMPLE_PROMPT="1", PYTHONUNBUFFERED="1")
PROMPT = r"In \[\d+\]: "


def _spawn(*args: str) -> pexpect.spawn:
    """``python rnn.py ARGS`` in a pseudo-terminal (forked from the preloaded server: tools/devkit/terminal.py)."""
    return spawn_rnn(*args, env=ENV, encoding="utf-8", timeout=90)


def _params(path):
    return torch.load(path, weights_only=True)["model"]


def _same_params(a, b) -> bool:
    a, b = _params(a), _params(b)
    return all(torch.equal(a[k], b[k]) for k in a)


def test_shell_before_a_chosen_step_sees_the_batch_and_training_continues_unchanged(tmp_path):
    reference = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "ref" / "m"), "++num_epochs", "1")
    assert reference.returncode == 0
    child = _spawn(TINY_CONFIG, "++debug_shell_in_runner", "2", "++num_epochs", "1", "++model", str(tmp_path / "m"))
    child.expect("Debug shell before training step 2 \\(epoch 1, step 2 of 10\\)")
    child.expect(PROMPT)
    child.sendline("extern_data['data'].shape, extern_data['classes'].dtype, step, epoch, type(model).__name__")
    child.expect(re.escape("(torch.Size([16, 4]), torch.int64, 2, 1, 'Sequential')"))
    child.expect(PROMPT)
    child.sendline("ctx = run_step(); ctx.losses['ce'].loss.backward(); float(ctx.losses['ce'].loss) > 0")
    child.expect("True")
    child.expect(PROMPT)
    child.sendline("exit")
    child.expect("Epoch 1 train: ce")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    # The shell (including a step run by hand with backward) left no trace in the training.
    assert _same_params(tmp_path / "ref" / "m.001.pt", tmp_path / "m.001.pt")


def test_sigusr2_opens_a_shell_at_the_next_step(tmp_path):
    child = _spawn(TINY_CONFIG, "++step_sleep", "0.05", "++num_epochs", "1", "++log_verbosity", "5")
    child.expect("ep 1 train, step 1,")
    os.kill(child.pid, signal.SIGUSR2)
    child.expect("Debug shell before training step")
    child.expect(PROMPT)
    child.sendline("step >= 2")
    child.expect("True")
    child.expect(PROMPT)
    child.sendline("exit")
    child.expect("Epoch 1 evaluation")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_plain_python_shell_when_ipython_is_missing(tmp_path):
    # Block the IPython import in the child, then run rnn.py as the main script.
    launcher = write_config(
        tmp_path,
        (
            "import runpy, sys\n"
            "sys.modules['IPython'] = None\n"
            f"sys.argv = [{RNN!r}, {TINY_CONFIG!r}, '++debug_shell_in_runner', '0', '++num_epochs', '1']\n"
            f"runpy.run_path({RNN!r}, run_name='__main__')\n"
        ),
        "launch.py",
    )
    child = spawn_script(launcher, env=ENV, encoding="utf-8", timeout=90)
    child.expect("IPython is not installed: plain Python shell")
    child.expect(">>> ")
    child.sendline("print('batch', tuple(extern_data['data'].shape))")
    child.expect(re.escape("batch (16, 4)"))
    child.sendcontrol("d")
    child.expect("Epoch 1 train")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_shell_on_exception_opens_in_the_failing_frame(tmp_path):
    config = tiny_config_with(
        tmp_path,
        (
            "\ndef train_step(*, model, extern_data, run_ctx, **_kwargs):\n"
            "    secret_local = extern_data['data'].shape[0] * 3\n"
            "    raise ValueError('planted')\n"
        ),
    )
    child = _spawn(config, "++debug_shell_on_exception", "True")
    child.expect("Post-mortem shell in .*config.py:\\d+ \\(train_step\\) after ValueError: planted")
    child.expect(PROMPT)
    child.sendline("secret_local")
    child.expect("48")
    child.expect(PROMPT)
    child.sendline("exit")
    child.expect(r"\[framework\] raised during train step")  # the traceback follows the shell
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1


def test_debug_shell_called_from_model_code(tmp_path):
    config = tiny_config_with(
        tmp_path,
        (
            "\nimport framework.debug\n"
            "class Probe(nn.Module):\n"
            "    def forward(self, x):\n"
            "        hidden_here = x.shape\n"
            "        framework.debug.debug_shell(user_ns=locals(), user_global_ns=globals(), exit_afterwards=False)\n"
            "        return x\n"
            "def get_model(**_kwargs):\n"
            "    return nn.Sequential(Probe(), nn.Linear(4, 3))\n"
            "num_epochs = 1\n"
            "dev = None\n"
            "train = dict(train, num_seqs=20)\n"
        ),
    )
    child = _spawn(config)
    child.expect(PROMPT)
    child.sendline("hidden_here, batch_size")  # a local of forward and a global of the config
    child.expect(re.escape("(torch.Size([16, 4]), 16)"))
    child.expect(PROMPT)
    child.sendline("exit")
    child.expect("Epoch 1 train: ce [0-9.]+ fer [0-9.]+, 1 steps")  # 16 entries: one batch, one shell
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_ipython_pdb_lands_in_the_frame_of_the_exception(tmp_path):
    config = tiny_config_with(tmp_path, FAILING_TRAIN_STEP)
    ipython = os.path.join(os.path.dirname(sys.executable), "ipython")  # the launcher script, run forked
    child = spawn_script(ipython, "--pdb", RNN, config, env=ENV, encoding="utf-8", timeout=90)
    child.expect("ipdb> ")
    child.sendline("p secret_local")
    child.expect("'found-me'")
    child.sendline("q")
    child.expect(pexpect.EOF)
    child.close()


def test_segfault_prints_native_backtrace_and_python_stack(tmp_path):
    config = tiny_config_with(
        tmp_path,
        ("\nimport ctypes\ndef train_step(*, model, extern_data, run_ctx, **_kwargs):\n    ctypes.string_at(0)\n"),
    )
    result = run_rnn(config)
    assert result.returncode == -signal.SIGSEGV
    err = result.stderr
    assert "Native backtrace (signal 11), innermost first:" in err
    assert re.search(r"libc\.so[^\n]*\n", err)
    assert "Fatal Python error: Segmentation fault" in err
    assert re.search(r'File ".*config\.py", line \d+ in train_step', err)
    assert err.index("Native backtrace") < err.index("Fatal Python error")


def test_sigusr1_prints_all_thread_stacks_and_training_continues(tmp_path):
    process = start_rnn(TINY_CONFIG, "++step_sleep", "0.05", "++log_verbosity", "5", cwd=str(tmp_path))
    for line in process.stdout:
        if "ep 1 train, step 2," in line:
            break
    process.send_signal(signal.SIGUSR1)
    out, err = process.communicate(timeout=90)
    assert process.returncode == 0
    assert "Epoch 2 evaluation" in out
    assert re.search(r"Current thread 0x[0-9a-f]+ \(most recent call first\):", err)
    assert "in train_epoch" in err  # the main thread's stack, wherever in the step it was


def test_watch_stall_dumps_stacks_without_killing_the_run(tmp_path):
    config = tiny_config_with(
        tmp_path,
        (
            "\n_train_step = train_step\n"
            "def train_step(*, run_ctx, **kwargs):\n"
            "    if run_ctx.step == 3:\n"
            "        time.sleep(2.5)  # a stall\n"
            "    _train_step(run_ctx=run_ctx, **kwargs)\n"
        ),
    )
    result = run_rnn(config, "++watch_stall", "1.0", "++num_epochs", "1")
    assert result.returncode == 0
    dumps = re.findall(r"Timeout \(0:00:01\)!", result.stderr)
    assert len(dumps) >= 2  # again while the stall lasts
    assert re.search(r'File ".*config\.py", line \d+ in train_step', result.stderr)


def _wait_for(process: StartedRun, text: str) -> None:
    for line in process.stdout:
        if text in line:
            return
    raise AssertionError(f"{text!r} never appeared")


def test_ctrl_c_checkpoints_mid_epoch_and_the_rerun_resumes_exactly(tmp_path):
    reference = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "ref" / "m"), "++num_epochs", "3")
    assert reference.returncode == 0
    prefix = str(tmp_path / "run" / "m")
    args = [TINY_CONFIG, "++model", prefix, "++num_epochs", "3", "++log_verbosity", "5"]
    process = start_rnn(*args, "++step_sleep", "0.05")
    _wait_for(process, "ep 2 train, step 3,")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=90)
    assert process.returncode == 130, err
    assert "Ctrl-C: stopping after the current step" in out
    assert re.search(r"^Training stopped on request \(Ctrl-C\) after epoch 2 step \d+", err, re.M)
    assert "ERROR" not in err  # a requested stop is no error
    assert f"Wrote {prefix}.interrupted.pt" in err and "running the same command again" in err
    assert os.path.exists(f"{prefix}.001.pt") and not os.path.exists(f"{prefix}.002.pt")
    resumed = run_rnn(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert re.search(r"Continuing epoch 2 at step \d+ of 10", resumed.stdout)
    assert not os.path.exists(f"{prefix}.interrupted.pt")
    assert _same_params(tmp_path / "ref" / "m.003.pt", f"{prefix}.003.pt")
    scores = re.findall(r"Epoch 2 train: ce (\S+)", reference.stdout + resumed.stdout)
    assert len(scores) == 2 and scores[0] == scores[1]  # the epoch's score covers all of its steps


def test_second_ctrl_c_exits_at_once(tmp_path):
    process = start_rnn(TINY_CONFIG, "++model", str(tmp_path / "m"), "++step_sleep", "1.0", "++log_verbosity", "5")
    _wait_for(process, "ep 1 train, step 0,")
    _wait_for(process, "train_step sleeps")  # inside step 1 (each step sleeps 1 s)
    process.send_signal(signal.SIGINT)
    _wait_for(process, "Ctrl-C: stopping after the current step")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode not in (0, 130) and "KeyboardInterrupt" in err
    assert "ep 1 train, step 1," not in out  # step 1 was cut short, not finished
    assert not os.path.exists(tmp_path / "m.interrupted.pt")


def test_startup_callback_and_lovely_tensors(tmp_path):
    config = tiny_config_with(
        tmp_path,
        (
            "\nimport torch\n"
            "def startup_callback(*, config, **_kwargs):\n"
            "    print('startup callback got', type(config).__name__, config.get('batch_size'))\n"
            "    print('repr:', repr(torch.zeros(3, 4)))\n"
        ),
    )
    result = run_rnn(config, "++use_lovely_tensors", "True", "++num_epochs", "1")
    assert result.returncode == 0
    assert result.stdout.count("startup callback got Config 16") == 1
    assert "repr: tensor[3, 4] n=12 all_zeros" in result.stdout


@pytest.mark.parametrize("exchook", [True, False])
def test_tracebacks_are_compact_unless_better_exchook_is_asked_for(tmp_path, exchook):
    config = tiny_config_with(
        tmp_path,
        (
            "\ndef train_step(*, model, extern_data, run_ctx, **_kwargs):\n"
            "    big = torch.zeros(1000)\n"
            "    raise RuntimeError(f'boom {big.sum()}')\n"
            "import torch\n"
        ),
    )
    result = run_rnn(config, "++use_better_exchook", str(exchook))
    assert result.returncode == 1 and "RuntimeError: boom" in result.stderr
    assert ("locals:" in result.stderr) == exchook  # better_exchook's full dump of every frame
    assert ("library frame(s)" in result.stderr) != exchook  # the default folds torch's and the framework's frames
    local = r"big = <local> tensor" if exchook else r"big = tensor"
    assert re.search(local + r"\[1000\] [^\n]*all_zeros\n", result.stderr)  # a summary, not 1000 zeros
