"""The differential diagnosis of a symptom (issue 41): each family's check on its own, then real runs.

The families' checks run on small real models (a tiny Hugging Face BERT from a config, a hand-written
attention classifier, an MLP); the runs train the zoo's ``cause_*`` bugs, each written the way its
community writes it, and their healthy twins (``debug_diagnose_symptoms`` names the cause in the symptom's
line; the twins print no WARNING).
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import ROOT, zoo_log
from framework.base.config import load_config
from framework.check_library.can_learn import fingerprint, fit_one_batch, identical_units, unchanged
from framework.check_library.dependency_map import dependency_map
from framework.check_library.device_tracking import DeviceTracker
from framework.check_library.input_information import data_information
from framework.check_library.loss_contracts import ignored_real_labels, scores_kind
from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.schedule_trace import schedule_problem
from framework.core.step import run_step
from framework.datasets.extern_data import DataKey

ZOO = os.path.join(ROOT, "tests", "zoo")


def test_scores_kind_tells_logits_log_probabilities_and_probabilities_apart():
    logits = torch.randn(8, 5) * 3
    assert scores_kind(logits, 1) == "logits"
    assert scores_kind(logits.log_softmax(1), 1) == "log_probs"
    assert scores_kind(logits.softmax(1), 1) == "probs"
    assert scores_kind(logits.softmax(-1).transpose(0, 1), 0) == "probs"  # the class axis given
    assert scores_kind(torch.rand(8), None) == "probs" and scores_kind(logits[:, 0], None) == "logits"


def test_an_ignore_index_is_a_dropped_class_only_when_the_real_labels_hold_it():
    labels = torch.tensor([0, 1, 2, 0, 3])
    assert ignored_real_labels(labels, labels, 0, 4) == (2, 5)
    assert ignored_real_labels(labels, labels, -100, 4) is None  # torch's default: not a class
    padded = torch.tensor([1, 2, 3, 0, 0])  # 0 only at the padding: a padding marker
    assert ignored_real_labels(padded, padded[:3], 0, 4) is None


def test_ctc_loss_lengths_on_the_cpu_are_no_device_bug_but_a_stray_cpu_tensor_is():
    torch.manual_seed(0)
    model = nn.Linear(4, 6)
    frames, lengths = torch.randn(3, 8, 4), torch.tensor([8, 6, 5])
    batch = {"data": frames, "data:seq_len": lengths}

    def step(noise: bool) -> str | None:
        tracker = ModuleTracker(model)
        devices = DeviceTracker(model, batch, tracker)
        with tracker, devices:
            log_probs = model(batch["data"]).log_softmax(-1).transpose(0, 1)
            if noise:
                log_probs = log_probs + batch["data:seq_len"][None, :, None]  # a CPU tensor mixed into the scores
            targets = torch.randint(1, 6, (3, 4))
            F.ctc_loss(log_probs, targets, batch["data:seq_len"], torch.full((3,), 4))
        return devices.finding

    assert step(False) is None
    assert "extern_data['data:seq_len']" in step(True)


def _batches(**arrays):
    return [(np.arange(len(next(iter(arrays.values())))), arrays)]


def test_data_information_names_nearly_constant_inputs_and_a_dominating_id():
    rng = np.random.default_rng(0)
    images = rng.random((32, 1, 4, 4)).astype(np.float32)
    tokens = np.where(rng.random((32, 6)) < 0.8, 0, rng.integers(1, 50, (32, 6)))
    keys = {
        "data": DataKey("data", (1, 4, 4), "float32"),
        "tokens": DataKey("tokens", (6,), "int64", 50),
        "classes": DataKey("classes", (), "int64", 4),
    }
    labels = rng.integers(0, 4, 32)
    healthy = data_information(
        keys, _batches(data=images, tokens=rng.integers(1, 50, (32, 6)), classes=labels), {"classes"}
    )
    assert [i.problem for i in healthy] == ["", "", ""]
    found = data_information(keys, _batches(data=images / 255 / 255, tokens=tokens, classes=labels), {"classes"})
    assert "nearly constant" in found[0].problem and found[0].evidence["relative spread"] < 0.01
    assert "of the real frames of 'tokens' are the id 0" in found[1].problem
    padded = np.concatenate([rng.integers(1, 50, (32, 2)), np.zeros((32, 10), dtype=np.int64)], axis=1)
    fixed = {"tokens": DataKey("tokens", (12,), "int64", 50)}
    assert data_information(fixed, _batches(tokens=padded), set())[0].problem == ""  # padding="max_length"
    normalized = data_information(
        keys, _batches(data=(images / 255 - 0.45) / 0.25, tokens=tokens, classes=labels), set()
    )
    assert "nearly constant" in normalized[0].problem  # a constant offset: small spread for its scale


def _bert(inverted: bool):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=16, num_labels=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config).eval()
    lengths = torch.tensor([10, 4, 7, 3, 10, 5])
    tokens = torch.randint(2, 32, (6, 10)) * (torch.arange(10)[None] < lengths[:, None])
    real = (tokens != 0).long()

    def run(batch, watch):
        with watch:
            mask = 1 - real if inverted else real
            logits = model(input_ids=batch["data"], attention_mask=mask).logits
            F.cross_entropy(logits, batch["classes"])

    batch = {"data": tokens, "data:seq_len": lengths, "classes": torch.randint(0, 2, (6,))}
    return dependency_map(run, batch, ["data"], [])


@pytest.mark.slow  # importing transformers alone takes most of 20 s
def test_the_dependency_map_sees_an_attention_mask_of_the_opposite_convention():
    healthy, inverted = _bert(False), _bert(True)
    assert healthy.loss == "cross_entropy" and healthy.probes == 6
    assert healthy.keys[0].padding == 0 and not healthy.keys[0].reads_padding_not_input()
    assert inverted.keys[0].padding > 0 and inverted.keys[0].reads_padding_not_input()
    assert healthy.first_layer == "linear"  # BERT's first linear reads the embeddings


def test_the_dependency_map_splits_per_position_predictions_into_own_sequence_padding_and_future():
    torch.manual_seed(0)
    lstm, out = nn.LSTM(4, 8, batch_first=True, bidirectional=True), nn.Linear(16, 3)
    tokens = torch.randint(1, 9, (3, 5)) * (torch.arange(5)[None] < torch.tensor([5, 3, 4])[:, None])
    batch = {"data": tokens, "data:seq_len": torch.tensor([5, 3, 4])}
    embed = nn.Embedding(9, 4)

    def run(b, watch):
        with watch:
            logits = out(lstm(embed(b["data"]))[0])
            F.cross_entropy(logits.transpose(1, 2), torch.zeros(3, 5, dtype=torch.long))

    found = dependency_map(run, batch, ["data"], [])
    key = found.keys[0]
    assert key.per_position and key.other == pytest.approx(0, abs=1e-6)  # sequences do not mix
    assert key.future > 0.05 and key.padding > 0  # a bidirectional LSTM over unpacked padding reads both


def test_a_copy_fits_one_batch_unless_the_model_discards_its_input():
    torch.manual_seed(0)
    batch = {"data": torch.randn(16, 8), "classes": torch.randint(0, 4, (16,))}
    config = load_config([os.path.join(ZOO, "classify.py")])
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    before = [p.clone() for p in model.parameters()]
    fit = fit_one_batch(model, lambda m: run_step(config, m, batch, "train"))
    assert fit.fits and fit.losses[-1] < 0.5 * fit.losses[0]
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))  # a copy was trained
    blind = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    nn.init.zeros_(blind[0].weight)
    nn.init.zeros_(blind[0].bias)  # every hidden unit alike: only the label frequencies can be learned
    assert identical_units(blind) == [("0.weight", 32)]
    assert not fit_one_batch(blind, lambda m: run_step(config, m, batch, "train")).fits


def test_parameters_that_never_move_are_told_by_their_fingerprint():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    start = fingerprint(model)
    with torch.no_grad():
        model[1].weight.add_(0.1)
    assert unchanged(model, start, {"0.weight", "1.weight"}) == ["0.weight"]


def test_the_schedule_check_names_a_warmup_that_never_warms_up_and_updates_that_stop():
    assert "never reaches it" in schedule_problem([1e-6] * 10, 1e-3, 1e-3)[0]
    assert "learning rate of 0" in schedule_problem([0.0] * 5, 1e-3, None)[0]
    assert "stopped the updates" in schedule_problem([1e-3, 1e-4, 1e-7], 1e-3, 1e-3)[0]
    assert "vanish" in schedule_problem([1e-3] * 5, 1e-3, 1e-7)[0]
    assert schedule_problem([1e-5, 5e-4, 1e-3, 1e-3], 1e-3, 1e-3)[0] == ""  # a warmup that warms up


CHANCE = r"WARNING learning watch: the train loss 'ce' has stayed at its chance level .*"

# bug -> (config files, the line that must be printed)
BUGS = {
    "transformers BERT given an attention mask that marks the padding": (
        ["cause_bert.py", "cause_bert_inverted_mask.py"],
        CHANCE + r"Cause: the predictions .* depend on the padding of 'data', not on its real frames",
    ),
    "hand-written attention whose masked_fill hides the real tokens": (
        ["cause_bert.py", "cause_attention.py", "cause_attention_inverted_mask.py"],
        CHANCE + r"Cause: the predictions .* depend on the padding of 'data'",
    ),
    "wide hand-written attention whose scores are not divided by sqrt(d)": (
        ["cause_bert.py", "cause_attention.py", "cause_attention_unscaled_wide.py"],
        r"WARNING sanity check \(first step\): The softmax at .*cause_attention_unscaled_wide\.py:18 in forward: .* is "
        r"saturated when training starts: .* On a copy with every parameter multiplied by 0\.25 the rows are nearly "
        r"uniform",
    ),
    "torch-tutorial text classifier whose vocabulary misses the cased words": (
        ["cause_text.py", "cause_text_vocab_lowercase.py"],
        CHANCE + r"Cause: 100% of the real frames of 'data' are the id 0",
    ),
    "torch-tutorial text classifier with a min_freq too high for its corpus": (
        ["cause_text.py", "cause_text_vocab_min_freq.py"],
        CHANCE + r"Cause: \d+% of the real frames of 'data' are the id 0",
    ),
    "CNN on images scaled to [0, 1] twice": (
        ["cause_cnn.py", "cause_cnn_scaled_twice.py"],
        CHANCE + r"Cause: the values of 'data' are nearly constant",
    ),
    "CNN whose step scales the images once more before Normalize": (
        ["cause_cnn.py", "cause_cnn_normalized_twice.py"],
        r"Cause: what the model's first layer \(conv2d\) gets is nearly constant",
    ),
    "dropout given TensorFlow's keep probability": (
        ["classify.py", "cause_classify_keep_prob.py"],
        CHANCE + r"Cause: a copy fits one batch in eval mode .* but not in training mode .* Dropout\(p=0.9\) '2', "
        r"Dropout\(p=0.9\) '5' \(torch's dropout p is the probability of dropping",
    ),
    "an error rate that takes argmax over the flattened logits": (
        ["classify.py", "cause_classify_argmax_flat.py"],
        r"WARNING score agreement: the error 'err' does not follow the loss 'ce': on dev after epoch 1, ce fell from "
        r"\S+ \(the first training step\) to \S+, but err is 0\.\d+ .* would allow at most",
    ),
    "GPT-2 whose pad id is its EOS id, labels masked by value": (
        ["lib_gpt2.py", "cause_gpt2_eos_as_pad.py"],
        r"WARNING sanity check \(first step\): cross_entropy at .* never scores the label 31 of 'data': 31 is \d+% "
        r"of the real \(unpadded\) 'data' frames after each sequence's first",
    ),
    "seq2seq decoder fed the targets unshifted": (
        ["seq2seq_full.py", "cause_seq2seq_unshifted.py"],
        r"WARNING sanity check \(first step\): target leakage: cross_entropy at .*cause_seq2seq_unshifted\.py:\d+ .* "
        r"scores the prediction at position t against token t of 'classes', and that prediction reads the input at "
        r"the target's own position",
    ),
    "CrossEntropyLoss(ignore_index=0) where 0 is a class": (
        ["classify.py", "cause_classify_ignore0.py"],
        r"cross_entropy at .* ignores the label 0 \(ignore_index=0\), but 0 is a class of 'classes'",
    ),
    "a tagger's padding masked with ignore_index=0, a real class": (
        ["sequences.py", "cause_tagger_ignore0.py"],
        r"cross_entropy at .*cause_tagger_ignore0\.py:\d+ .*ignores the label 0 .* 0 is a class of 'classes'",
    ),
    "CTC with the blank moved last but ctc_loss's default blank=0": (
        ["healthy_ctc.py", "cause_ctc_blank_last.py"],
        r"ctc_loss at .*cause_ctc_blank_last\.py:\d+ .*uses blank=0, but 0 is also a symbol of its targets 'classes'",
    ),
    "a tagger whose embedding takes a real symbol as its padding_idx": (
        ["sequences.py", "cause_tagger_padding_idx0.py"],
        r"WARNING sanity check \(first step\): Embedding 'embed' has padding_idx=0, but 0 is a real id of 'data'",
    ),
    "an MLP whose forward never applies its activation": (
        ["classify.py", "cause_classify_no_activation.py"],
        r"WARNING sanity check \(first step\): The model's output is an affine function of 'data': .* though it has "
        r"2 linear layers \('hidden' 8->32, 'out' 32->4\)",
    ),
    "an MLP built with [block] * 3": (
        ["classify.py", "cause_classify_repeated_block.py"],
        r"WARNING sanity check: Sequential 'the model' lists the same Sequential object at its entries 2, 3, 4",
    ),
    "a regression head that converts to physical units in eval mode only": (
        ["regress.py", "cause_regress_eval_denormalized.py"],
        r"WARNING sanity check \(first step\): The evaluation path computes something else than the training path: "
        r".* when module '3' alone runs its forward in training mode .* rescaled, x 12\.5 \+ 300",
    ),
    "a batch norm with Keras's momentum": (
        ["classify.py", "cause_classify_bn_keras_momentum.py"],
        r"WARNING sanity check: BatchNorm1d '1' has momentum=0\.9: .* their 0\.9 is torch's 0\.1",
    ),
    "Adam's betas in the 1 - beta convention of another library": (
        ["classify.py", "cause_classify_adam_one_minus_betas.py"],
        r"WARNING sanity check: the optimizer \(param group 0\) has betas=\(0\.1, 0\.001\): .* spans about 1 step",
    ),
    "class weights against an imbalance written in the reverse class order": (
        ["classify.py", "cause_classify_class_weights_reversed.py"],
        r"WARNING sanity check \(first step\): The class weights of cross_entropy at .* favour the most frequent of "
        r"the 'classes' labels .* They are the inverse frequencies of the classes in another order",
    ),
    "a multi-label error computed through a softmax": (
        ["healthy_multilabel.py", "cause_multilabel_error_through_softmax.py"],
        r"WARNING sanity check \(first step\): The error score 'err' is 0\.\d+ for predictions that the loss calls "
        r"perfect: .* binary_cross_entropy_with_logits at .* \(\+30 where the target is 1 and -30 where it is 0\)",
    ),
    "an error rate that compares [B] predictions with [B, 1] labels": (
        ["classify.py", "cause_classify_error_broadcast.py"],
        r"WARNING sanity check \(first step\): The error score 'err' is 0\.\d+ for predictions that the loss calls "
        r"perfect .* it is computed from \S+ at .*cause_classify_error_broadcast\.py:\d+ .* \(shapes \[8\] and "
        r"\[8, 1\] -> \[8, 8\]\): two tensors of one batch broadcast against each other",
    ),
    "an error rate that broadcasts, in a step with a z-loss on the same logits": (
        ["classify.py", "cause_classify_error_broadcast_zloss.py"],
        r"WARNING sanity check \(first step\): The error score 'err' is 0\.\d+ for predictions that the loss calls "
        r"perfect .* \(shapes \[8\] and \[8, 1\] -> \[8, 8\]\)",
    ),
    "a word error rate with the hypothesis in the reference's place": (
        ["cause_tagger_wer_swapped.py"],
        r"WARNING sanity check \(first step\): The error score 'wer' is \d+ when the model predicts class 0 \(of \d+% "
        r"of the batch's targets\) everywhere: .* while 'wer' is 0 for perfect predictions .* An error rate of the "
        r"targets is at most 2 then",
    ),
    "a cosine classifier whose scores are scaled by a temperature below 1": (
        ["classify.py", "cause_classify_cosine_scale.py"],
        r"WARNING sanity check \(first step\): The scores cross_entropy at .* gets span at most 0\.\d+ within a row "
        r".* the softmax over their 4 classes stays nearly uniform",
    ),
    "nll_loss given raw logits (a CNN without log_softmax)": (
        ["cause_cnn.py", "cause_nll_logits.py"],
        r"nll_loss at .*cause_nll_logits\.py:\d+ .*expects log-probabilities, but gets scores whose exp does not sum",
    ),
    "kl_div given probabilities": (
        ["classify.py", "cause_kl_probs.py"],
        r"kl_div at .*cause_kl_probs\.py:\d+ .*expects log-probabilities .* but gets probabilities",
    ),
    "accumulation of a per-batch frame mean, convolutional tagger (no merged batch to compare)": (
        ["sequences.py", "cause_accum_conv_token_mean.py"],
        r"WARNING accumulation check: in the first window \(4 batches.* a mean over each batch's own rows .* the "
        r"engine weights each batch by its share of the window's \d+ sequences: a frame of batch \d counts",
    ),
}

HEALTHY = {
    "transformers BERT classifier": ["cause_bert.py"],
    "hand-written attention classifier": ["cause_bert.py", "cause_attention.py"],
    "torch-tutorial text classifier": ["cause_text.py"],
    "small CNN on normalized images": ["cause_cnn.py"],
    "classifier with its error rate beside the loss": ["classify.py", "classify_with_error.py"],
    "a linear model factorised through a bottleneck (low rank on purpose)": [
        "classify.py",
        "healthy_linear_bottleneck.py",
    ],
    "a regression with input noise in training only": ["regress.py", "healthy_regress_training_noise.py"],
    "GPT-2 with -100 at the padded positions": ["lib_gpt2.py"],
    "cross-entropy with a z-loss on its normaliser": ["classify.py", "healthy_classify_zloss.py"],
    "a frame tagger scored by its word error rate": ["cause_tagger_wer_swapped.py", "healthy_tagger_wer.py"],
    "a subword tagger whose correct word error rate exceeds 1 for one token everywhere": ["healthy_subword_wer.py"],
    "a multi-label error of the loss's own decisions, and an accuracy marked as an error score": [
        "healthy_multilabel.py",
        "healthy_multilabel_error.py",
    ],
    "class weights falling with the frequency (inverse frequency, a down-weighted background)": [
        "classify.py",
        "healthy_classify_inverse_frequency_weights.py",
    ],
    "seq2seq decoder fed the targets shifted right (teacher forcing)": ["seq2seq_full.py"],
    "accumulation of a per-frame loss, convolutional tagger": [
        "sequences.py",
        "cause_accum_conv_token_mean.py",
        "silent_accum_frame_sum.py",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BUGS))
def test_the_cause_is_named(name):
    files, pattern = BUGS[name]
    text = zoo_log(*files)
    assert re.search(pattern, text), f"{name}: no match for {pattern!r} in:\n{text[-4000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HEALTHY))
def test_the_healthy_twin_is_quiet(name):
    text = zoo_log(*HEALTHY[name])
    assert [line for line in text.splitlines() if "WARNING" in line] == [], name


def test_a_cause_left_by_elimination_or_an_observation_that_decides_nothing_is_not_named():
    from types import SimpleNamespace

    from framework.debug.diagnosis import Ruling, Symptom, _finding

    state = SimpleNamespace(epoch=2, global_step=200)
    symptom = Symptom("the train loss 'ce' has stayed at its chance level", "ce")
    ruled_out = [Ruling("the data carries information", ruled_out="the inputs vary")]
    text = _finding(state, symptom, ruled_out, 0.1).message
    assert "Cause" not in text and "What remains" not in text
    assert "Not decided yet: ruled out the inputs vary. Next experiment: rerun with ++debug_synthetic_data True" in text
    no_fit = Ruling("the model can learn", observed="a copy did not fit one batch", experiment="rerun with X")
    text = _finding(state, symptom, [*ruled_out, no_fit], 0.1).message
    assert (
        "Not decided yet: observed a copy did not fit one batch; ruled out the inputs vary. Next experiment: " in text
    )
    assert text.endswith("rerun with X.") and "Cause" not in text
    named = Ruling("the model reads its input", cause="no prediction depends on the input")
    assert "Cause: no prediction depends on the input." in _finding(state, symptom, [*ruled_out, named], 0.1).message
