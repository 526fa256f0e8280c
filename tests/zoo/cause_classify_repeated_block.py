# Zoo bug, over classify.py: a deeper MLP built with nn.Sequential(*[block] * 3), one hidden block three times.
def get_model(**_kwargs):
    block = nn.Sequential(nn.Linear(32, 32), nn.ReLU())  # noqa: F821 (classify.py's)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), *[block] * 3, nn.Linear(32, 4))  # noqa: F821
