# Library zoo: a healthy small ResNet written the torchvision way (conv stem, BasicBlocks with batch norm,
# torchvision's initialisation, adaptive average pooling, torch.flatten, a linear head) classifying 3x8x8
# images by which quadrant is brightest.
import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(2)
_y = _rng.integers(0, 4, 160)
_x = _rng.normal(size=(160, 3, 8, 8)).astype(np.float32)
for _i, _q in enumerate(_y):
    _x[_i, :, 4 * (_q // 2) : 4 * (_q // 2) + 4, 4 * (_q % 2) : 4 * (_q % 2) + 4] += 1.5
train = {"class": "NumpyDataset", "arrays": {"data": _x[:128], "classes": _y[:128]}, "sparse_dims": {"classes": 4}}
dev = {"class": "NumpyDataset", "arrays": {"data": _x[128:], "classes": _y[128:]}, "sparse_dims": {"classes": 4}}
extern_data = {"data": {"shape": (3, 8, 8)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 1
optimizer = {"class": "sgd", "momentum": 0.9}
learning_rate = 0.05


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, layers=(1, 1), num_classes=4, zero_init_residual=False):
        super().__init__()
        self.inplanes = 8
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(8, layers[0])
        self.layer2 = self._make_layer(16, layers[1], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes, kernel_size=1, stride=stride, bias=False), nn.BatchNorm2d(planes)
            )
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def get_model(*, epoch, step, **_kwargs):
    return ResNet()


def loss_of(logits, targets):
    return nn.functional.cross_entropy(logits, targets)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=loss_of(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
