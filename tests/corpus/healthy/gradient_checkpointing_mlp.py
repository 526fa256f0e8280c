# Healthy corpus: a deep (8-block) pre-norm residual MLP trained with activation checkpointing: in training every block
# runs under torch.utils.checkpoint.checkpoint(..., use_reentrant=False), so its activations are not kept but
# recomputed in the backward pass (memory for compute, the same gradients). In evaluation the blocks run plainly.
from torch import nn
from torch.utils.checkpoint import checkpoint

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 16, "num_classes": 8}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 16, "num_classes": 8}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 8}}
batch_size = 32
num_epochs = 2
learning_rate = 1e-3
BLOCKS, WIDTH = 8, 64


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(WIDTH), nn.Linear(WIDTH, 2 * WIDTH), nn.GELU(), nn.Linear(2 * WIDTH, WIDTH)
        )

    def forward(self, x):
        return x + self.net(x)


class DeepMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, 8))

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=False) if self.training else block(h)
        return self.head(h)


def get_model(**_kwargs):
    return DeepMlp()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
