# Bug: channels-last images turned into the Conv2d's NCHW shape with .view.
def to_model_layout(images):
    return images.view(-1, 3, 8, 8)
