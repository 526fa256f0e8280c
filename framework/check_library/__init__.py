"""Libraries the diagnostics share: describing tensors and frames, tracking modules, probing a step."""
