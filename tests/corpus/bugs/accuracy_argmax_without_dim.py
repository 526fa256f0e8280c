# Corpus bug (Zasder3/train-CLIP#6): the accuracy metric takes argmax without a dimension (one index into the
# flattened logits) and compares it with the per-example targets; the reported error is wrong, the model is fine.
# Twin: ++bug False.
from torch import nn

bug = True

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    predicted = logits.argmax() if bug else logits.argmax(dim=-1)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(predicted != targets).float().mean(), as_error=True)
