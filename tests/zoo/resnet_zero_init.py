# Zoo: a healthy small ResNet built the way timm builds it: BasicBlocks whose last BatchNorm weight
# starts at zero (timm's zero_init_last, on by default), so that each residual block starts as the
# identity. At step 0 no gradient reaches the convolutions inside a block (the zero weight blocks
# it), by design: after the first update it flows.
from torch import nn

train = {
    "class": "ObjectPatchesDataset",
    "split": "train",
    "num_seqs": 1000,
    "size": 12,
    "max_box": 8,
    "noise_std": 0.1,
}
dev = {"class": "ObjectPatchesDataset", "split": "test", "num_seqs": 1000, "size": 12, "max_box": 8, "noise_std": 0.1}
extern_data = {
    "data": {"shape": (12, 12)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 3},
    "boxes": {"shape": (4,)},
}
batch_size = 32
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.05}
learning_rate = 3e-3


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.act1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.act2 = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def zero_init_last(self):
        nn.init.zeros_(self.bn2.weight)

    def forward(self, x):
        shortcut = x
        x = self.act1(self.bn1(self.conv1(x)))
        x = self.bn2(self.conv2(x))
        if self.downsample is not None:
            shortcut = self.downsample(shortcut)
        return self.act2(x + shortcut)


class ResNet(nn.Module):
    def __init__(self, channels=(8, 16), num_classes=3, zero_init_last=True):
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels[0])
        self.act1 = nn.ReLU(inplace=True)
        blocks, cin = [], channels[0]
        for i, c in enumerate(channels):
            blocks += [BasicBlock(cin, c, stride=1 if i == 0 else 2), BasicBlock(c, c)]
            cin = c
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():  # timm's ResNet init
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if zero_init_last:
            for m in self.modules():
                if hasattr(m, "zero_init_last"):
                    m.zero_init_last()

    def forward(self, x):
        x = self.act1(self.bn1(self.conv1(x[:, None])))
        x = self.layers(x)
        return self.fc(x.mean(dim=(2, 3)))


def get_model(*, epoch, step, **_kwargs):
    return ResNet()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
