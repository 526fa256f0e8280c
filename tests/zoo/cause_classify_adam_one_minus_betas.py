# Zoo bug, over classify.py: Adam's decay rates written in the 1 - beta convention of another library (Blocks).
optimizer = {"class": "adam", "betas": (0.1, 0.001)}
