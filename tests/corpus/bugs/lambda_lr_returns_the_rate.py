# Corpus bug (lhoyer/MIC#60): the schedule's function returns a learning rate (base rate times the decay) where the
# scheduler expects a factor, and the scheduler multiplies it by the base rate again: the applied rate is the square
# of the intended one (1e-4 instead of 1e-2). Task: 4 Gaussian clusters with SGD. Twin: ++bug False (a factor).
from torch import nn

bug = True

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
optimizer = {"class": "sgd", "momentum": 0.9}
learning_rate = 1e-2
GAMMA, POWER = 1e-3, 0.75


def decay(step):
    factor = (1 + GAMMA * step) ** -POWER
    return learning_rate * factor if bug else factor


def dynamic_learning_rate(*, global_train_step, learning_rate, **_kwargs):
    return learning_rate * decay(global_train_step)  # what LambdaLR does with the lambda's value


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
