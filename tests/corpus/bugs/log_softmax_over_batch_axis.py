# Corpus bug (MicrosoftDocs/pytorchfundamentals#4): the tutorial's dense network ends in nn.LogSoftmax(dim=0) before
# NLLLoss; on a batch of shape (B, 10) dim 0 is the batch axis, so each class's scores are normalised across the
# examples of the batch instead of each example's scores across the classes, and the loss trains the model to rank
# examples within a class rather than classes within an example. Task: the tutorial's setting in small, the packaged
# MNIST digits and its one-layer network (Flatten, Linear(784, 10), LogSoftmax) trained by NLLLoss; the prediction
# is the argmax of the network's output, as the tutorial's evaluation takes it. Twin: ++bug False (LogSoftmax(dim=1)).
from torch import nn

bug = True

train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 64
num_epochs = 5
learning_rate = 1e-2


def get_model(**_kwargs):
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.LogSoftmax(dim=0 if bug else 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    out = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="nll", loss=nn.NLLLoss()(out, targets))
    run_ctx.mark_as_loss(name="err", loss=(out.argmax(1) != targets).float().mean(), as_error=True)
