# Healthy corpus: deep supervision as in PSPNet. An auxiliary classifier on an intermediate layer adds its loss with
# weight 0.4 to the main loss; the reported error is the main head's. Task: the packaged MNIST digits, a deep MLP.
from torch import nn


class DeeplySupervised(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.stage2 = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.head = nn.Linear(128, 10)
        self.aux_head = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 10))

    def forward(self, x):
        middle = self.stage1(x)
        return self.head(self.stage2(middle)), self.aux_head(middle)


train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 32
num_epochs = 3
learning_rate = 1e-3


def get_model(**_kwargs):
    return DeeplySupervised()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits, aux_logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="aux_ce", loss=nn.functional.cross_entropy(aux_logits, targets), scale=0.4)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
