# Zoo bug (after open-mmlab/mmselfsup#159, written anew): the two views of a batch are concatenated, [all first views,
# all second views], but NT-Xent's positives assume interleaved views (i ^ 1), so every row's positive is a view of
# another example. ++interleaved_targets False is the healthy twin (the positive of i is i + N modulo 2N).
# ++one_draw True (with interleaved_targets False): both views from one noise draw, so each positive is an exact copy.
import torch
from torch import nn

interleaved_targets = True
one_draw = False
train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 64, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 64, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 1


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    noise = 0.1 * torch.randn_like(x)
    views = torch.cat([x + noise, x + (noise if one_draw else 0.1 * torch.randn_like(x))])
    z = nn.functional.normalize(model(views), dim=1)
    eye = torch.eye(len(z), dtype=torch.bool, device=z.device)
    similarity = (z @ z.t() / 0.5).masked_fill(eye, float("-inf"))
    index = torch.arange(len(z), device=z.device)
    positives = index ^ 1 if interleaved_targets else (index + len(x)) % len(z)
    run_ctx.mark_as_loss(name="nt_xent", loss=nn.functional.cross_entropy(similarity, positives))
