# Corpus bug (ibalazevic/TuckER#17): the relation embedding is built with padding_idx=0, but id 0 is a real relation:
# its vector stays zero and never gets a gradient. Task: link prediction (head, relation) -> tail with a multiplicative
# (DistMult-style) score, so a zero relation vector scores every tail alike. Twin: ++bug False (no padding_idx).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
ENTITIES, RELATIONS = 24, 4


class Triples(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 4000 if split == "train" else 800
        head, relation = rng.integers(0, ENTITIES, size=n), rng.integers(0, RELATIONS, size=n)
        tail = (head * (relation + 1) + 5 * relation) % ENTITIES
        arrays = {"head": head, "relation": relation, "classes": tail}
        super().__init__(arrays, sparse_dims={"head": ENTITIES, "relation": RELATIONS, "classes": ENTITIES}, **kwargs)


train = {"class": Triples, "split": "train"}
dev = {"class": Triples, "split": "dev"}
extern_data = {
    "head": {"shape": (), "dtype": "int64", "sparse_dim": ENTITIES},
    "relation": {"shape": (), "dtype": "int64", "sparse_dim": RELATIONS},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": ENTITIES},
}
batch_size = 64
num_epochs = 3
learning_rate = 1e-2


class DistMult(nn.Module):
    def __init__(self):
        super().__init__()
        self.entity = nn.Embedding(ENTITIES, 64)
        self.relation = nn.Embedding(RELATIONS, 64, padding_idx=0 if bug else None)
        self.mix = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64))

    def forward(self, head, relation):
        query = self.mix(self.entity(head) * self.relation(relation))
        return query @ self.entity.weight.T


def get_model(**_kwargs):
    return DistMult()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["head"], extern_data["relation"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
