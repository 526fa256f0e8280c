"""The TensorBoard writer process: the summaries it writes, read back with tensorboard's own reader, and that it
never imports torch (it serves the training process beside it)."""

import io
import re

import numpy as np
import pytest
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from framework.debug.tensorboard_summaries import (
    check_image,
    histogram_summary,
    hparams_summaries,
    image_summary,
    text_summary,
)
from framework.debug.tensorboard_writer import TensorBoardWriterProcess


def _pixels(event) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(event.encoded_image_string)))


def test_the_writer_process_writes_every_kind_of_summary_without_importing_torch(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # the writer, a fresh interpreter, lists its imports on stderr
    writer = TensorBoardWriterProcess(str(tmp_path))
    rng = np.random.default_rng(0)
    gray = rng.random((5, 7), dtype=np.float32)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    writer.scalars(3, [("train/ce", 0.5), ("train/learning_rate", 0.01)])
    writer.add("text", "findings/nan_loss", "**warning** (epoch 1, step 3): NaN", 3)
    writer.add("image", "chw", gray[None], 3, dataformats="CHW")
    writer.add("image", "hw", gray, 3, dataformats="HW")
    writer.add("image", "hwc", rgb, 3, dataformats="HWC")
    writer.add("image", "nchw", np.stack([gray[None]] * 5), 3, dataformats="NCHW")
    values = rng.normal(size=(64, 33)).astype(np.float32)
    writer.add("histogram", "params/w", values, 3)
    writer.add("histogram", "params/constant", np.full(4, 2.0, dtype=np.float32), 3)
    writer.add("histogram", "params/empty", np.zeros((0, 3), dtype=np.float32), 3)
    hparams = {"learning_rate": 0.01, "hidden": 8, "model_name": "mlp", "use_amp": True, "nothing": None}
    writer.hparams(hparams, {"hparam/dev_ce": 0.25}, "hparams")
    writer.close()

    imports = capfd.readouterr().err
    assert re.search(r"\|\s+tensorboard\.compat\.proto\.summary_pb2$", imports, re.M)  # the list is there
    assert re.search(r"\|\s+PIL\.PngImagePlugin$", imports, re.M)  # ... and covers the images
    assert not re.search(r"\|\s+torch(\.\S+)?$", imports, re.M)
    assert not re.search(r"\|\s+tensorboard\.compat\.tensorflow_stub$", imports, re.M)  # ~0.35 s, not needed

    events = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0, "histograms": 0, "images": 0, "tensors": 0})
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("train/ce")] == [(3, 0.5)]
    (text,) = events.Tensors("findings/nan_loss/text_summary")  # the tag torch's add_text gives
    assert text.step == 3 and text.tensor_proto.string_val == [b"**warning** (epoch 1, step 3): NaN"]
    as_bytes = (gray * 255).astype(np.uint8)  # floats in [0, 1] scaled as torch scales them
    for tag in ("chw", "hw"):
        (image,) = events.Images(tag)
        assert (image.step, image.width, image.height) == (3, 7, 5)
        np.testing.assert_array_equal(_pixels(image), as_bytes)
    (image,) = events.Images("hwc")
    np.testing.assert_array_equal(_pixels(image), rgb)  # uint8 kept
    (grid,) = events.Images("nchw")  # 5 images, 3 to a row: 2 rows
    assert (grid.width, grid.height) == (3 * 7, 2 * 5)
    np.testing.assert_array_equal(_pixels(grid)[5:10, 7:14], as_bytes)  # the 5th image
    assert not _pixels(grid)[5:10, 14:21].any()  # the 6th place is empty

    (histogram,) = events.Histograms("params/w")
    h = histogram.histogram_value
    flat = values.astype(np.float64).ravel()
    assert (histogram.step, h.num, h.min, h.max) == (3, 64 * 33, flat.min(), flat.max())
    assert h.sum == pytest.approx(flat.sum()) and h.sum_squares == pytest.approx((flat**2).sum())
    assert sum(h.bucket) == h.num and len(h.bucket) == len(h.bucket_limit) > 10 and h.bucket_limit[-1] == h.max
    lefts = [h.min, *h.bucket_limit[:-1]]
    for left, right, count in zip(lefts, h.bucket_limit, h.bucket, strict=True):
        inside = (flat >= left) & ((flat < right) if right < h.max else (flat <= right))
        assert count == inside.sum()
    constant = events.Histograms("params/constant")[0].histogram_value
    assert (constant.num, constant.min, constant.max, list(constant.bucket)) == (4, 2.0, 2.0, [4])
    assert "params/empty" not in events.Tags()["histograms"]  # nothing to draw

    run = EventAccumulator(str(tmp_path / "hparams"))
    run.Reload()
    assert [(e.step, e.value) for e in run.Scalars("hparam/dev_ce")] == [(0, 0.25)]
    content = {tag: HParamsPluginData.FromString(c) for tag, c in run.PluginTagToContent("hparams").items()}
    experiment = content["_hparams_/experiment"].experiment
    assert [m.name.tag for m in experiment.metric_infos] == ["hparam/dev_ce"]
    assert [i.name for i in experiment.hparam_infos] == ["learning_rate", "hidden", "model_name", "use_amp"]
    start = content["_hparams_/session_start_info"].session_start_info.hparams
    assert start["learning_rate"].number_value == 0.01 and start["hidden"].number_value == 8
    assert start["model_name"].string_value == "mlp" and start["use_amp"].number_value == 1  # a bool: as torch
    assert content["_hparams_/session_end_info"].session_end_info.status == 1  # STATUS_SUCCESS


