"""Do the optimizer and its schedule do what was meant? The learning rate applied over the run against the
configured one, and updates that stop or vanish.

A warmup that never advances (its scheduler never stepped, indexed by the epoch, a factor that stays 0)
applies a rate far below the configured one for the whole run; a decay that overshoots stops the updates;
updates that change no weight by more than a tiny fraction of its norm leave the model where it was.
"""

from __future__ import annotations

# An applied rate this many times below the configured one never reached it.
NEVER_REACHED = 100
# A last applied rate this many times below the highest one has stopped the updates.
STOPPED = 1000
# Updates below this fraction of a weight's norm are negligible (healthy training: around 1e-3).
VANISHING_UPDATE = 1e-5

# The problems (a finding's evidence["problem"]) that several checks find, each in its own way: the schedule plan
# before the run, the learning watch from the loss curve, the diagnosis from the rates applied. Reported once.
TINY_RATE = "the learning rate applied is far too small to train"
ZERO_RATE = "the learning rate applied is 0"


def schedule_problem(applied: list[float], configured: float, update_ratio: float | None) -> tuple[str, dict]:
    """(what is wrong with the rates the optimizer ``applied``, in order over the run, against the ``configured``
    learning rate, and the latest update ratio; empty if nothing; the numbers)."""
    if not applied:
        return "", {}
    first, highest, last = applied[0], max(applied), applied[-1]
    evidence = {"configured": configured, "applied first": first, "applied highest": highest, "applied last": last}
    if update_ratio is not None:
        evidence["largest |dW|/|W| per update"] = update_ratio
    if highest == 0:
        evidence["problem"] = ZERO_RATE
        return "the optimizer applied a learning rate of 0 in every step: the parameters never changed", evidence
    if configured > 0 and highest * NEVER_REACHED <= configured:
        evidence["problem"] = TINY_RATE
        return (
            f"the optimizer applied at most {highest:g} over the run, {configured / highest:.0f}x below the configured "
            f"learning rate {configured:g}: the schedule never reaches it (a warmup whose scheduler is never "
            f"stepped, or that counts epochs where it means steps, does this)",
            evidence,
        )
    if last * STOPPED <= highest:
        evidence["problem"] = TINY_RATE
        return (
            f"the applied learning rate fell from {highest:g} to {last:g}: the schedule stopped the updates",
            evidence,
        )
    if update_ratio is not None and update_ratio < VANISHING_UPDATE:
        return (
            f"the updates vanish: no weight changes by more than {update_ratio:.1e} of its norm per update "
            f"(healthy training: around 1e-3)",
            evidence,
        )
    return "", evidence
