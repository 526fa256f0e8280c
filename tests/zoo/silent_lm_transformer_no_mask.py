# Bug: the transformer language model without a causal mask: attention reads the next token, the one it
# is asked to predict.
def get_model(*, epoch, step, **_kwargs):
    return TransformerLM(causal=False)
