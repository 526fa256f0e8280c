# Zoo bug, over classify.py: a batch norm ported from a Keras model, its momentum=0.9 copied as it was.
def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32, momentum=0.9), nn.ReLU(), nn.Linear(32, 4))  # noqa: F821
