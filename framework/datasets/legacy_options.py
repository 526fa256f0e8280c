"""RETURNN's ``Dataset`` parameters of its TensorFlow era, which every RETURNN dataset accepts.

``chunking``, ``context_window``, ``min_chunk_size`` and ``chunking_variance`` of a dataset dict set the dataset's
own chunking, which only RETURNN's TensorFlow batch generator reads (``Dataset.iterate_seqs``): its torch engine
reads the sequences whole and cuts every dataset by the config's ``chunking`` alone (``Engine._create_data_loader``),
so its batches are the same with or without them: accepted at any value, said once in the log. ``window`` is
RETURNN's context window where the class stacks frames (``context_window.py``); for the other classes it is accepted
at 1 only, as is ``shuffle_frames_of_nseqs`` at 0: another value stops the run with the way forward.
``estimated_num_seqs`` only feeds RETURNN's progress estimate before an epoch's size is known: accepted, without
effect (the size is known here).
"""

from __future__ import annotations

from typing import Any

from framework.base import log
from framework.base.errors import ConfigError

#: parameter -> (its default, what to do instead of another value)
LEGACY_PARAMETERS: dict[str, tuple[Any, str]] = {
    "window": (
        1,
        "RETURNN stacks frames for it only in HDFDataset and its generating datasets with dense inputs (this class "
        "stops on it in RETURNN, or is no RETURNN class); stack neighbouring frames in the model "
        "(torch.nn.functional.unfold, or a Conv1d)",
    ),
    "shuffle_frames_of_nseqs": (0, "shuffle the frames in a PostprocessingDataset map_seq_stream"),
}


#: parameter -> its default; RETURNN's torch engine gives the same batches with any value (see the module)
WITHOUT_EFFECT: dict[str, Any] = {"context_window": None, "chunking": None, "min_chunk_size": 0, "chunking_variance": 0}


def check_legacy_parameters(owner: str, values: dict[str, Any]) -> None:
    """ConfigError for the first legacy parameter in ``values`` that is not at its default; a log line for those
    without effect in RETURNN's torch engine."""
    ignored = {
        name: value
        for name, value in values.items()
        if name in WITHOUT_EFFECT and value not in (WITHOUT_EFFECT[name], "0")
    }
    if ignored:
        log.v3(
            f"{owner}: {', '.join(f'{name} = {value!r}' for name, value in ignored.items())}: the dataset's own "
            f"chunking, which only RETURNN's TensorFlow batch generator reads; its torch engine cuts the sequences by "
            f"the config's chunking alone, and so here (the batches are the same without it)."
        )
    for name, value in values.items():
        if name in WITHOUT_EFFECT:
            continue
        default, instead = LEGACY_PARAMETERS[name]
        if value != default:
            raise ConfigError(
                f"{owner}: {name} = {value!r}: RETURNN's dataset-level {name} (a TensorFlow-era feature) is not "
                f"available here; {instead}. Its default ({default!r}) is accepted."
            )
