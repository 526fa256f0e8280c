# Zoo base (eval-mode integrity): a healthy classifier whose layers differ between training and eval
# mode by design: dropout, batch norm and a spectral-normalised layer, on Gaussian clusters.
# The silent_eval_* bug files redefine one thing of it; run alone, it is their healthy twin.
from torch import nn
from torch.nn import functional as F

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 512, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 512, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 1
optimizer = {"class": "adam"}
learning_rate = 1e-2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(8, 32)
        self.norm = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.2)
        self.mix = nn.utils.spectral_norm(nn.Linear(32, 32))
        self.out = nn.Linear(32, 4)

    def forward(self, x):
        h = self.drop(F.relu(self.norm(self.hidden(x))))
        h = F.dropout(F.relu(self.mix(h)), p=0.1, training=self.training)
        return self.out(h)


def get_model(*, epoch, step, **_kwargs):
    return Net()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=F.cross_entropy(logits, extern_data["classes"]))
