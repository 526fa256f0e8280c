"""Sphinx configuration: ``sphinx-build docs docs/_build``."""

project = "framework"
extensions = []
exclude_patterns = ["_build"]
