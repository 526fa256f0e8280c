# Corpus bug (JaesungHuh/voice-gender-classifier#5): the model is trained on 16 kHz audio, and the loading code used
# at evaluation takes each recording at its own sample rate without resampling, so a recording made at another rate
# gives spectra whose frequencies sit in the wrong bins. Task: 0.25 s voiced sounds whose class is the pitch range of
# the voice (4 ranges, 100 to 330 Hz) with harmonics and noise; the features are the mean log power spectrum of
# 512-sample frames (the bins up to 4 kHz at 16 kHz); the dev recordings were made at 24 kHz. Twin: ++bug False (the
# dev recordings are resampled to 16 kHz when loaded).
import numpy as np
from scipy.signal import resample_poly
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
RATE, FFT, HOP, BINS = 16000, 512, 256, 128
PITCHES = [(100, 140), (150, 190), (210, 260), (270, 330)]


def voice(label, rate, rng):
    t = np.arange(int(0.25 * rate)) / rate
    f0 = rng.uniform(*PITCHES[label]) * (1 + 0.03 * np.sin(2 * np.pi * rng.uniform(2, 5) * t))  # a little vibrato
    phase = 2 * np.pi * np.cumsum(f0) / rate
    harmonics = sum(rng.uniform(0.2, 1.0) / k * np.sin(k * phase) for k in range(1, 9))
    return harmonics + rng.normal(scale=0.05, size=len(t))


def features(wave):
    frames = np.lib.stride_tricks.sliding_window_view(wave, FFT)[::HOP] * np.hanning(FFT)
    power = np.abs(np.fft.rfft(frames, axis=-1)[:, :BINS]) ** 2
    return np.log(power + 1e-6).mean(0).astype(np.float32)


class Voices(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 500
        labels = rng.integers(0, len(PITCHES), size=n)
        rate = RATE if split == "train" else 24000  # the dev recordings' own rate
        feats = []
        for label in labels:
            wave = voice(label, rate, rng)
            if rate != RATE and not bug:
                wave = resample_poly(wave, 2, 3)  # 24 kHz -> 16 kHz
            feats.append(features(wave))
        feats = (np.stack(feats) + 2.0) / 6.0  # a fixed scale for log powers
        super().__init__({"data": feats, "classes": labels}, sparse_dims={"classes": len(PITCHES)}, **kwargs)


train = {"class": Voices, "split": "train"}
dev = {"class": Voices, "split": "dev"}
extern_data = {"data": {"shape": (BINS,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": len(PITCHES)}}
batch_size = 32
num_epochs = 3
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(BINS, 128), nn.ReLU(), nn.Linear(128, len(PITCHES)))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
