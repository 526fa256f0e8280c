# Healthy twin of cause_tagger_wer_swapped.py: the reference passed as the reference.
swapped = False
