"""Trust a warning (issue 41): healthy setups, written the way their communities write them, get none.

Each setup trains two epochs with default options, long enough that the learning watch judges the
curve (at the epoch ends; the slow starters also at step 200), and the run must print no WARNING
(or ERROR) line and report no finding of severity warning or error. The setups: Hugging Face
models from tiny configs (sequence and token classification, causal and masked LM, seq2seq with T5
and Marian, GPT-2 with tied embeddings), vision CNNs (zero-initialised residual branches, BatchNorm,
mixup, label smoothing under a cosine schedule), speech (CTC with lengths on the CPU, a frame
tagger), packed sequences, stochastic depth (torchvision's, timm's DropPath) and LayerDrop, a top-1
mixture of experts, contrastive and triplet losses with in-batch negatives, distillation from a
frozen teacher, imbalanced tasks with focal losses and class weights, multi-label BCE with
pos_weight, domain adaptation whose domain label differs between train and dev by design, slow
starters (a long warmup, a long-range recall task), the PyTorch tutorials' Transformer and seq2seq,
docs/own_data.rst's example, policy gradient, diffusion, a normalising flow and a curriculum. Each
run is a real Engine run of configs in tests/zoo/, in process.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from conftest import ROOT
from framework.assembly import Engine
from framework.base import findings
from framework.base.config import load_config

# Found, not imported: importing transformers takes seconds, which a fast-subset run that selects none of these
# tests would pay at collection.
pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed"),
]

ZOO = os.path.join(ROOT, "tests", "zoo")
VECTORS = "healthy_vectors.py"
IMAGES = "quadrants.py"

# setup -> (config files, overrides)
CORPUS = {
    "transformers: tiny BertForSequenceClassification": (["hf_bert.py"], {"batch_size": 8}),
    "games: a WGAN-GP critic, whose output bias the Wasserstein loss cancels": (["healthy_wgan_critic.py"], {}),
    "transformers: BertForTokenClassification, labels -100 at the padding": (["healthy_bert_tagging.py"], {}),
    "transformers: BertForMaskedLM, DataCollatorForLanguageModeling's masking": (["healthy_bert_mlm.py"], {}),
    "transformers: GPT2LMHeadModel, causal LM on padded batches": (["healthy_gpt2_lm.py"], {}),
    "transformers: GPT2LMHeadModel, tied embeddings": (["hf_gpt2.py"], {}),
    "transformers: T5ForConditionalGeneration, seq2seq": (["healthy_t5_reverse.py"], {}),
    "transformers: MarianMTModel, sinusoidal positions frozen by the library": (["lib_marian.py"], {}),
    "vision: torchvision-style ResNet, zero_init_residual, SGD": (["resnet_zero_init_residual.py"], {}),
    "vision: timm-style ResNet, zero_init_last": (["resnet_zero_init.py"], {}),
    "vision: CIFAR-tutorial CNN with BatchNorm and mixup": ([IMAGES, "healthy_cnn_mixup.py"], {}),
    "vision: VGG-style CNN, label smoothing, SGD+Nesterov, cosine per step": ([IMAGES, "healthy_cnn_smoothing.py"], {}),
    "speech: CTC, lengths on the CPU": (["healthy_ctc.py"], {}),
    "speech: frame tagger, 1-D convolutions, masked loss": (["healthy_frame_tagger.py"], {}),
    "packed sequences: GRU over pack_padded_sequence, lengths on the CPU": (["healthy_packed_gru.py"], {}),
    "a token autoencoder: every position reconstructed from one code": (
        ["sequences.py", "healthy_token_autoencoder.py"],
        {"num_epochs": 2},
    ),
    "stochastic depth: torchvision's stochastic_depth(mode='batch')": ([VECTORS, "healthy_stochastic_depth.py"], {}),
    "stochastic depth: timm's DropPath with LayerScale": ([VECTORS, "healthy_drop_path.py"], {}),
    # random_seed 1: the first step skips a layer / leaves experts idle (the default seed happens to use all of them)
    "LayerDrop: fairseq-style Transformer encoder": (["healthy_layerdrop.py"], {"random_seed": 1}),
    "mixture of experts: top-1 Switch routing, load-balancing loss": ([VECTORS, "healthy_moe.py"], {"random_seed": 1}),
    "contrastive: CLIP loss, in-batch negatives": (["healthy_contrastive.py"], {}),
    "metric learning: batch-hard triplet loss": ([VECTORS, "healthy_triplet.py"], {}),
    "distillation: frozen teacher, KL at temperature 2": ([VECTORS, "healthy_distillation.py"], {}),
    "distillation: a teacher that knows the rule behind noisy labels, error against it": (
        ["healthy_distillation_noisy_labels.py"],
        {},
    ),
    "imbalanced: rare events, torchvision's sigmoid_focal_loss": (["healthy_focal.py"], {}),
    "imbalanced: long tail, multi-class focal loss": (["healthy_focal_multiclass.py"], {}),
    "imbalanced: inverse-frequency class weights": (["healthy_class_weights.py"], {}),
    "multi-label: BCEWithLogitsLoss with pos_weight": (["healthy_multilabel.py"], {}),
    "domain adaptation: DANN, domain label differs between train and dev": (["healthy_domain_adaptation.py"], {}),
    "slow starter: Transformer with a 3000-step linear warmup": (["healthy_warmup.py"], {}),
    "slow starter: long-range recall with an LSTM": (["healthy_recall.py"], {}),
    "torch tutorial: nn.TransformerEncoder, causal and padding masks": (["lib_transformer.py"], {"num_epochs": 2}),
    "torch tutorial: seq2seq GRU with attention, teacher forcing, NLLLoss": (["healthy_seq2seq_gru.py"], {}),
    "LSTM tagger over 12AX sequences": (["sequences.py"], {"num_epochs": 2}),
    "ReZero gate, zero-initialised output layer, LayerScale": (["classify.py", "gated_residual.py"], {"num_epochs": 2}),
    "regression: MLP, mse_loss": (["regress.py"], {"num_epochs": 2}),
    "docs/own_data.rst's example": (["healthy_own_data.py"], {}),
    "policy gradient: REINFORCE with a baseline, a contextual bandit": ([VECTORS, "healthy_policy_gradient.py"], {}),
    "diffusion: DDPM-style noise prediction": ([VECTORS, "healthy_diffusion.py"], {}),
    "normalising flow: RealNVP-style affine couplings, NLL": ([VECTORS, "healthy_flow.py"], {}),
    "curriculum: training noise growing with the epoch": ([VECTORS, "healthy_curriculum.py"], {}),
}


@pytest.fixture
def reported():
    """The findings reported during the test."""
    seen: list[findings.Finding] = []
    findings.add_sink(seen.append)
    yield seen
    findings.remove_sink(seen.append)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CORPUS))
def test_a_healthy_setup_gets_no_warning(output, reported, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # what a config writes (docs/own_data.rst's toy files) stays in the test's folder
    files, overrides = CORPUS[name]
    config = load_config([os.path.join(ZOO, f) for f in files], {"model": None, **overrides})
    Engine(config).run("train")
    text = output()
    assert "Epoch 2 evaluation" in text, text[-2000:]
    lines = [line for line in text.splitlines() if "WARNING" in line or "ERROR" in line]
    severe = [f.line() for f in reported if f.severity != "note"]
    assert lines == [] and severe == [], f"{name}:\n" + "\n".join(lines + severe)
