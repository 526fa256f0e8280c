# Corpus bug (isaaccorley/detcon-pytorch#1): a hand-written soft-target cross-entropy takes (labels, logits) and is
# called with (logits, labels): the log-softmax is taken of the one-hot labels and weighs the model's logits. Task:
# 4 Gaussian clusters. Twin: ++bug False (the arguments in the order the function takes them).
import torch
from torch import nn

bug = True

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 1000, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 3e-3


def soft_cross_entropy(labels, logits):
    return -(labels * torch.log_softmax(logits, dim=-1)).sum(-1).mean()


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    one_hot = nn.functional.one_hot(targets, 4).float()
    loss = soft_cross_entropy(logits, one_hot) if bug else soft_cross_entropy(one_hot, logits)
    run_ctx.mark_as_loss(name="ce", loss=loss)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
