# Healthy corpus: a residual MLP whose blocks end in a zero-initialised linear layer, so the network starts as the
# identity plus its input and output projections (the zero_init_residual practice).
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 16, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 16, "num_classes": 4}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 1e-3


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(64)
        self.up = nn.Linear(64, 128)
        self.down = nn.Linear(128, 64)
        nn.init.zeros_(self.down.weight)
        nn.init.zeros_(self.down.bias)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(16, 64), *[Block() for _ in range(4)], nn.LayerNorm(64), nn.Linear(64, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
