# Healthy corpus: ArcFace (additive angular margin 0.3, scale 16) over L2-normalised embeddings of 8 identities;
# the error is the nearest class centre by cosine.
import torch
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 3000, "dim": 16, "num_classes": 8}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 3000, "dim": 16, "num_classes": 8}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 8}}
batch_size = 32
num_epochs = 2
learning_rate = 2e-3
MARGIN, SCALE = 0.3, 16.0


class ArcFace(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32))
        self.centers = nn.Parameter(torch.randn(8, 32))

    def forward(self, x):
        embedding = nn.functional.normalize(self.embed(x), dim=-1)
        return embedding @ nn.functional.normalize(self.centers, dim=-1).T


def get_model(**_kwargs):
    return ArcFace()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    cosine = model(extern_data["data"])
    targets = extern_data["classes"]
    angle = torch.acos(cosine.clamp(-1 + 1e-6, 1 - 1e-6))
    with_margin = torch.where(nn.functional.one_hot(targets, 8).bool(), torch.cos(angle + MARGIN), cosine)
    run_ctx.mark_as_loss(name="arcface", loss=nn.functional.cross_entropy(SCALE * with_margin, targets))
    run_ctx.mark_as_loss(name="err", loss=(cosine.argmax(-1) != targets).float().mean(), as_error=True)
