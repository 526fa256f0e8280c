"""Small local stand-ins for the collected RETURNN configs (tests/returnn/configs/*.config): their data and model code.

The collected configs keep their option lines as their authors wrote them; what a user ports anyway (the model
code, RETURNN's Tensor API) and the data paths (corpora that are not here) are replaced by these.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset


def speech_data(
    split: str,
    *,
    audio_key: str = "data",
    audio_dim: int = 1,
    label_key: str = "classes",
    num_labels: int = 10,
    num_seqs: int = 24,
) -> NumpyDataset:
    """Utterances as RETURNN's speech setups read them: ``audio_key`` [T, audio_dim] float32 (T 20..60) and
    ``label_key`` [L] class ids (L 2..6), the labels drawn from the audio so that a model can learn them."""
    rng = np.random.default_rng({"train": 1, "dev": 2, "devtrain": 3}.get(split, 4))
    audio, labels = [], []
    for _ in range(num_seqs):
        seq = rng.integers(1, num_labels, size=int(rng.integers(2, 7)))
        frames = np.repeat(seq, 10)[: int(rng.integers(20, 61))]
        frames = np.pad(frames, (0, max(0, 20 - len(frames))), mode="edge")
        features = (frames[:, None] / num_labels + 0.1 * rng.standard_normal((len(frames), audio_dim))).astype(
            np.float32
        )
        audio.append(features)
        labels.append(seq.astype(np.int32))
    return NumpyDataset({audio_key: audio, label_key: labels}, sparse_dims={label_key: num_labels})


class CtcModel(nn.Module):
    """A tiny CTC model (the ported model code of a speech config): one conv layer, blank = the last class."""

    def __init__(self, in_dim: int, num_labels: int, hidden: int = 16):
        super().__init__()
        self.conv = nn.Conv1d(in_dim, hidden, 3, padding=1)
        self.norm = nn.LayerNorm(hidden)
        self.out = nn.Linear(hidden, num_labels + 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, F] -> log probs [B, T, labels + 1]
        h = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        return torch.log_softmax(self.out(self.norm(h)), dim=-1)


def ctc_train_step(model, extern_data, run_ctx, audio_key: str, label_key: str) -> None:
    """CTC over the stand-in data, marked as RETURNN configs mark it (``ctc``, normalized by frames)."""
    log_probs = model(extern_data[audio_key])
    audio_len, label_len = extern_data[audio_key + ":seq_len"], extern_data[label_key + ":seq_len"]
    loss = nn.functional.ctc_loss(
        log_probs.transpose(0, 1),
        extern_data[label_key].long(),
        audio_len,
        label_len,
        blank=log_probs.shape[-1] - 1,
        reduction="sum",
        zero_infinity=True,
    )
    run_ctx.mark_as_loss(name="ctc", loss=loss, custom_inv_norm_factor=label_len.sum())


def text_data(split: str, *, vocab: int = 40, num_seqs: int = 24) -> NumpyDataset:
    """Sentences for a language model: ``data`` (BOS + tokens) and ``classes`` (tokens + EOS), 0 is BOS/EOS;
    each token follows the previous one by +1 (mod vocab) most of the time, so a model can learn them."""
    rng = np.random.default_rng({"train": 5, "dev": 6}.get(split, 7))
    inputs, targets = [], []
    for _ in range(num_seqs):
        length = int(rng.integers(4, 13))
        tokens = [int(rng.integers(1, vocab))]
        for _ in range(length - 1):
            tokens.append(tokens[-1] % (vocab - 1) + 1 if rng.random() < 0.9 else int(rng.integers(1, vocab)))
        inputs.append(np.array([0, *tokens], dtype=np.int32))
        targets.append(np.array([*tokens, 0], dtype=np.int32))
    return NumpyDataset({"data": inputs, "classes": targets}, sparse_dims={"data": vocab, "classes": vocab})


class LmModel(nn.Module):
    """A tiny LSTM language model (the ported model code of an LM config)."""

    def __init__(self, vocab: int, hidden: int = 16):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.lstm(self.embedding(tokens.long()))[0])


def lm_train_step(model, extern_data, run_ctx) -> None:
    """Cross entropy per token, as RETURNN LM configs mark it (``ce``)."""
    logits = model(extern_data["data"])
    mask = torch.arange(logits.shape[1])[None, :] < extern_data["classes:seq_len"][:, None]
    run_ctx.mark_as_loss(
        name="ce", loss=nn.functional.cross_entropy(logits[mask], extern_data["classes"][mask].long(), reduction="none")
    )


def frame_data(
    split: str,
    *,
    input_dim: int = 50,
    num_classes: int = 12,
    num_seqs: int = 24,
    classes_shape: tuple = (None,),
    rate: int = 1,
) -> NumpyDataset:
    """Utterances as RETURNN's hybrid setups read them: ``data`` [rate * T, input_dim] features (T 20..60; raw audio
    has ``rate`` samples per frame) and ``classes`` [T] one class per frame (an alignment; [T, 1] for
    ``classes_shape=(None, 1)``), the features drawn from the classes so that a model can learn them."""
    rng = np.random.default_rng({"train": 8, "dev": 9, "devtrain": 10}.get(split, 11))
    features, classes = [], []
    for _ in range(num_seqs):
        frames = np.repeat(rng.integers(0, min(num_classes, 8), size=6), 10)[: int(rng.integers(20, 61))]
        classes.append(frames.astype(np.int32).reshape(-1, *classes_shape[1:]))
        onehot = np.eye(input_dim, dtype=np.float32)[frames % input_dim]
        onehot = np.repeat(onehot, rate, axis=0)
        features.append(onehot + 0.1 * rng.standard_normal(onehot.shape).astype(np.float32))
    return NumpyDataset({"data": features, "classes": classes}, sparse_dims={"classes": num_classes})


class FrameModel(nn.Module):
    """A tiny frame classifier (the ported model code of a hybrid config): one LSTM layer, after a strided
    convolution from ``rate`` input samples to one frame where the input is raw audio."""

    def __init__(self, in_dim: int, num_classes: int, hidden: int = 16, rate: int = 1):
        super().__init__()
        self.frames = nn.Conv1d(in_dim, in_dim, rate, stride=rate) if rate > 1 else None
        self.lstm = nn.LSTM(in_dim, hidden, batch_first=True)
        self.out = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.frames is not None:
            x = self.frames(x.transpose(1, 2)).transpose(1, 2)
        return self.out(self.lstm(x)[0])


def frame_ce_train_step(model, extern_data, run_ctx) -> None:
    """Frame-wise cross entropy, as RETURNN hybrid configs mark it (``ce``)."""
    logits = model(extern_data["data"])
    classes = extern_data["classes"].reshape(extern_data["classes"].shape[:2] + (-1,))[..., 0]  # [B, T] or [B, T, 1]
    logits = logits[:, : classes.shape[1]]
    mask = torch.arange(logits.shape[1])[None, :] < extern_data["classes:seq_len"][:, None]
    run_ctx.mark_as_loss(
        name="ce", loss=nn.functional.cross_entropy(logits[mask], classes[mask].long(), reduction="none")
    )


class Task12AXModel(nn.Module):
    """RETURNN's test model of tests/test_torch_engine.py (TrainTestModel), ported to plain torch: one linear layer
    from the 9 Task12AX inputs to 2 classes."""

    def __init__(self, **_kwargs):
        super().__init__()
        self.lin = nn.Linear(9, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.lin(x), dim=-1)


def task12ax_train_step(*, model, extern_data, **_kwargs) -> None:
    """Its train step: frame-wise cross entropy (``ce``) and frame error (``fer``)."""
    from framework import get_run_ctx

    data = extern_data["data"]
    if data.dtype != model.lin.weight.dtype:
        data = data.to(model.lin.weight.dtype)
    log_probs = model(data)
    mask = torch.arange(log_probs.shape[1])[None, :] < extern_data["data:seq_len"][:, None]
    targets = extern_data["classes"][mask].long()
    run_ctx = get_run_ctx()
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.nll_loss(log_probs[mask], targets, reduction="none"))
    run_ctx.mark_as_loss(name="fer", loss=(log_probs[mask].argmax(-1) != targets).float(), as_error=True)


# ---- forward and recognition configs (43-54): the checkpoint their ``load`` names, a vocabulary, the models ----


def fixture_path(case: str, name: str) -> str:
    """``$FIXTURE_OUT/<case>/<name>`` (the directory created): where a config's generated files go."""
    import os

    directory = os.path.join(os.environ.get("FIXTURE_OUT", "/tmp/returnn-fixtures"), case)
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, name)


