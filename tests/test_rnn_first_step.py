"""A recurrent layer whose recurrent weights get no gradient while its input weights do (framework.check_library
.model_checks): its state before the first step is zero, so the loss reads that direction at its first step only;
for the reverse direction of a bidirectional layer that is the last position (out[:, -1])."""

from __future__ import annotations

from conftest import zoo_log


def test_a_bidirectional_lstm_summarised_at_its_last_step_is_named_by_its_reverse_direction():
    bug = zoo_log("cause_bilstm_last_step.py")
    assert "module 'lstm' (LSTM): weight_hh_l0_reverse get a gradient that is exactly zero at step 0" in bug
    assert "In LSTM 'lstm', layer 0's reverse direction gets a gradient into its input weights but none into" in bug
    assert "(out[:, -1]) of a bidirectional layer gives the backward direction after one element" in bug
    assert "WARNING sanity check" not in zoo_log("cause_bilstm_last_step.py", summary_from_h_n=True)
