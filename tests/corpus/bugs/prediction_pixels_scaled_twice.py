# Corpus bug (GoogleCloudPlatform/asl-ml-immersion#424): the prediction path decodes an image to float in [0, 1]
# (convert_image_dtype rescales) and then divides by 255 once more, so the model scores images in [0, 1/255] while it
# was trained on [0, 1]. Task: the packaged MNIST digits; the dev split is the prediction path. Twin: ++bug False
# (the dev images are scaled once, as in training).
import numpy as np
from torch import nn

from framework.datasets.mnist import MnistDataset

bug = True


class Digits(MnistDataset):
    def __init__(self, split, **kwargs):
        super().__init__(split, **kwargs)  # decoded and converted to float in [0, 1]
        if split == "test" and bug:  # the prediction code's extra rescaling
            self.arrays["data"] = (self.arrays["data"] / 255.0).astype(np.float32)


train = {"class": Digits, "split": "train"}
dev = {"class": Digits, "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 64
num_epochs = 3
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
