# Healthy corpus: a linear probe. A feature extractor (here randomly initialised and wide) is frozen with
# requires_grad_(False), as linear-probing code does, and only the linear head on its features is trained.
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 16, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 16, "num_classes": 4}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 3e-3


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 256), nn.ReLU()).requires_grad_(False)
        self.head = nn.Linear(256, 4)

    def forward(self, x):
        return self.head(self.backbone(x))


def get_model(**_kwargs):
    return Probe()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