def checkpoint(case: str, model: nn.Module, *, epoch: int = 80, step: int = 4000) -> str:
    """A trained model's checkpoint as RETURNN's torch engine saves it (``model.080.pt``: model, epoch, step), the
    parameters drawn from seed 0: what the ``load`` line of a forward config (i6_core's ReturnnForwardJobV2) names."""
    torch.manual_seed(0)
    for parameter in model.parameters():
        nn.init.normal_(parameter, std=0.5)
    path = fixture_path(case, f"model.{epoch:03d}.pt")
    state = {"model": model.state_dict(), "epoch": epoch, "step": step, "effective_learning_rate": 1e-3}
    torch.save(state, path)
    return path


def vocab_file(case: str, num_labels: int) -> str:
    """A RETURNN vocabulary file (a Python dict literal, label -> id, as i6's ReturnnTrainBpeJob writes) for
    ``num_labels`` labels: ``<s>``, ``<unk>`` and BPE-like subwords."""
    labels = ["<s>", "<unk>"] + [f"w{i}@@" if i % 3 else f"w{i}" for i in range(2, num_labels)]
    path = fixture_path(case, "bpe.vocab")
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n" + "".join(f"{label!r}: {i},\n" for i, label in enumerate(labels)) + "}\n")
    return path


class RawAudioCtcModel(nn.Module):
    """The ported model of i6's ctc_rnnt_standalone CTC setups (MiniReturnn): ``model(raw_audio=[B, T, 1],
    raw_audio_len=[B])`` -> (log probs [B, T, labels + 1], lengths), blank = the last class."""

    def __init__(self, num_labels: int, hidden: int = 16, **_kwargs):  # get_model's epoch, step, ...
        super().__init__()
        self.ctc = CtcModel(1, num_labels, hidden)

    def forward(self, raw_audio: torch.Tensor, raw_audio_len: torch.Tensor):
        return self.ctc(raw_audio), raw_audio_len


