# Zoo bug (the class of urchade/GLiNER#378, written anew): documents are cut to their first MAX_LEN tokens when the
# dataset is built, and the one word that gives a document's class sits anywhere in it, so a cut document has lost
# it most of the time. ++cue_early True: the cue sits in the first tokens, and the same cut costs nothing (quiet).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

cue_early = False
FILLER, CLASSES, MAX_LEN = 30, 4, 24


class Documents(NumpyDataset):
    def __init__(self, seed, n, **kwargs):
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, CLASSES, size=n)
        docs = []
        for label in labels:
            words = rng.integers(1, FILLER + 1, size=int(rng.integers(10, 81)))
            words[rng.integers(0, 8 if cue_early else len(words))] = FILLER + 1 + label
            docs.append(words[:MAX_LEN].astype(np.int64))
        super().__init__({"data": docs, "classes": labels}, sparse_dims={"data": FILLER + CLASSES + 1}, **kwargs)


train = {"class": Documents, "seed": 0, "n": 600}
dev = {"class": Documents, "seed": 1, "n": 240}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": FILLER + CLASSES + 1},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
}
batch_size = 1000
max_seqs = 32
num_epochs = 3
learning_rate = 5e-2


def get_model(**_kwargs):
    return nn.ModuleDict({"embed": nn.Embedding(FILLER + CLASSES + 1, 16, padding_idx=0), "out": nn.Linear(16, 4)})


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    real = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    pooled = model["embed"](tokens).masked_fill(~real[..., None], float("-inf")).amax(dim=1)
    logits = model["out"](pooled)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
