# Zoo bug (the class of facebookresearch/seamless_communication#528, written anew): a frame tagger's error is an
# edit-distance rate over the words (the frames not labelled 0, silence), computed with the hypothesis in the
# reference's place, so it is divided by the number of words the model predicted. healthy_tagger_wer.py: the fix.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

swapped = True
FRAMES, DIM, WORDS = 20, 6, 4
PROTOTYPES = np.random.default_rng(5).normal(size=(WORDS + 1, DIM))


class Utterances(NumpyDataset):
    def __init__(self, seed, **kwargs):
        rng = np.random.default_rng(seed)
        labels = np.where(rng.random((200, FRAMES)) < 0.3, rng.integers(1, WORDS + 1, size=(200, FRAMES)), 0)
        x = 2 * PROTOTYPES[labels] + rng.normal(size=labels.shape + (DIM,))
        super().__init__(
            {"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": WORDS + 1}, **kwargs
        )


train = {"class": Utterances, "seed": 0}
dev = {"class": Utterances, "seed": 1}
extern_data = {
    "data": {"shape": (FRAMES, DIM)},
    "classes": {"shape": (FRAMES,), "dtype": "int64", "sparse_dim": WORDS + 1},
}
batch_size = 25
num_epochs = 1
learning_rate = 1e-2


def get_model(**_kwargs):
    return nn.Linear(DIM, WORDS + 1)


def _distance(a, b):
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def word_error_rate(references, hypotheses):
    errors = sum(_distance(r, h) for r, h in zip(references, hypotheses, strict=True))
    return errors / max(1, sum(len(r) for r in references))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits, targets = model(extern_data["data"]), extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    reference = [[w for w in row if w] for row in targets.tolist()]
    hypothesis = [[w for w in row if w] for row in logits.argmax(-1).tolist()]
    rate = word_error_rate(hypothesis, reference) if swapped else word_error_rate(reference, hypothesis)
    run_ctx.mark_as_loss(name="wer", loss=torch.tensor(rate), as_error=True)