def test_an_image_whose_dataformats_do_not_fit_is_refused_with_what_is_wrong():
    check_image((3, 5, 7), "CHW")
    check_image((2, 5, 7, 4), "NHWC")
    with pytest.raises(ValueError, match=r"dataformats='CHW' does not fit an image of shape \[5, 7\]: it names 3 axes"):
        check_image((5, 7), "CHW")
    with pytest.raises(ValueError, match="its C axis has 5 channels"):
        check_image((5, 7, 5), "HWC")
    with pytest.raises(ValueError, match="name each axis once"):
        check_image((5, 7), "HH")


def test_the_summaries_show_what_torchs_summary_writer_shows():
    """torch's builders (which the writer process used to run) as the reference: the same hparams table and text,
    the same pixels (torch stores a gray image as RGB), the same histogram statistics."""
    from torch.utils.tensorboard import summary as torch_summary

    hparams = {"learning_rate": 0.01, "hidden": 8, "model_name": "mlp", "use_amp": True}
    metrics = {"hparam/dev_ce": 0.25, "hparam/dev_fer": 0.5}
    ours = [s.SerializeToString() for s in hparams_summaries(hparams, metrics)]
    assert ours == [s.SerializeToString() for s in torch_summary.hparams(hparams, metrics)]
    assert (
        text_summary("a/b", "**x** é").SerializeToString() == torch_summary.text("a/b", "**x** é").SerializeToString()
    )
    rng = np.random.default_rng(1)
    for image, dataformats in [
        (rng.random((1, 5, 7)), "CHW"),
        (rng.random((5, 7)) * 1.2 - 0.1, "HW"),  # out of [0, 1]: clipped
        (rng.random((5, 7, 3)).astype(np.float32), "HWC"),
        (rng.integers(0, 256, (3, 5, 7), dtype=np.uint8), "CHW"),
    ]:
        expected = torch_summary.image("t", image, dataformats=dataformats).value[0].image
        got = image_summary("t", image, dataformats).value[0].image
        assert (got.width, got.height) == (expected.width, expected.height)
        as_rgb = Image.open(io.BytesIO(got.encoded_image_string)).convert("RGB")
        np.testing.assert_array_equal(np.asarray(as_rgb), _pixels(expected))
    values = rng.normal(size=1000) * 3
    expected = torch_summary.histogram("h", values, "auto").value[0].histo  # its statistics do not depend on the bins
    got = histogram_summary("h", values).value[0].histo
    for field in ("min", "max", "num"):
        assert getattr(got, field) == getattr(expected, field)
    assert (got.sum, got.sum_squares) == pytest.approx((expected.sum, expected.sum_squares))