class FeatureModel(nn.Module):
    """The ported model of i6's CTC and hybrid setups with features (berger, jxu, hilmes): ``model(audio_features=
    [B, T, F], audio_features_len=[B])`` -> (log probs [B, T, num_outputs], lengths)."""

    def __init__(self, in_dim: int, num_outputs: int, hidden: int = 16, **_kwargs):  # get_model's epoch, step, ...
        super().__init__()
        self.lstm = nn.LSTM(in_dim, hidden, batch_first=True)
        self.out = nn.Linear(hidden, num_outputs)

    def forward(self, audio_features: torch.Tensor, audio_features_len: torch.Tensor):
        return torch.log_softmax(self.out(self.lstm(audio_features)[0]), dim=-1), audio_features_len


class TransducerStandIn(nn.Module):
    """The ported model of a transducer recognition config (gaudino's): a frame-wise label model with a greedy
    search of beam 1; ``align_target_dim`` / ``target_dim``: the label count as RETURNN's Dim gives it."""

    def __init__(self, num_labels: int, hidden: int = 16, **_kwargs):  # get_model's epoch, step, ...
        super().__init__()
        self.ctc = CtcModel(1, num_labels, hidden)
        self.align_target_dim = self.target_dim = type("Dim", (), {"dimension": num_labels + 1})()

    def search(self, audio: torch.Tensor, audio_len: torch.Tensor):
        """(alignment [B, T], its lengths [B], scores [B, 1], hyps [B, 1, T], their lengths [B, 1])."""
        log_probs = self.ctc(audio)
        best, alignment = log_probs.max(dim=-1)
        mask = torch.arange(audio.shape[1])[None, :] < audio_len[:, None]
        scores = (best * mask).sum(dim=1, keepdim=True)
        blank = log_probs.shape[-1] - 1
        hyps = torch.zeros_like(alignment)
        lengths = torch.zeros(len(audio), dtype=torch.int64)
        for b in range(len(audio)):
            labels = [int(x) for x in torch.unique_consecutive(alignment[b, : audio_len[b]]) if int(x) != blank]
            hyps[b, : len(labels)] = torch.tensor(labels, dtype=hyps.dtype)
            lengths[b] = len(labels)
        return alignment, audio_len, scores, hyps[:, None], lengths[:, None]
