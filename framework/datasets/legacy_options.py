"""RETURNN's ``Dataset`` parameters of its TensorFlow era, which every RETURNN dataset accepts.

Configs carry them at their defaults (``window=1``, ``context_window=None``, ...), and those are accepted; any other
value changes what the model sees in a way the torch engine does not do here, and stops the run with the way
forward. ``estimated_num_seqs`` only feeds RETURNN's progress estimate before an epoch's size is known: accepted,
without effect (the size is known here).
"""

from __future__ import annotations

from typing import Any

from framework.base.errors import ConfigError

#: parameter -> (its default, what to do instead of another value)
LEGACY_PARAMETERS: dict[str, tuple[Any, str]] = {
    "window": (
        1,
        "RETURNN stacks frames for it only in HDFDataset and its generating datasets with dense inputs (this class "
        "stops on it in RETURNN, or is no RETURNN class); stack neighbouring frames in the model "
        "(torch.nn.functional.unfold, or a Conv1d)",
    ),
    "context_window": (None, "pad and stack the context frames in the model"),
    "chunking": (None, "set the config's chunking option, which cuts the batches' sequences as RETURNN does"),
    "min_chunk_size": (0, "set it in the config's chunking option"),
    "chunking_variance": (0, "set it in the config's chunking option"),
    "shuffle_frames_of_nseqs": (0, "shuffle the frames in a PostprocessingDataset map_seq_stream"),
}


def check_legacy_parameters(owner: str, values: dict[str, Any]) -> None:
    """ConfigError for the first legacy parameter in ``values`` that is not at its default."""
    for name, value in values.items():
        default, instead = LEGACY_PARAMETERS[name]
        if value != default and not (name == "chunking" and value in ("0", 0)):
            raise ConfigError(
                f"{owner}: {name} = {value!r}: RETURNN's dataset-level {name} (a TensorFlow-era feature) is not "
                f"available here; {instead}. Its default ({default!r}) is accepted."
            )
