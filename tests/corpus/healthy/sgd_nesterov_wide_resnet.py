# Healthy corpus: SGD with Nesterov momentum 0.9, weight decay 5e-4 and a step schedule (the rate divided by 5 for
# the last epoch), as the Wide ResNet reference trains. Task: the packaged MNIST digits with a small residual MLP
# with batch norm (wide blocks).
from torch import nn

train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 64
num_epochs = 4
optimizer = {"class": "sgd", "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4}
learning_rate = 0.05
learning_rates = [0.05, 0.05, 0.05, 0.01]


class WideBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm1d(width),
            nn.ReLU(),
            nn.Linear(width, width),
            nn.BatchNorm1d(width),
            nn.ReLU(),
            nn.Linear(width, width),
        )

    def forward(self, x):
        return x + self.body(x)


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Linear(784, 256), WideBlock(256), WideBlock(256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 10)
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
