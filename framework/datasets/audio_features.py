"""RETURNN's ``audio`` options (its ``ExtractAudioFeatures``): raw samples, log-mel features or MFCCs of audio.

Audio is decoded with soundfile (libsndfile: Ogg/Vorbis, FLAC, WAV), as RETURNN decodes it. The log-mel
filterbank is librosa's ``melspectrogram`` with its defaults, which RETURNN calls, written here with numpy so
that librosa is no dependency: a centred, zero-padded STFT with a periodic Hann window of
``int(window_len * sample_rate)`` samples (also the FFT size), hop ``int(step_len * sample_rate)``, power
spectrum, Slaney-style mel filters normalised to unit area (librosa's ``htk=False, norm="slaney"``, float32), then
``log(max(1e-3, mel))``. MFCCs are librosa's ``mfcc`` as RETURNN calls it (128 mel bands in decibels, cut 80 dB
below the maximum, orthonormal DCT-II) with the first coefficient replaced by the frame's RMS energy.
``tests/test_returnn_datasets.py`` compares the numbers with RETURNN's.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from framework.base.errors import ConfigError, DataError
from framework.base.safe_create import refuse_special

FEATURES = ("raw", "log_mel_filterbank", "mfcc")
_OPTIONS = {
    "features",
    "num_feature_filters",
    "window_len",
    "step_len",
    "sample_rate",
    "peak_normalization",
    "preemphasis",
    "norm_mean",
    "norm_std_dev",
    "join_frames",
    "pre_process",
}


class AudioFeatures:
    """Features of one audio file, configured as RETURNN's ``audio`` dict.

    :param features: "raw" (the samples, [T, 1]), "log_mel_filterbank" or "mfcc" (RETURNN's default; both
        [frames, num_feature_filters]).
    :param num_feature_filters: mel filters (RETURNN's default 40; 1 for raw).
    :param window_len: window in seconds (0.025).
    :param step_len: hop in seconds (0.010).
    :param sample_rate: the expected sample rate; a file with another is an error (RETURNN does not resample).
    :param peak_normalization: scale each file so that its largest absolute sample is 1 (RETURNN's default True).
    :param preemphasis: ``x[t] - preemphasis * x[t - 1]`` before everything else.
    :param norm_mean: subtracted from the features: a number, "per_seq" or a text file of one value per feature.
    :param norm_std_dev: divided into the features, like ``norm_mean`` ("per_seq": at least 0.01).
    :param join_frames: stack this many consecutive frames into one (the last repeated to fill).
    :param pre_process: RETURNN's ``pre_process(audio=, sample_rate=, random_state=) -> audio``, called on the
        (pre-emphasized, peak-normalized) samples before the features; ``random_state`` is seeded per epoch and
        sequence here (RETURNN's is one stream over the epoch: a random function draws other numbers).
    """

    def __init__(
        self,
        *,
        features: str = "mfcc",
        num_feature_filters: int | None = None,
        window_len: float = 0.025,
        step_len: float = 0.010,
        sample_rate: int | None = None,
        peak_normalization: bool = True,
        preemphasis: float | None = None,
        norm_mean: Any = None,
        norm_std_dev: Any = None,
        join_frames: int | None = None,
        pre_process: Any = None,
    ):
        if features not in FEATURES:
            raise ConfigError(
                f"OggZipDataset: audio features {features!r} are not supported here; supported: {', '.join(FEATURES)}. "
                f"Choose one of those in the audio dict, or dump RETURNN's features to an HDF file (RETURNN's "
                f"tools/dump-dataset.py) and read that with HDFDataset."
            )
        self.features = features
        self.num_feature_filters = num_feature_filters or (1 if features == "raw" else 40)
        if features == "raw" and self.num_feature_filters != 1:
            raise ConfigError(f"OggZipDataset: raw audio has 1 feature, not num_feature_filters={num_feature_filters}.")
        self.window_len, self.step_len = window_len, step_len
        self.sample_rate = sample_rate
        self.peak_normalization = peak_normalization
        self.preemphasis = preemphasis
        self.norm_mean = _norm_vector(norm_mean, self.num_feature_filters, "norm_mean")
        self.norm_std_dev = _norm_vector(norm_std_dev, self.num_feature_filters, "norm_std_dev")
        self.join_frames = join_frames
        if pre_process is not None and not callable(pre_process):
            raise ConfigError(f"OggZipDataset: audio pre_process must be a function, got {pre_process!r}.")
        self.pre_process = pre_process
        self._mel: dict[tuple[int, int, int], np.ndarray] = {}

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> AudioFeatures:
        """From RETURNN's ``audio`` dict; options this class does not implement are a config error."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ConfigError(
                f"OggZipDataset: the audio option(s) {', '.join(unknown)} are not supported here (supported: "
                f"{', '.join(sorted(_OPTIONS))}). Leave them out, or dump RETURNN's features to an HDF file (RETURNN's "
                f"tools/dump-dataset.py) and read that with HDFDataset."
            )
        return cls(**options)

    @property
    def dim(self) -> int:
        """Features per frame."""
        return self.num_feature_filters * (self.join_frames or 1)

    def frames(self, num_samples: int, sample_rate: int) -> int:
        """The number of frames of audio with ``num_samples`` samples."""
        if self.features == "raw":
            count = num_samples
        else:
            n_fft = int(self.window_len * sample_rate)
            count = 1 + (num_samples + 2 * (n_fft // 2) - n_fft) // int(self.step_len * sample_rate)
        return -(-count // self.join_frames) if self.join_frames else count

    def from_bytes(self, data: bytes, where: str, random_state: np.random.RandomState | None = None) -> np.ndarray:
        """The features [frames, dim] (float32) of an encoded audio file; ``where`` names it in errors;
        ``random_state`` is what ``pre_process`` draws from."""
        import soundfile

        try:
            audio, sample_rate = soundfile.read(io.BytesIO(data))
        except (RuntimeError, soundfile.LibsndfileError) as exc:
            raise DataError(f"OggZipDataset: {where} cannot be decoded ({exc}).") from None
        if audio.ndim != 1:
            raise DataError(
                f"OggZipDataset: {where} has {audio.shape[1]} channels; these features are for mono audio. Mix the "
                f"files down to one channel."
            )
        return self.from_samples(audio, sample_rate, where, random_state)

    def from_samples(
        self,
        audio: np.ndarray,
        sample_rate: int,
        where: str = "the audio",
        random_state: np.random.RandomState | None = None,
    ) -> np.ndarray:
        """The features [frames, dim] (float32) of samples in [-1, 1] (float64, as soundfile reads them)."""
        if self.sample_rate is not None and sample_rate != self.sample_rate:
            raise DataError(
                f"OggZipDataset: {where} has sample rate {sample_rate}, but audio sample_rate = {self.sample_rate}. "
                f"Resample the files or change sample_rate (RETURNN does not resample either)."
            )
        audio = np.asarray(audio, dtype=np.float64)
        if self.preemphasis:
            audio = np.concatenate([audio[:1], audio[1:] - self.preemphasis * audio[:-1]])
        if self.peak_normalization:
            peak = np.max(np.abs(audio), initial=0.0)
            if peak != 0.0:
                audio = audio / peak
        if self.pre_process is not None:
            audio = self.pre_process(audio=audio, sample_rate=sample_rate, random_state=random_state)
            if not isinstance(audio, np.ndarray) or audio.ndim != 1:
                raise DataError(
                    f"OggZipDataset: audio pre_process returned {type(audio).__name__} for {where}; it must return the "
                    f"samples as a 1-d numpy array (as RETURNN requires)."
                )
        if self.features == "raw":
            features = audio[:, None].astype(np.float32)
        else:
            features = (self._log_mel if self.features == "log_mel_filterbank" else self._mfcc)(audio, sample_rate)
        return self._normalize(features)

    def _log_mel(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        frames, power = self._power_spectrum(audio, sample_rate)
        mel = self._mel_filters(sample_rate, frames.shape[1], self.num_feature_filters) @ power.T  # [mels, frames]
        # Transposed, not copied, as librosa's: numpy then sums a per_seq mean and deviation in RETURNN's order.
        return np.log(np.maximum(1e-3, mel)).T.astype(np.float32)

    def _mfcc(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        """librosa.feature.mfcc with RETURNN's arguments (128 mel bands), its first coefficient replaced by the
        frame's RMS energy (RETURNN's convention)."""
        frames, power = self._power_spectrum(audio, sample_rate)
        mel = self._mel_filters(sample_rate, frames.shape[1], 128) @ power.T
        db = 10.0 * np.log10(np.maximum(1e-10, mel))  # librosa's power_to_db: ref 1, amin 1e-10, top_db 80
        db = np.maximum(db, db.max() - 80.0)
        coefficients = _dct_matrix(db.shape[0], self.num_feature_filters) @ db
        coefficients[0] = np.sqrt(np.mean(frames**2, axis=1))  # the unwindowed frames: librosa's rms
        return coefficients.T.astype(np.float32)

    def _power_spectrum(self, audio: np.ndarray, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
        """The frames [frames, n_fft] of librosa's centred STFT (zero-padded) and their power spectra."""
        n_fft, hop = int(self.window_len * sample_rate), int(self.step_len * sample_rate)
        padded = np.pad(audio, n_fft // 2)  # librosa's center=True with pad_mode="constant"
        if len(padded) < n_fft:
            raise DataError(f"OggZipDataset: {len(audio)} samples are shorter than one window of {n_fft // 2 + 1}.")
        frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop]
        window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)  # periodic Hann
        return frames, np.abs(np.fft.rfft(frames * window, axis=1)) ** 2

    def _mel_filters(self, sample_rate: int, n_fft: int, n_mels: int) -> np.ndarray:
        """librosa.filters.mel(sr, n_fft, n_mels) with its defaults: Slaney scale and area normalisation, float32."""
        key = (sample_rate, n_fft, n_mels)
        if key not in self._mel:
            fft_freqs = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
            mel_freqs = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(sample_rate / 2.0), n_mels + 2))
            spacing = np.diff(mel_freqs)
            ramps = mel_freqs[:, None] - fft_freqs[None, :]
            lower = -ramps[:-2] / spacing[:-1, None]
            upper = ramps[2:] / spacing[1:, None]
            weights = np.maximum(0, np.minimum(lower, upper)).astype(np.float32)  # librosa's float32 rows
            weights *= (2.0 / (mel_freqs[2 : n_mels + 2] - mel_freqs[:n_mels]))[:, None]
            self._mel[key] = weights.astype(np.float64)
        return self._mel[key]

    def _normalize(self, features: np.ndarray) -> np.ndarray:
        if isinstance(self.norm_mean, str):
            features = features - features.mean(axis=0, keepdims=True)
        elif self.norm_mean is not None:
            features = features - self.norm_mean
        if isinstance(self.norm_std_dev, str):
            features = features / np.maximum(features.std(axis=0, keepdims=True), 1e-2)
        elif self.norm_std_dev is not None:
            features = features / self.norm_std_dev
        if self.join_frames:
            pad = -len(features) % self.join_frames
            features = np.pad(features, ((0, pad), (0, 0)), mode="edge")
            features = features.reshape(len(features) // self.join_frames, -1)
        return features.astype(np.float32, copy=False)


def _norm_vector(value: Any, dim: int, option: str) -> Any:
    """A number, "per_seq", or a vector of ``dim`` values (from a text file, as numpy.loadtxt reads it)."""
    if value is None or value == "per_seq" or isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        refuse_special(value, f"the audio {option} file of OggZipDataset")
        try:
            value = np.loadtxt(value)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"OggZipDataset: audio {option} file {value!r} cannot be read ({exc}).") from None
    value = np.asarray(value, dtype=np.float32)
    if value.shape != (dim,):
        raise ConfigError(f"OggZipDataset: audio {option} has shape {value.shape}; expected ({dim},).")
    return value


def _hz_to_mel(hz: Any) -> Any:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above (librosa's default, htk=False)."""
    hz = np.asarray(hz, dtype=np.float64)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(hz >= min_log_hz, min_log_mel + np.log(np.maximum(hz, 1e-10) / min_log_hz) / logstep, hz / f_sp)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(mel >= min_log_mel, min_log_hz * np.exp(logstep * (mel - min_log_mel)), f_sp * mel)


def _dct_matrix(size: int, count: int) -> np.ndarray:
    """The first ``count`` rows of the orthonormal DCT-II of ``size`` points (scipy.fft.dct's norm="ortho")."""
    n = np.arange(size)
    matrix = np.cos(np.pi * np.arange(count)[:, None] * (2 * n[None, :] + 1) / (2 * size)) * np.sqrt(2.0 / size)
    matrix[0] /= np.sqrt(2.0)
    return matrix
