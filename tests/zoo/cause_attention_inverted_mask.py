# Bug: the mask given to masked_fill is True at the real tokens (a "keep" mask where the code expects a
# padding mask): every query attends to the padding only.
def padding_mask(tokens, lengths):
    return tokens != 0
