# Corpus bug (facebookresearch/seamless_communication#528): the evaluation computed the word error rate with the
# hypothesis and the reference in each other's place; the edit distance is the same either way, but WER divides it by
# the reference's length, so the score was divided by the length of the model's output instead, and a model that
# drops words is reported worse than it is. Task: a frame tagger over 40 frames (an utterance) whose frames are
# silence (label 0, 70% of them) or one of 8 words, from noisy 12-d features and their neighbours (a BiGRU); the
# transcript is the sequence of non-silence labels, the hypothesis the sequence of non-silence predictions, and 'err'
# is the corpus WER of a batch, sum of edit distances / sum of reference lengths. Both runs train the same model; the
# bug is in the metric. Twin: ++bug False (the reference is passed as the reference).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
FRAMES, DIM, WORDS = 40, 12, 8
PROTOTYPES = np.random.default_rng(52).normal(size=(WORDS + 1, DIM))


class Utterances(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 1200 if split == "train" else 300
        labels = np.where(rng.random((n, FRAMES)) < 0.3, rng.integers(1, WORDS + 1, size=(n, FRAMES)), 0)
        x = 0.8 * PROTOTYPES[labels] + rng.normal(size=(n, FRAMES, DIM))
        super().__init__(
            {"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": WORDS + 1}, **kwargs
        )


train = {"class": Utterances, "split": "train"}
dev = {"class": Utterances, "split": "dev"}
extern_data = {
    "data": {"shape": (FRAMES, DIM)},
    "classes": {"shape": (FRAMES,), "dtype": "int64", "sparse_dim": WORDS + 1},
}
batch_size = 32
num_epochs = 4
learning_rate = 3e-3


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(DIM, 48, batch_first=True, bidirectional=True)
        self.out = nn.Linear(96, WORDS + 1)

    def forward(self, x):
        return self.out(self.rnn(x)[0])


def get_model(**_kwargs):
    return Tagger()


def edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def wer(references, hypotheses):
    """Corpus word error rate: the edit distance over the number of reference words."""
    errors = sum(edit_distance(r, h) for r, h in zip(references, hypotheses, strict=True))
    return errors / max(1, sum(len(r) for r in references))


def transcripts(labels):
    return [[int(v) for v in row if v != 0] for row in labels.tolist()]


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    if run_ctx.stage != "train":
        reference, hypothesis = transcripts(targets), transcripts(logits.argmax(-1))
        score = wer(hypothesis, reference) if bug else wer(reference, hypothesis)  # bug read at call time
        run_ctx.mark_as_loss(name="err", loss=torch.tensor(score), as_error=True)
