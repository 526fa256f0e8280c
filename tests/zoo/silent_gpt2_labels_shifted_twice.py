# Bug: the labels are shifted by hand and then again by GPT2LMHeadModel (which shifts labels=... itself):
# the model is asked for the token two positions ahead.
import torch


def labels_of(tokens, mask):
    labels = torch.full_like(tokens, -100)
    labels[:, :-1] = tokens[:, 1:].masked_fill(~mask[:, 1:], -100)
    return labels
