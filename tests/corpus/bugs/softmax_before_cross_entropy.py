# Corpus bug (NaJaeMin92/pytorch-DANN#7): the classifier ends in a softmax and its probabilities go into
# nn.CrossEntropyLoss, which applies log-softmax itself: the loss sees values squeezed into [0, 1] and its gradient
# fades. Task: 20 overlapping Gaussian clusters. Twin: ++bug False (the classifier returns logits).
from torch import nn

bug = True

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 4000, "dim": 16, "num_classes": 20}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 4000, "dim": 16, "num_classes": 20}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 20}}
batch_size = 32
num_epochs = 2
learning_rate = 1e-3


def get_model(**_kwargs):
    layers = [nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 20)]
    return nn.Sequential(*layers, nn.Softmax(dim=-1)) if bug else nn.Sequential(*layers)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    outputs = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.CrossEntropyLoss()(outputs, targets))
    run_ctx.mark_as_loss(name="err", loss=(outputs.argmax(-1) != targets).float().mean(), as_error=True)
