"""The engine core: the loop, its state and events, the plugin seam, running a step."""
