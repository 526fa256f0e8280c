# Healthy corpus (on healthy_vectors.py): metric learning with a triplet loss and in-batch mining, as the
# metric-learning tutorials write it: for each anchor the hardest positive and the hardest negative of the
# batch (batch-hard, Hermans et al.), nn.functional.triplet_margin_loss on L2-normalised embeddings.
import torch
from torch import nn

batch_size = 32


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 16))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    emb = nn.functional.normalize(model(extern_data["data"]), dim=-1)
    labels = extern_data["classes"]
    dist = torch.cdist(emb, emb)
    same = labels[:, None] == labels[None, :]
    positive = emb[(dist * same).argmax(1)]
    negative = emb[dist.masked_fill(same, float("inf")).argmin(1)]
    run_ctx.mark_as_loss(name="triplet", loss=nn.functional.triplet_margin_loss(emb, positive, negative, margin=0.2))
