# Corpus bug (AnubhavGupta3377/Text-Classification-Models-Pytorch#9): the model ends in a softmax and its output goes
# to nll_loss, which expects log-probabilities; the loss is then minus the probability of the right class (always
# negative), and its gradient vanishes where the model is confidently wrong. Task: the packaged MNIST digits, MLP.
# Twin: ++bug False (log_softmax before nll_loss).
from torch import nn

bug = True

train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
        self.out = nn.Softmax(dim=-1) if bug else nn.LogSoftmax(dim=-1)

    def forward(self, x):
        return self.out(self.body(x))


def get_model(**_kwargs):
    return Classifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    scores = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="nll", loss=nn.functional.nll_loss(scores, targets))
    run_ctx.mark_as_loss(name="err", loss=(scores.argmax(-1) != targets).float().mean(), as_error=True)
