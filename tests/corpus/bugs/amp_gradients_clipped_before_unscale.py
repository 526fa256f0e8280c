# Corpus bug (Lightning-AI/pytorch-lightning#9599): under native mixed precision the gradient-norm clipping ran right
# after backward, on gradients still multiplied by the loss scale, and the scaler unscaled them only before the
# optimizer step; the scaled norm is always far above the threshold, so every update is shrunk to about
# max_norm / scale of its size and the loss converges very slowly. Task: 8-class classification of noisy points
# around class centres passed through a fixed nonlinearity, an MLP trained with SGD and momentum 0.9 and
# gradient_clip_val 1.0. The loss scaler is GradScaler's: the loss is multiplied by 2^16 before backward (mark_as_loss
# scale=), and the trainer's optimizer step clips and unscales as the plugin did. Twin: ++bug False (unscale, then
# clip).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES, SCALE, MAX_NORM = 16, 8, 2.0**16, 1.0
CENTRES = np.random.default_rng(3).normal(size=(CLASSES, DIM))
MIX = np.random.default_rng(4).normal(size=(DIM, DIM)) / np.sqrt(DIM)


class Points(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=3000 if split == "train" else 500)
        x = np.tanh((CENTRES[labels] + 0.9 * rng.normal(size=(len(labels), DIM))) @ MIX)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


class AmpTrainerSGD(torch.optim.SGD):
    """The optimizer step of the AMP trainer: clip the gradient norm and unscale (scaler.unscale_ / scaler.step)."""

    @torch.no_grad()
    def step(self, closure=None):
        grads = [p for group in self.param_groups for p in group["params"] if p.grad is not None]
        if bug:  # clip_gradients right after backward, unscale later in the pre-optimization step
            nn.utils.clip_grad_norm_(grads, MAX_NORM)
            for p in grads:
                p.grad.div_(SCALE)
        else:
            for p in grads:
                p.grad.div_(SCALE)
            nn.utils.clip_grad_norm_(grads, MAX_NORM)
        return super().step(closure)


train = {"class": Points, "split": "train"}
dev = {"class": Points, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 4
learning_rate = 0.05
optimizer = {"class": AmpTrainerSGD, "momentum": 0.9}


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(
        name="ce", loss=nn.functional.cross_entropy(logits, targets), scale=SCALE
    )  # scaler.scale(loss)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
