# Bug (on resnet_zero_init.py): in the last residual block the ReLU after bn1 never fires (bn1's bias was
# set to a large negative constant), so that branch stays dead: no gradient reaches conv1, bn1 or
# conv2, and bn2's zero weight, whose input is now constant, never gets one either. The other blocks
# only start at zero (zero_init_last) and learn after the first update.
from torch import nn


def get_model(*, epoch, step, **_kwargs):
    model = ResNet()  # noqa: F821 (defined by resnet_zero_init.py, loaded first)
    nn.init.constant_(model.layers[3].bn1.bias, -100.0)
    return model
