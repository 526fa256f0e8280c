# Corpus bug (microsoft/computervision-recipes#315): output 0 is reserved for the background (ignored by the loss),
# but the dataset's labels start at 0, so the first real class is treated as background and never learned. Task: 4
# object classes of Gaussian clusters. Twin: ++bug False (labels shifted to 1..4).
from torch import nn

bug = True

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 2
learning_rate = 3e-3
BACKGROUND = 0


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 5))  # background + 4 classes


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    labels = extern_data["classes"] if bug else extern_data["classes"] + 1
    loss = nn.functional.cross_entropy(logits, labels, ignore_index=BACKGROUND)
    run_ctx.mark_as_loss(name="ce", loss=loss)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != labels).float().mean(), as_error=True)
