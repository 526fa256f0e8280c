# A tiny, fast training config for tests: Gaussian clusters and a small MLP.
import time

from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 200, "dim": 4, "num_classes": 3}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 200, "dim": 4, "num_classes": 3}
extern_data = {
    "data": {"shape": (4,), "dtype": "float32"},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 3},
}
batch_size = 16
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 1e-2
log_verbosity = 4
hidden = 8
step_sleep = 0.0  # seconds per step, so that tests can kill a run mid-epoch


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(nn.Linear(4, hidden), nn.Dropout(0.1), nn.ReLU(), nn.Linear(hidden, 3))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    if step_sleep:
        print("train_step sleeps", flush=True)  # tests wait for this line to signal a run mid-step
        time.sleep(step_sleep)
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)


def forward_step(*, model, extern_data, run_ctx, **_kwargs):
    run_ctx.mark_as_output(name="logits", tensor=model(extern_data["data"]))
