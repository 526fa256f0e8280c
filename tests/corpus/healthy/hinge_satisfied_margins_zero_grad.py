# Healthy corpus: a multi-class hinge loss (Crammer-Singer SVM, nn.MultiMarginLoss) on a small MLP. Once a training
# example clears the margin its loss and gradient are exactly 0, so after the first epoch most examples contribute
# nothing and training continues on the few margin violators; that is what a hinge loss does.
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 3000, "dim": 16, "num_classes": 6}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 3000, "dim": 16, "num_classes": 6}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 6}}
batch_size = 32
num_epochs = 3
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 6))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    scores = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="hinge", loss=nn.functional.multi_margin_loss(scores, targets, margin=1.0))
    run_ctx.mark_as_loss(name="err", loss=(scores.argmax(-1) != targets).float().mean(), as_error=True)
