# Bug: a bidirectional LSTM as a next-token model: the backward direction reads the token to predict.
def get_model(*, epoch, step, **_kwargs):
    return LanguageModel(bidirectional=True)
