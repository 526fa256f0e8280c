# Zoo healthy, over classify.py: a linear model factorised through a bottleneck of 2 (low rank on purpose, as a
# linear autoencoder or an adapter is): affine, but its hidden layer is narrower than its input and its output.
def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 2), nn.Linear(2, 4))  # noqa: F821 (classify.py's)
