"""A gradient-norm clip that cuts every gradient by orders of magnitude (framework.debug.clip_watch): observed over
epoch 1 through the function torch's clip_grad_norm_ ends in, named with the loss scale the norms carry; a clip that
binds now and then, or one before Adam (whose updates do not scale with the gradient), is quiet, and the observation
leaves torch's function as it was."""

from __future__ import annotations

import torch.nn.utils.clip_grad as clip_grad

from conftest import zoo_log
from framework.debug import clip_watch

TRAIN = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 400, "dim": 8, "num_classes": 4}


def test_a_clip_on_gradients_still_multiplied_by_the_loss_scale_is_named_and_one_on_the_loss_itself_is_not():
    original = clip_watch._TORCH_CLIP  # torch's own, whatever an earlier run in this process left in its place
    bug = zoo_log("classify.py", "cause_classify_clip_scaled.py", num_epochs=1, train=TRAIN)
    assert "The gradient-norm clip of gradient_clip_global_norm (max_norm 1) cut 40 of the 40 gradients it saw" in bug
    assert "The losses are marked with scale 65536, and the norms divided by it (median " in bug
    assert clip_grad._clip_grads_with_norm_ is original  # put back at the end of epoch 1
    healthy = zoo_log("classify.py", "cause_classify_clip_scaled.py", loss_scale=1.0, num_epochs=1, train=TRAIN)
    assert "WARNING" not in healthy
    # Adam divides by the gradient's running RMS: a clip that scales every gradient alike leaves its updates as they were
    adam = zoo_log(
        "classify.py", "cause_classify_clip_scaled.py", optimizer={"class": "adam"}, num_epochs=1, train=TRAIN
    )
    assert "gradient-norm clip" not in adam
