# Bug: the attention mask marks the padding (1 at pad tokens), the opposite of transformers' convention
# (1 = attend): the real tokens are hidden and the padding attended.
def attention_mask(tokens, lengths):
    return (tokens == 0).long()
