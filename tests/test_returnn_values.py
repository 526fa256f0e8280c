"""RETURNN's values mean what they mean in RETURNN, and RETURNN's Tensor API on our tensors points to the guide."""

import torch

from conftest import TINY_CONFIG, run_rnn, tiny_config_with


def test_device_gpu_is_the_accelerator_or_a_clear_config_error(tmp_path):
    result = run_rnn(TINY_CONFIG, "++device", "'gpu'", "++num_epochs", "1", "++model", "None", cwd=str(tmp_path))
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    if accelerator is None:
        assert result.returncode == 2
        assert "device 'gpu' (RETURNN's value: train on the GPU) is requested, but torch finds no GPU" in result.stderr
        assert "Traceback" not in result.stderr
    else:
        assert result.returncode == 0, result.stderr
        assert f"device {accelerator.type}" in result.stdout


def test_returnn_tensor_api_on_a_batch_points_to_the_migration_guide(tmp_path):
    config = tiny_config_with(
        tmp_path,
        (
            "\ndef train_step(*, model, extern_data, run_ctx, **_kwargs):\n"
            "    data = extern_data['data']\n"
            "    logits = model(data.raw_tensor)  # RETURNN's Tensor API, left from a RETURNN config\n"
        ),
    )
    result = run_rnn(config, "++model", "None", cwd=str(tmp_path))
    assert result.returncode == 1
    assert "AttributeError: 'Tensor' object has no attribute 'raw_tensor'" in result.stderr
    assert "[framework] .raw_tensor is RETURNN's Tensor API" in result.stderr
    assert "docs/from_returnn.rst" in result.stderr
