# Corpus bug (bowang-lab/BLEEP#5): a CLIP-style contrastive loss multiplies the similarity logits by the temperature
# instead of dividing by it; with a temperature of 0.07 the softmax over the candidates is nearly uniform. Task: match
# each spot's expression profile with its image features (two noisy views of one latent); error = retrieval misses
# within a batch. Twin: ++bug False (logits / temperature).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
TEMPERATURE = 0.07


class PairedViews(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        latent = rng.normal(size=(6000 if split == "train" else 1024, 10))
        mix_a, mix_b = np.random.default_rng(2).normal(size=(2, 10, 24)) / 2
        views = {
            "data": np.tanh(latent @ mix_a) + 0.3 * rng.normal(size=(len(latent), 24)),
            "image": np.tanh(latent @ mix_b) + 0.3 * rng.normal(size=(len(latent), 24)),
        }
        super().__init__({k: v.astype(np.float32) for k, v in views.items()}, **kwargs)


train = {"class": PairedViews, "split": "train"}
dev = {"class": PairedViews, "split": "dev"}
extern_data = {"data": {"shape": (24,)}, "image": {"shape": (24,)}}
batch_size = 256
num_epochs = 3
learning_rate = 1e-3


class DualEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.spot = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 32))
        self.image = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, spots, images):
        a = nn.functional.normalize(self.spot(spots), dim=-1)
        b = nn.functional.normalize(self.image(images), dim=-1)
        return a @ b.T


def get_model(**_kwargs):
    return DualEncoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    similarity = model(extern_data["data"], extern_data["image"])
    logits = similarity * TEMPERATURE if bug else similarity / TEMPERATURE
    matches = torch.arange(len(logits), device=logits.device)
    loss = (nn.functional.cross_entropy(logits, matches) + nn.functional.cross_entropy(logits.T, matches)) / 2
    run_ctx.mark_as_loss(name="contrastive", loss=loss)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != matches).float().mean(), as_error=True)
