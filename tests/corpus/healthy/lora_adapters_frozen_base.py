# Healthy corpus: LoRA fine-tuning. The base MLP stands for a pretrained checkpoint (built from a fixed seed, so
# every run gets the same weights) and is frozen with requires_grad_(False); each of its linear layers gets a
# low-rank adapter, A random and B zero, so training starts exactly at the base model and A gets no gradient until B
# has moved. Only the adapters are trained, on a task the base does not solve (its outputs are unrelated to the labels).
import math

import torch
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 3000, "dim": 16, "num_classes": 6}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 3000, "dim": 16, "num_classes": 6}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 6}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3
RANK, ALPHA = 4, 8


class LoraLinear(nn.Module):
    def __init__(self, base):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.empty(RANK, base.in_features))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, RANK))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))

    def forward(self, x):
        return self.base(x) + (x @ self.lora_a.T @ self.lora_b.T) * (ALPHA / RANK)


def pretrained_base():
    with torch.random.fork_rng():
        torch.manual_seed(1234)
        return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 6))


def get_model(**_kwargs):
    base = pretrained_base()
    return nn.Sequential(*[LoraLinear(m) if isinstance(m, nn.Linear) else m for m in base])


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
