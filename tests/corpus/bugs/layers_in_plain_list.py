# Corpus bug (ikostrikov/pytorch-meta-optimizer#11): hidden layers kept in a plain Python list are not registered,
# so the optimizer never sees them and they keep their random weights. Task: 4 Gaussian clusters through a deep MLP.
# Twin: ++bug False (nn.ModuleList).
from torch import nn

bug = True

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 3e-3


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(8, 8)
        hidden = [nn.Linear(8, 8) for _ in range(3)]
        self.hidden = hidden if bug else nn.ModuleList(hidden)
        self.out = nn.Linear(8, 4)

    def forward(self, x):
        h = self.first(x).relu()
        for layer in self.hidden:
            h = layer(h).relu()
        return self.out(h)


def get_model(**_kwargs):
    return Deep()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
