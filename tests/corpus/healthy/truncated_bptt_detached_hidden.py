# Healthy corpus: an LSTM language model reads a long token stream as 16 parallel streams cut into consecutive chunks
# of 20 tokens (pytorch/examples word_language_model: batchify, get_batch); the hidden state that ends one chunk is
# detached (repackage_hidden) and starts the next chunk of the same streams, in training and evaluation, and is reset
# only at the start of each pass over the data. Task: a toy language whose next token depends on a "topic" set at the
# start of long paragraphs, so carrying the state across chunks helps. The error is the next-token error.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, STREAMS, BPTT, TOPICS = 24, 16, 20, 4


def stream(rng, length):
    """Paragraphs of 60 tokens: a topic marker, then tokens drawn from the topic's own cycle."""
    tokens = []
    cycles = np.random.default_rng(2).integers(TOPICS, VOCAB, size=(TOPICS, 5))
    while len(tokens) < length:
        topic = int(rng.integers(0, TOPICS))
        tokens.append(topic)
        start = int(rng.integers(0, 5))
        tokens.extend(cycles[topic][(start + np.arange(59)) % 5])
    return np.array(tokens[:length], dtype=np.int64)


class Chunks(NumpyDataset):
    """Item k * STREAMS + s is chunk k of stream s, so each batch of STREAMS items continues the previous one."""

    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        chunks = 120 if split == "train" else 30
        streams = [stream(rng, chunks * BPTT + 1) for _ in range(STREAMS)]
        items = [streams[s][k * BPTT : (k + 1) * BPTT + 1] for k in range(chunks) for s in range(STREAMS)]
        super().__init__({"data": np.stack(items)}, sparse_dims={"data": VOCAB}, seq_ordering="default", **kwargs)


train = {"class": Chunks, "split": "train"}
dev = {"class": Chunks, "split": "dev"}
extern_data = {"data": {"shape": (BPTT + 1,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = STREAMS
num_epochs = 3
learning_rate = 5e-3


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(VOCAB, 32)
        self.rnn = nn.LSTM(32, 64, batch_first=True)
        self.decoder = nn.Linear(64, VOCAB)
        self.hidden = None

    def forward(self, tokens):
        if self.hidden is not None and self.hidden[0].shape[1] != tokens.shape[0]:
            self.hidden = None
        output, hidden = self.rnn(self.encoder(tokens), self.hidden)
        self.hidden = tuple(h.detach() for h in hidden)  # repackage_hidden
        return self.decoder(output)


def get_model(**_kwargs):
    return RNNModel()


def epoch_start(*, model, **_kwargs):
    """Called before each pass over the train or the dev data: the streams start again (init_hidden)."""
    model.hidden = None


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    logits = model(tokens[:, :-1])
    targets = tokens[:, 1:]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.transpose(1, 2), targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
