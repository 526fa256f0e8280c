"""Every kind of parameter and gradient torch allows passes every check (issue 49): a real rnn.py run with default
options trains it to the end with no WARNING line and no crash. Sparse gradients (``nn.Embedding(sparse=True)``
with ``SparseAdam``: torch has no norm for the sparse layout), complex parameters (``nn.Linear(dtype=cfloat)``:
a cast to float drops the imaginary part, and no fused optimizer kernel takes them), a model built on the meta
device and materialised with ``to_empty``, lazy modules (``nn.LazyLinear``: uninitialised parameters until a batch
sizes them; the engine runs train_step once on the first batch without gradients to size them, then resumes and
evaluates from their checkpoints). FSDP's DTensor shards are covered by test_fsdp.py.
"""

from __future__ import annotations

import os

import pytest
import torch

from conftest import ROOT, run_rnn
from framework.check_library.sharded import norms, stored

ZOO = os.path.join(ROOT, "tests", "zoo")

SETUPS = {
    "sparse gradients: nn.Embedding(sparse=True), SparseAdam": ["cause_text.py", "healthy_sparse_embedding.py"],
    "complex parameters: nn.Linear(dtype=torch.cfloat), Adam": ["healthy_vectors.py", "healthy_complex.py"],
    "meta-device model, materialised with to_empty": ["healthy_vectors.py", "healthy_meta_init.py"],
    "lazy modules: nn.LazyLinear": ["healthy_vectors.py", "healthy_lazy.py"],
}


@pytest.mark.parametrize("name", list(SETUPS))
def test_a_setup_with_this_kind_of_tensor_trains_with_no_warning(name, tmp_path):
    files = [os.path.join(ZOO, f) for f in SETUPS[name]]
    result = run_rnn(*files, "++model", str(tmp_path / "model"), cwd=str(tmp_path), timeout=300)
    text = result.stdout + result.stderr
    assert result.returncode == 0, text[-3000:]
    assert "Epoch 2 evaluation" in text and "Run summary: completed" in text, text[-3000:]
    assert [line for line in text.splitlines() if "WARNING" in line or "Warning:" in line] == [], text[-3000:]
    if "lazy" in name:  # a lazy model's checkpoint sizes it when it is evaluated
        result = run_rnn(*files, "++model", str(tmp_path / "model"), "++task", "eval", cwd=str(tmp_path), timeout=300)
        assert result.returncode == 0 and "Evaluation of epoch 2: dev:" in result.stdout, result.stdout[-3000:]


def test_the_values_a_check_reads_have_the_tensors_norm_whatever_its_layout():
    dense = torch.tensor([[0.0, 3.0], [4.0, 0.0]])
    for kind in (dense, dense.to_sparse(), dense.to_sparse_csr(), torch.complex(dense, dense)):
        values = stored(kind)
        assert values.layout == torch.strided and not values.is_complex()
        assert torch.linalg.vector_norm(values).item() == pytest.approx(
            torch.linalg.vector_norm(kind.to_dense()).item()
        )
    uncoalesced = torch.sparse_coo_tensor([[0, 0]], [1.0, 2.0], (3,))  # one entry written twice: its value is 3
    assert norms([uncoalesced]).item() == pytest.approx(3.0)
