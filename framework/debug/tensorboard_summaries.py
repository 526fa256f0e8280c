"""TensorBoard summaries (text, image, histogram, hparams) built from tensorboard's protobufs, without torch.

The writer process (``tensorboard_writer``) builds them from the numpy arrays and Python values the training
process sends, so it never imports torch (~2-4 s of CPU and ~240 MB at each run's end, when ``add_hparams`` came).
They are what ``torch.utils.tensorboard.SummaryWriter`` writes for the same calls, so TensorBoard shows the same:
the same tags, images scaled the same way, the same HPARAMS table.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.types_pb2 import DT_STRING

# The hparams plugin's names (tensorboard.plugins.hparams.metadata's, which loads tensorboard's TensorFlow stub:
# ~0.35 s of CPU for each run's writer process).
HPARAMS_PLUGIN = "hparams"
EXPERIMENT_TAG, SESSION_START_TAG, SESSION_END_TAG = (
    "_hparams_/experiment",
    "_hparams_/session_start_info",
    "_hparams_/session_end_info",
)
HISTOGRAM_BUCKETS = 30  # what TensorBoard's own histogram summaries use; its dashboard re-bins to about as many


def text_summary(tag: str, text: str) -> Summary:
    """Markdown ``text`` under ``<tag>/text_summary`` (the tag torch's ``add_text`` gives it)."""
    from tensorboard.plugins.text import metadata

    tensor = TensorProto(
        dtype=DT_STRING,
        string_val=[text.encode("utf-8")],
        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]),
    )
    info = metadata.create_summary_metadata(display_name=None, description=None)
    return Summary(value=[Summary.Value(tag=f"{tag}/text_summary", metadata=info, tensor=tensor)])


def check_image(shape: tuple[int, ...], dataformats: str) -> None:
    """Raise a ValueError saying what is wrong unless an array of ``shape`` is an image in ``dataformats``.

    ``dataformats`` names each axis: N (images, tiled into one), C (channels: 1 gray, 3 RGB, 4 RGBA), H, W.
    """
    letters = dataformats.upper()
    problem = ""
    if sorted(letters) != sorted(set(letters)) or not set(letters) <= set("NCHW") or not {"H", "W"} <= set(letters):
        problem = "name each axis once with N (images), C (channels), H (height) and W (width), H and W at least"
    elif len(letters) != len(shape):
        problem = f"it names {len(letters)} axes but the image has {len(shape)}"
    elif "C" in letters and shape[letters.index("C")] not in (1, 3, 4):
        problem = f"its C axis has {shape[letters.index('C')]} channels; an image has 1 (gray), 3 (RGB) or 4 (RGBA)"
    if problem:
        raise ValueError(
            f"log_image: dataformats={dataformats!r} does not fit an image of shape {list(shape)}: {problem}. "
            f"Pass the dataformats of your tensor, e.g. 'CHW' for [channels, height, width], 'HW' for a gray image."
        )


def image_summary(tag: str, image: np.ndarray, dataformats: str = "CHW") -> Summary:
    """A PNG of ``image``: floats in [0, 1] scaled to 0..255 (as torch does: times 255, clipped, truncated),
    uint8 kept; several images (an N axis) tiled in a near-square grid."""
    from PIL import Image

    check_image(image.shape, dataformats)
    letters = dataformats.upper()
    for axis in "NC":  # a missing N or C is a single image, a single channel
        if axis not in letters:
            image, letters = image[None], axis + letters
    pixels = _as_uint8(image.transpose([letters.index(axis) for axis in "NHWC"]))
    grid = _tiled(pixels)
    height, width, channels = grid.shape
    png = io.BytesIO()
    Image.fromarray(grid[:, :, 0] if channels == 1 else grid).save(png, format="PNG")
    encoded = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=png.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=encoded)])


def _as_uint8(image: np.ndarray) -> np.ndarray:
    if image.dtype == np.uint8:
        return image
    scaled = np.nan_to_num(image.astype(np.float32) * 255, nan=0.0)
    return np.clip(scaled, 0, 255).astype(np.uint8)


def _tiled(images: np.ndarray) -> np.ndarray:
    """Images [N, H, W, C] side by side, ceil(sqrt(N)) to a row, into one [H', W', C]."""
    count, height, width, channels = images.shape
    if count == 1:
        return images[0]
    cols = math.ceil(math.sqrt(count))
    rows = math.ceil(count / cols)
    grid = np.zeros((rows * height, cols * width, channels), dtype=np.uint8)
    for i in range(count):
        top, left = (i // cols) * height, (i % cols) * width
        grid[top : top + height, left : left + width] = images[i]
    return grid


def histogram_summary(tag: str, values: np.ndarray) -> Summary | None:
    """The distribution of ``values``: min, max, count, sum, sum of squares and counts in equal-width buckets.

    NaN and infinite values cannot be placed in buckets and are left out (``num`` counts those shown); None when
    no finite value is left (e.g. a parameter with no elements).
    """
    flat = np.asarray(values, dtype=np.float64).ravel()
    flat = flat[np.isfinite(flat)]
    if flat.size == 0:
        return None
    low, high = float(flat.min()), float(flat.max())
    if low == high:
        counts, limits = [flat.size], [high]
    else:
        counted, edges = np.histogram(flat, bins=HISTOGRAM_BUCKETS, range=(low, high))
        counts, limits = counted.tolist(), edges[1:].tolist()
        limits[-1] = high  # the last bucket's right edge is the maximum (TensorBoard reads the edges that way)
    histogram = HistogramProto(
        min=low,
        max=high,
        num=flat.size,
        sum=float(flat.sum()),
        sum_squares=float(np.dot(flat, flat)),
        bucket_limit=limits,
        bucket=counts,
    )
    return Summary(value=[Summary.Value(tag=tag, histo=histogram)])


def hparams_summaries(hparams: dict[str, Any], metrics: dict[str, float]) -> list[Summary]:
    """The experiment, session start and session end summaries of one run for TensorBoard's HPARAMS tab.

    Numbers and bools are numbers (as torch's ``add_hparams`` writes them: a bool is an int there), strings
    strings; None is left out. The metrics' values are scalars of the same run, written beside these.
    """
    from tensorboard.plugins.hparams import api_pb2
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionEndInfo, SessionStartInfo

    start = SessionStartInfo()
    infos = []
    for name, value in hparams.items():
        if value is None:
            continue
        if isinstance(value, (bool, int, float)):
            start.hparams[name].number_value = float(value)
            kind = api_pb2.DATA_TYPE_FLOAT64
        elif isinstance(value, str):
            start.hparams[name].string_value = value
            kind = api_pb2.DATA_TYPE_STRING
        else:
            raise TypeError(f"hparam {name}={value!r}: a number, bool or string is needed, not {type(value).__name__}")
        infos.append(api_pb2.HParamInfo(name=name, type=kind))
    experiment = api_pb2.Experiment(
        hparam_infos=infos, metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag)) for tag in metrics]
    )
    parts = [
        (EXPERIMENT_TAG, HParamsPluginData(experiment=experiment)),
        (SESSION_START_TAG, HParamsPluginData(session_start_info=start)),
        (
            SESSION_END_TAG,
            HParamsPluginData(session_end_info=SessionEndInfo(status=api_pb2.STATUS_SUCCESS)),
        ),
    ]
    summaries = []
    for tag, content in parts:
        plugin = SummaryMetadata.PluginData(plugin_name=HPARAMS_PLUGIN, content=content.SerializeToString())
        summaries.append(Summary(value=[Summary.Value(tag=tag, metadata=SummaryMetadata(plugin_data=plugin))]))
    return summaries
