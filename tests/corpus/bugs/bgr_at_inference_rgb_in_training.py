# Corpus bug (CondadosAI/modern-yolonas#7): the images are read with OpenCV (BGR); training converts them to RGB
# (image[:, :, ::-1]) but the Python inference path's preprocess() feeds the BGR array unchanged ("keep BGR - model was
# trained on BGR"), so every evaluated image has its red and blue channels swapped relative to training. Task: 16x16
# images of a coloured object (a disc or a square) on a grey, noisy background, 4 classes by the object's colour (red,
# green, blue, yellow); a small CNN. The dev set is scored through the inference path. Twin: ++bug False
# (preprocess() converts to RGB as training does).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
SIZE = 16
COLOURS_RGB = np.array([[0.9, 0.2, 0.2], [0.2, 0.8, 0.2], [0.2, 0.3, 0.9], [0.9, 0.85, 0.2]], dtype=np.float32)
CLASSES = len(COLOURS_RGB)


def read_images_bgr(rng, n):
    """What cv2.imread gives: H x W x 3 arrays in BGR order, plus the class of each."""
    labels = rng.integers(0, CLASSES, size=n)
    images = np.full((n, SIZE, SIZE, 3), 0.5, dtype=np.float32) + 0.15 * rng.normal(size=(n, SIZE, SIZE, 3))
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    for i, label in enumerate(labels):
        colour, shape = COLOURS_RGB[label] * rng.uniform(0.8, 1.2), rng.integers(0, 2)
        cy, cx, r = rng.uniform(5, 11), rng.uniform(5, 11), rng.uniform(3, 5)
        inside = (np.abs(yy - cy) < r) & (np.abs(xx - cx) < r) if shape else (yy - cy) ** 2 + (xx - cx) ** 2 < r**2
        images[i][inside] = colour
    return images[..., ::-1].astype(np.float32), labels  # RGB -> BGR, as stored and read by OpenCV


def to_rgb_chw(images_bgr):
    return images_bgr[..., ::-1].transpose(0, 3, 1, 2).copy()


def preprocess(images_bgr):
    """The inference path's preprocessing."""
    if bug:
        return images_bgr.transpose(0, 3, 1, 2).copy()  # keep BGR
    return to_rgb_chw(images_bgr)


class Objects(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        images, labels = read_images_bgr(rng, 3000 if split == "train" else 600)
        x = to_rgb_chw(images) if split == "train" else preprocess(images)  # data/transforms.py vs inference
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Objects, "split": "train"}
dev = {"class": Objects, "split": "dev"}
extern_data = {"data": {"shape": (3, SIZE, SIZE)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, CLASSES),
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
