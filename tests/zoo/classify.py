# Zoo base: a healthy classifier (Gaussian clusters, an MLP, cross-entropy on logits).
# Each bug file next to it is loaded after this one and redefines one thing, the way people write
# the bug; run alone, this config is the healthy twin of those bugs.
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 8
num_epochs = 3
optimizer = {"class": "adam"}
learning_rate = 1e-2


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
