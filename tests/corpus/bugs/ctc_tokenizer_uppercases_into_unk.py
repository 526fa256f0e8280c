# Corpus bug (sanchit-gandhi/seq2seq-speech#23): the CTC tokenizer (transformers' Wav2Vec2CTCTokenizer) is loaded with
# do_lower_case=True while its vocabulary holds lower-case characters; that option upper-cases the text, so every
# letter becomes the <unk> id and only the word delimiters survive, and the CTC targets carry no characters. Task:
# synthetic utterances of 2-3 words over the letters a-h, each letter emitting 2-4 noisy frames of its own pattern and
# each word boundary a pause; transcripts are tokenised by the library tokenizer (vocabulary written at config load:
# <pad> 0 = the CTC blank, <unk> 1, | 2, a-h), a bidirectional LSTM is trained with nn.CTCLoss. The error is the
# character error rate of greedy CTC decoding against the reference transcript's characters. Twin: ++bug False
# (do_lower_case=False).
import json
import os
import tempfile

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
LETTERS, FEATURES, HIDDEN = "abcdefgh", 10, 48
VOCAB = {"<pad>": 0, "<unk>": 1, "|": 2, **{ch: i + 3 for i, ch in enumerate(LETTERS)}}
BLANK, SIZE = 0, len(VOCAB)
PATTERNS = np.random.default_rng(37).normal(size=(SIZE, FEATURES))


def tokenizer(lower_case):
    from transformers import Wav2Vec2CTCTokenizer

    folder = tempfile.mkdtemp(prefix="ctc_vocab_")
    with open(os.path.join(folder, "vocab.json"), "w") as f:
        json.dump(VOCAB, f)
    return Wav2Vec2CTCTokenizer(os.path.join(folder, "vocab.json"), word_delimiter_token="|", do_lower_case=lower_case)


class Utterances(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        tok = tokenizer(lower_case=bug)
        frames, labels, references = [], [], []
        for _ in range(1500 if split == "train" else 200):
            words = ["".join(rng.choice(list(LETTERS), size=rng.integers(2, 5))) for _ in range(rng.integers(2, 4))]
            text = " ".join(words)
            reference = [VOCAB["|" if ch == " " else ch] for ch in text]
            feats = [PATTERNS[r] + 0.5 * rng.normal(size=(rng.integers(2, 5), FEATURES)) for r in reference]
            frames.append(np.concatenate(feats).astype(np.float32))
            labels.append(np.asarray(tok(text).input_ids, dtype=np.int64))
            references.append(np.asarray(reference, dtype=np.int64))
        arrays = {"data": frames, "labels": labels, "reference": references}
        super().__init__(arrays, sparse_dims={"labels": SIZE, "reference": SIZE}, **kwargs)


train = {"class": Utterances, "split": "train"}
dev = {"class": Utterances, "split": "dev"}
extern_data = {
    "data": {"shape": (None, FEATURES)},
    "labels": {"shape": (None,), "dtype": "int64", "sparse_dim": SIZE},
    "reference": {"shape": (None,), "dtype": "int64", "sparse_dim": SIZE},
}
batch_size = 1200
max_seqs = 32
num_epochs = 4
learning_rate = 3e-3


class Acoustic(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, HIDDEN, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * HIDDEN, SIZE)

    def forward(self, frames):
        return self.out(self.lstm(frames)[0])


def get_model(**_kwargs):
    return Acoustic()


def edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def character_error_rate(log_probs, lengths, references, reference_lengths):
    errors, total = 0, 0
    for i, best in enumerate(log_probs.argmax(-1).cpu()):
        path = best[: int(lengths[i])].tolist()
        decoded = [p for j, p in enumerate(path) if p != BLANK and (j == 0 or p != path[j - 1])]
        wanted = references[i, : int(reference_lengths[i])].tolist()
        errors += edit_distance(decoded, wanted)
        total += len(wanted)
    return errors / total


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    lengths = extern_data["data:seq_len"]
    log_probs = model(extern_data["data"]).log_softmax(-1)
    labels, label_lengths = extern_data["labels"], extern_data["labels:seq_len"]
    loss = nn.CTCLoss(blank=BLANK, zero_infinity=True)(
        log_probs.transpose(0, 1), labels, lengths.cpu(), label_lengths.cpu()
    )
    run_ctx.mark_as_loss(name="ctc", loss=loss)
    if not model.training:
        cer = character_error_rate(
            log_probs.detach(), lengths, extern_data["reference"].cpu(), extern_data["reference:seq_len"]
        )
        run_ctx.mark_as_loss(name="err", loss=torch.tensor(cer), as_error=True)
