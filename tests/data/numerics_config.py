# A small model with nested, named modules and switchable planted numerics bugs, for tests.
#   plant = "forward_log":   encoder.layers.1.act takes log of negative values in epoch `plant_epoch`
#   plant = "backward_sqrt": encoder.layers.1.gate is sqrt of a zero parameter: finite forward, Inf gradient
#   plant = "loss_log":      log of a negative number in train_step, outside every module
#   plant = "step_log":      the same, at global step `plant_step` only
#   plant = "mask":          encoder.layers.0.mask writes -inf on purpose (like an attention mask)
#   plant = "finfo_mask":    the same with the lowest finite float32, as Hugging Face masks do: finite, but it
#                            overflows float32 sums
import torch
from torch import nn

import framework

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 200, "dim": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 200, "dim": 4}
batch_size = 16
num_epochs = 2
learning_rate = 1e-2
log_verbosity = 3
plant = "none"
plant_epoch = 2
plant_step = 12


class Act(nn.Module):
    def forward(self, x):
        if plant == "forward_log" and framework.get_run_ctx().epoch == plant_epoch:
            return torch.log(x - 0.5)
        return torch.tanh(x)


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.zeros(8) if plant == "backward_sqrt" else torch.ones(8))

    def forward(self, x):
        return x * torch.sqrt(self.gain)


class Mask(nn.Module):
    def forward(self, x):
        if plant in ("mask", "finfo_mask"):
            return x.masked_fill(x < 0, float("-inf") if plant == "mask" else torch.finfo(x.dtype).min)
        return x


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.act = Act()
        self.gate = Gate()
        self.mask = Mask()

    def forward(self, x):
        h = self.mask(self.linear(x))
        h = torch.softmax(torch.cat([h, torch.zeros_like(h[:, :1])], dim=-1), dim=-1)[:, :8]
        return self.gate(self.act(h * 4 - 1)) + x


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.layers = nn.ModuleList([Layer(), Layer()])

    def forward(self, x):
        x = self.inp(x)
        for layer in self.layers:
            x = layer(x)
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.output = nn.Linear(8, 3)

    def forward(self, x):
        return self.output(self.encoder(x))


def get_model(**_kwargs):
    return Model()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    ce = nn.functional.cross_entropy(logits, extern_data["classes"])
    if (plant == "loss_log" and run_ctx.epoch == plant_epoch) or (plant == "step_log" and run_ctx.step == plant_step):
        ce = ce + torch.log(ce - 100.0)
    run_ctx.mark_as_loss(name="ce", loss=ce)
