# Corpus bug (Cadene/pretrained-models.pytorch#5): the Inception models' BasicConv2d builds
# nn.BatchNorm2d(out_planes, eps=0.001, momentum=0), so the running mean and variance are never updated and keep
# their initial 0 and 1: trained on a new dataset, the network normalises with batch statistics in training and with
# those unchanged running statistics in eval mode, and evaluation is far worse than training. Task: the packaged
# MNIST digits (standardised with the usual mean 0.1307 and std 0.3081), a small Inception-style stem of BasicConv2d
# blocks (convolution without bias, BatchNorm, ReLU) and a linear classifier. Twin: ++bug False (the PyTorch default
# momentum 0.1).
import torch
from torch import nn

bug = True

train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 32
num_epochs = 3
learning_rate = 1e-3


class BasicConv2d(nn.Module):
    def __init__(self, in_planes, out_planes, kernel_size, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(in_planes, out_planes, kernel_size, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(out_planes, eps=0.001, momentum=0 if bug else 0.1, affine=True)
        self.relu = nn.ReLU(inplace=False)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class SmallInception(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            BasicConv2d(1, 16, 3, stride=2),
            BasicConv2d(16, 32, 3),
            nn.MaxPool2d(2),
            BasicConv2d(32, 48, 3),
            nn.AdaptiveAvgPool2d(1),
        )
        self.last_linear = nn.Linear(48, 10)

    def forward(self, x):
        x = (x.view(-1, 1, 28, 28) - 0.1307) / 0.3081
        return self.last_linear(torch.flatten(self.features(x), 1))


def get_model(**_kwargs):
    return SmallInception()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
