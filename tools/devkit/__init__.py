"""The development harness: preloaded child processes, the docs' commands, alternating timings."""
