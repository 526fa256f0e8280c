"""RETURNN's ``OggZipDataset``: audio files and their transcriptions in a zip.

The zip ``corpus.zip`` holds ``corpus.txt``, a Python literal list of dicts (``file``, ``seq_name``, ``text``,
``duration`` in seconds), and the audio files under ``corpus/`` (without that prefix if
``zip_audio_files_have_name_as_prefix=False``). Keys: ``data`` (the ``audio`` features, float32 [frames, dim];
without ``audio``, none), ``classes`` (the ``targets`` ids of the text, int32; without ``targets``, none) and
``orth`` (the text's UTF-8 bytes, uint8, sparse_dim 256). RETURNN's ``raw`` key (the text as a string) is not a
tensor and is left out.

The sequence tag is ``seq_name`` (else ``file``). "sorted" and "laplace" orderings sort by the index's durations,
as RETURNN does; the batch plan counts the frames that the durations give (RETURNN uses them for ordering only,
so an index whose durations are far off makes batches bigger or smaller than ``batch_size`` here).
"""

from __future__ import annotations

import gzip
import io
import os
import zipfile
from typing import Any

import numpy as np

from framework.base.errors import ConfigError, DataError
from framework.base.safe_create import refuse_special
from framework.datasets.audio_features import AudioFeatures
from framework.datasets.base import Dataset, note_no_cache_manager
from framework.datasets.epoch_filter import EpochWiseFilter
from framework.datasets.ogg_zip_index import find_archives, read_index
from framework.datasets.orthography import post_processor
from framework.datasets.vocabulary import Vocabulary, create_vocabulary


