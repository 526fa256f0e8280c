# Healthy corpus (on cause_text.py): a bag-of-words classifier whose embeddings give sparse gradients, trained with
# torch.optim.SparseAdam, as recommenders and word2vec-style models write it: nn.Embedding(sparse=True) for the
# words and for the classes' output vectors (every parameter gets a sparse gradient, as SparseAdam requires).
import torch
from torch import nn

optimizer = {"class": "sparseadam"}
learning_rate = 1e-2
gradient_clip_global_norm = None


class SparseBagOfWords(nn.Module):
    def __init__(self, vocab_size, dim, classes):
        super().__init__()
        self.words = nn.Embedding(vocab_size, dim, sparse=True)
        self.classes = nn.Embedding(classes, dim, sparse=True)

    def forward(self, tokens, lengths):
        mask = (torch.arange(tokens.shape[1], device=tokens.device)[None] < lengths[:, None].to(tokens.device)).float()
        bag = (self.words(tokens) * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return bag @ self.classes(torch.arange(self.classes.num_embeddings, device=tokens.device)).T


def get_model(**_kwargs):
    return SparseBagOfWords(len(vocab), 32, 4)  # noqa: F821 (vocab: from cause_text.py)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["data:seq_len"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
