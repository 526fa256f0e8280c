# Healthy corpus: an MLP whose linear layers are reparametrised with torch.nn.utils.parametrizations.weight_norm
# (a magnitude and a direction per layer instead of the weight).
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 16, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 16, "num_classes": 4}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(weight_norm(nn.Linear(16, 64)), nn.ReLU(), weight_norm(nn.Linear(64, 4)))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
