# Healthy twin of padding_attention.py: the same self-attention given the key_padding_mask (True at the padding).
mask_padding = True
