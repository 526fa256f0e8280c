# Healthy corpus: a top-1 routed mixture-of-experts layer (Switch Transformer style): a softmax router picks one expert
# per example, the expert's output is scaled by its gate probability, and an auxiliary load-balancing loss (number of
# experts times the sum over experts of dispatch share times mean router probability) keeps the router from collapsing.
# The experts see different numbers of examples in a step, and an expert may get none (then no gradient), by design.
import torch
from torch import nn

CLUSTERS = {"class": "GaussianClustersDataset", "num_seqs": 3000, "dim": 16, "num_classes": 8, "separation": 1.0}
train = {**CLUSTERS, "split": "train"}
dev = {**CLUSTERS, "split": "test"}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 8}}
batch_size = 32
num_epochs = 2
learning_rate = 2e-3
EXPERTS, WIDTH, BALANCE_SCALE = 4, 32, 0.01


class SwitchLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(WIDTH, EXPERTS)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(WIDTH, 64), nn.ReLU(), nn.Linear(64, WIDTH)) for _ in range(EXPERTS)
        )

    def forward(self, h):
        probs = self.router(h).softmax(-1)
        gate, choice = probs.max(-1)
        out = torch.zeros_like(h)
        for index, expert in enumerate(self.experts):
            chosen = (choice == index).nonzero(as_tuple=True)[0]
            if len(chosen) > 0:
                out = out.index_add(0, chosen, expert(h[chosen]) * gate[chosen, None])
        dispatch_share = nn.functional.one_hot(choice, EXPERTS).float().mean(0)
        balance = EXPERTS * (dispatch_share * probs.mean(0)).sum()
        return out, balance


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(16, WIDTH), nn.ReLU())
        self.moe = SwitchLayer()
        self.head = nn.Linear(WIDTH, 8)

    def forward(self, x):
        h = self.embed(x)
        moe_out, balance = self.moe(h)
        return self.head(h + moe_out), balance


def get_model(**_kwargs):
    return Model()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits, balance = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="balance", loss=balance, scale=BALANCE_SCALE)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
