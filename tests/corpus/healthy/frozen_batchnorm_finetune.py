# Healthy corpus: fine-tuning a 1-D CNN with frozen BatchNorm statistics, as detection and segmentation codebases do.
# The running statistics stand for those of a pretrained model (estimated once in get_model on a calibration sample);
# the model's train() keeps every BatchNorm in eval mode, so training normalises with those fixed statistics and
# never updates them, while the BatchNorm affine weights and the convolutions are still trained.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


def waves(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    t = np.arange(64)[None, :]
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    x = np.sin(2 * np.pi * (labels[:, None] + 2) * t / 64 + phase) + 0.5 * rng.normal(size=(n, 64))
    return x[:, None, :].astype(np.float32), labels


class Waves(NumpyDataset):
    def __init__(self, split, **kwargs):
        x, labels = waves(2000 if split == "train" else 400, 0 if split == "train" else 1)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": 4}, **kwargs)


train = {"class": Waves, "split": "train"}
dev = {"class": Waves, "split": "dev"}
extern_data = {"data": {"shape": (1, 64)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


class FrozenBnCnn(nn.Sequential):
    def train(self, mode=True):
        super().train(mode)
        for module in self.modules():
            if isinstance(module, nn.BatchNorm1d):
                module.eval()  # frozen statistics: normalise with the stored running mean and variance
        return self


def get_model(**_kwargs):
    model = FrozenBnCnn(
        nn.Conv1d(1, 16, 7, padding=3),
        nn.BatchNorm1d(16, momentum=None),
        nn.ReLU(),
        nn.Conv1d(16, 16, 7, padding=3, stride=2),
        nn.BatchNorm1d(16, momentum=None),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(16, 4),
    )
    with torch.no_grad():  # the "pretrained" statistics: one pass in train mode over a calibration sample
        nn.Sequential.train(model, True)
        model(torch.from_numpy(waves(512, 7)[0]))
    return model.train()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
