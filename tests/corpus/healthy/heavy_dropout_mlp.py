# Healthy corpus: heavy dropout. An MLP on the packaged MNIST digits with dropout 0.2 on the input and 0.5 after
# each hidden layer (the rates of the original dropout paper for MNIST MLPs); in training half of the hidden units
# are dropped, so the training loss and error stay well above the dev ones, where dropout is off.
from torch import nn

train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 64
num_epochs = 4
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Dropout(0.2), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.5), nn.Linear(512, 512), nn.ReLU(),
        nn.Dropout(0.5), nn.Linear(512, 10),
    )  # fmt: skip


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
