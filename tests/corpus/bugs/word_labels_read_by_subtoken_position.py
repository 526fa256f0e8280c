# Corpus bug (kermitt2/delft#242): a transformer tagger predicts one label per sub-token, special tokens included,
# but the tagger paired the words of a text with those predictions position by position, so the first word took the
# label predicted for [CLS] and every word after one split into several sub-tokens took the label of an earlier
# position; the training and its own evaluation on first sub-tokens were right. Task: tagging words with one of 3
# tags that follow from the word and its left neighbour; a fixed word-piece tokenizer splits each of 40 words into 1
# to 3 pieces; the model is a tiny transformers BertForTokenClassification (from a config, no download) trained on
# labels at each word's first piece (-100 elsewhere). 'err' is the word error of the tags the tagger returns for the
# words. Both runs train the same model: the bug is in how the tags are read. Twin: ++bug False (each word's tag is
# read at its first piece).
import numpy as np

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
WORDS, TAGS, MAX_WORDS, PAD, CLS, SEP = 40, 3, 12, 0, 1, 2
_split = np.random.default_rng(29)
PIECES = [list(range(3 + 3 * w, 3 + 3 * w + int(_split.integers(1, 4)))) for w in range(WORDS)]  # word -> piece ids
VOCAB = 3 + 3 * WORDS
MAX_LEN = 2 + 3 * MAX_WORDS


def sentences(seed, n):
    rng = np.random.default_rng(seed)
    ids = np.full((n, MAX_LEN), PAD, dtype=np.int64)
    labels = np.full((n, MAX_LEN), -100, dtype=np.int64)
    word_tags = np.full((n, MAX_WORDS), -1, dtype=np.int64)
    word_starts = np.zeros((n, MAX_WORDS), dtype=np.int64)
    for i in range(n):
        words = rng.integers(0, WORDS, size=int(rng.integers(6, MAX_WORDS + 1)))
        pieces, position = [CLS], 1
        for j, word in enumerate(words):
            tag = (word + (words[j - 1] if j else 0)) % TAGS
            word_tags[i, j], word_starts[i, j], labels[i, position] = tag, position, tag
            pieces += PIECES[word]
            position += len(PIECES[word])
        pieces.append(SEP)
        ids[i, : len(pieces)] = pieces
    return ids, labels, word_tags, word_starts


class Sentences(NumpyDataset):
    def __init__(self, split, **kwargs):
        ids, labels, tags, starts = sentences(0 if split == "train" else 1, 3000 if split == "train" else 500)
        arrays = {"data": ids, "labels": labels, "word_tags": tags, "word_starts": starts}
        super().__init__(arrays, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": Sentences, "split": "train"}
dev = {"class": Sentences, "split": "dev"}
extern_data = {
    "data": {"shape": (MAX_LEN,), "dtype": "int64", "sparse_dim": VOCAB},
    "labels": {"shape": (MAX_LEN,), "dtype": "int64"},
    "word_tags": {"shape": (MAX_WORDS,), "dtype": "int64"},
    "word_starts": {"shape": (MAX_WORDS,), "dtype": "int64"},
}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3


def get_model(**_kwargs):
    from transformers import BertConfig, BertForTokenClassification

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=MAX_LEN,
        num_labels=TAGS,
        pad_token_id=PAD,
    )
    return BertForTokenClassification(config)


def tag_words(predicted, word_starts):
    """The tagger's output: a tag for each word of the text, from the per-piece predictions [B, T]."""
    if bug:  # the words paired with the predictions position by position
        return predicted[:, :MAX_WORDS]
    return predicted.gather(1, word_starts)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    ids = extern_data["data"]
    out = model(input_ids=ids, attention_mask=(ids != PAD).long(), labels=extern_data["labels"])
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
    tags, real = tag_words(out.logits.argmax(-1), extern_data["word_starts"]), extern_data["word_tags"] >= 0
    wrong = (tags != extern_data["word_tags"]) & real
    run_ctx.mark_as_loss(name="err", loss=wrong.sum().float() / real.sum(), as_error=True)