class OggZipDataset(Dataset):
    """Audio and text from RETURNN ogg zips (also WAV or FLAC inside: anything soundfile decodes).

    :param path: one zip or a list of zips; their sequences are concatenated.
    :param audio: RETURNN's feature options (see ``AudioFeatures``): ``{"features": "raw"}``,
        ``{"features": "log_mel_filterbank", "num_feature_filters": 80, ...}`` or MFCCs (``{}``, RETURNN's
        default); None: no ``data`` key.
    :param targets: RETURNN's vocabulary options (see ``framework.datasets.vocabulary``); None: no ``classes``.
    :param segment_file: a text file (optionally gzipped) of the sequence tags to keep, one per line.
    :param fixed_random_subset: keep only this many sequences (a fraction if below 1), drawn once with
        ``fixed_random_subset_seed`` exactly as RETURNN draws them.
    :param zip_audio_files_have_name_as_prefix: the audio files are under ``<name>/`` in the zip.
    :param content_name: the name of the index and audio folder in the zip (by default the zip's file name).
    :param use_cache_manager: RETURNN copies the zips through its cluster's cache manager; here they are read in place.
    :param targets_post_process: a function str -> str (or RETURNN's names, see ``orthography.post_processor``)
        applied to the text before ``targets`` turns it into ids (``orth`` keeps the text as it is).
    :param resolve_symlink_for_name: the zip's content name from the file a symlink points to, as RETURNN.
    :param epoch_wise_filter: RETURNN's ``{(first epoch, last epoch): {"max_mean_len": n}}``: in those sub-epochs only
        the shortest sequences (by duration in centiseconds), see ``EpochWiseFilter``.
    """

    returnn_window = "ignores"  # what RETURNN's class does with window (context_window.py)
    returnn_worker_shards = True  # RETURNN's class shards over DataLoader workers (supports_sharding)
    returnn_sortable = True  # RETURNN's class supports_seq_order_sorting: its forward run sorts it

    def __init__(
        self,
        path: str | list[str],
        *,
        audio: dict[str, Any] | None = None,
        targets: dict[str, Any] | Vocabulary | None = None,
        segment_file: str | None = None,
        fixed_random_subset: float | int | None = None,
        fixed_random_subset_seed: int = 42,
        zip_audio_files_have_name_as_prefix: bool = True,
        content_name: str | list[str] | None = None,
        use_cache_manager: bool = False,
        epoch_wise_filter: dict[tuple[int | None, int | None], dict[str, Any]] | None = None,
        targets_post_process: Any = None,
        resolve_symlink_for_name: bool = False,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        paths = [os.fspath(p) for p in ([path] if isinstance(path, (str, os.PathLike)) else path)]
        if not paths:
            raise ConfigError("OggZipDataset: 'path' is empty; give the path of at least one ogg zip.")
        self.archives = find_archives(paths, content_name, resolve_symlink_for_name)
        self.paths = [archive.path for archive in self.archives]
        self.names = [archive.name for archive in self.archives]
        self.targets_post_process = post_processor(targets_post_process, "OggZipDataset")
        if use_cache_manager:
            note_no_cache_manager("OggZipDataset", self.paths)
        self.features = AudioFeatures.from_options(audio) if audio is not None else None
        if isinstance(targets, dict):
            targets = create_vocabulary(targets, "OggZipDataset")
        self.targets = targets
        self.prefixed = zip_audio_files_have_name_as_prefix
        keep = _read_segments(segment_file) if segment_file else None
        self.entries: list[dict[str, Any]] = []
        for number, archive in enumerate(self.archives):
            for entry in read_index(archive):
                if keep is None or _tag(entry) in keep:
                    self.entries.append({**entry, "_zip": number})
        if fixed_random_subset:
            count = int(len(self.entries) * fixed_random_subset) if fixed_random_subset < 1 else fixed_random_subset
            np.random.RandomState(fixed_random_subset_seed).shuffle(self.entries)  # RETURNN's draw, exactly
            self.entries = self.entries[: int(count)]
        if not self.entries:
            raise ConfigError(
                f"OggZipDataset: no sequences in {', '.join(self.paths)}"
                + (f" whose tag is listed in segment_file {segment_file}." if keep is not None else ".")
            )
        self._zips: dict[int, zipfile.ZipFile] = {}
        self._pid = os.getpid()
        self._sample_rate: int | None = None
        self._epoch = 1
        self._lengths: np.ndarray | None = None
        self.name = f"OggZipDataset({', '.join(os.path.basename(p) for p in self.paths)})"
        self.epoch_wise_filter = None if epoch_wise_filter is None else EpochWiseFilter(epoch_wise_filter, self.name)

    @property
    def num_seqs(self) -> int:
        return len(self.entries)

    def key_info(self) -> dict[str, dict[str, Any]]:
        info = {}
        if self.features is not None:
            info["data"] = {"shape": (None, self.features.dim), "dtype": "float32", "sparse_dim": None}
        if self.targets is not None:
            info["classes"] = {"shape": (None,), "dtype": "int32", "sparse_dim": self.targets.num_labels}
        info["orth"] = {"shape": (None,), "dtype": "uint8", "sparse_dim": 256}
        return info

    def seq_tag(self, index: int) -> str:
        return _tag(self.entries[index])

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        entry = self.entries[index]
        seq = {}
        if self.features is not None:
            member = self._member(entry)
            seq["data"] = self.features.from_bytes(
                self._read(entry["_zip"], member), f"{self.paths[entry['_zip']]}:{member}", self._random_state(index)
            )
        if self.targets is not None:
            text = entry["text"] if self.targets_post_process is None else self.targets_post_process(entry["text"])
            seq["classes"] = np.array(self.targets.get_seq(text), dtype=np.int32)
        seq["orth"] = np.frombuffer(entry["text"].encode("utf8"), dtype=np.uint8).copy()
        return seq

    def use_epoch(self, epoch: int) -> None:
        self._epoch = epoch

    def _random_state(self, index: int) -> np.random.RandomState | None:
        """What the audio ``pre_process`` draws from: seeded per full epoch and sequence, so a step reads the same."""
        if self.features is None or self.features.pre_process is None:
            return None
        full_epoch = (self._epoch - 1) // self.partition_epoch + 1
        return np.random.RandomState([self.random_seed % 2**32, full_epoch, index])

    def get_seq_order(self, epoch: int, shard: tuple[int, int] = (0, 1)) -> np.ndarray:
        self.use_epoch(epoch)
        order = super().get_seq_order(epoch, shard)
        if self.epoch_wise_filter is None:
            return order
        return self.epoch_wise_filter.apply(epoch, order, self.order_lengths())

    def order_lengths(self) -> np.ndarray:
        """RETURNN's sort key: the duration in centiseconds."""
        return np.array([int(entry["duration"] * 100) for entry in self.entries], dtype=np.int64)

    def seq_lengths(self) -> np.ndarray:
        """Frames per sequence as the durations give them (audio), else the longest of the text keys."""
        if self._lengths is None:
            lengths = np.array([len(e["text"].encode("utf8")) for e in self.entries], dtype=np.int64)
            if self.targets is not None:
                lengths = np.maximum(lengths, [len(self.targets.get_seq(e["text"])) for e in self.entries])
            if self.features is not None:
                rate = self.sample_rate()
                frames = [self.features.frames(int(e["duration"] * rate), rate) for e in self.entries]
                lengths = np.maximum(lengths, frames)
            self._lengths = lengths
        return self._lengths

    def sample_rate(self) -> int:
        """The audio's sample rate: ``audio["sample_rate"]``, else the first file's."""
        if self._sample_rate is None:
            self._sample_rate = self.features.sample_rate if self.features is not None else None
        if self._sample_rate is None:
            import soundfile

            entry = self.entries[0]
            self._sample_rate = soundfile.info(io.BytesIO(self._read(entry["_zip"], self._member(entry)))).samplerate
        return self._sample_rate

    def _member(self, entry: dict[str, Any]) -> str:
        if "file" not in entry:
            raise DataError(
                f"OggZipDataset: the index of {self.paths[entry['_zip']]} has no 'file' for {_tag(entry)!r}, so there is "
                f"no audio; set audio=None for text only."
            )
        return f"{self.names[entry['_zip']]}/{entry['file']}" if self.prefixed else entry["file"]

    def _read(self, number: int, member: str) -> bytes:
        """A file of zip ``number``; the zips are reopened in a new process (workers)."""
        if self._pid != os.getpid():
            self._zips, self._pid = {}, os.getpid()
        if self.archives[number].is_dir:
            return _read_file(os.path.join(self.paths[number], member))
        if number not in self._zips:
            self._zips[number] = zipfile.ZipFile(self.paths[number])
        try:
            return self._zips[number].read(member)
        except KeyError:
            raise DataError(
                f"OggZipDataset: {self.paths[number]} has no {member!r}, which its index lists. Is "
                f"zip_audio_files_have_name_as_prefix right (now {self.prefixed})?"
            ) from None
        except (zipfile.BadZipFile, OSError) as exc:  # a failed CRC, a truncated or rewritten zip
            raise DataError(
                f"OggZipDataset: {member!r} in {self.paths[number]} cannot be read ({exc}). The zip is damaged or was "
                f"changed while it was read; write it again or restore it from a copy."
            ) from None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_zips": {}}


def _tag(entry: dict[str, Any]) -> str:
    return entry.get("seq_name", entry.get("file", ""))


def _read_file(path: str) -> bytes:
    """An audio file of a directory archive."""
    refuse_special(path, "an audio file of OggZipDataset")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise DataError(f"OggZipDataset: cannot read {path} ({exc}), which the index lists.") from None


def _read_segments(path: str) -> set[str]:
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf8") as f:
            return set(f.read().splitlines())
    except OSError as exc:
        raise ConfigError(f"OggZipDataset: cannot read segment_file {path!r} ({exc}).") from None


DATASETS = (OggZipDataset,)
