#!/usr/bin/env python3
"""Run two implementations of a model on the same batch and name the first module where they disagree.

Side A is the config's model (with ``--checkpoint``'s parameters; without one, the reference's
parameters are copied in through the mapping). Side B is a plain PyTorch reference or another
config. Both run on the first batch of ``--dataset`` with the same RNG seed, in eval mode unless
``--train-mode``: ``model(batch[first input key])``, or ``fn(model, batch)`` with ``--forward``.
Every module's output is recorded; modules are paired through the parameter mapping (see
tools/import-torch-model.py) or, without parameters, by path. The table lists each pair in
execution order (innermost first) with max abs/rel diff and a verdict, and names the first
diverging module. ``--backward`` also compares the gradients of a fixed random projection of the
outputs; ``--bisect`` narrows the first diverging module down to the aten op and source line.
Exit status: 0 the models match, 1 they differ, 2 bad usage.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(
        __file__,
        __doc__,
        usage_tail="[--checkpoint ckpt.pt]\n"
        "    (--reference file.py:factory [--state-dict weights.pt] [--rule 'regex=>repl' ...] [--mapping map.txt]\n"
        "     | --other other_config.py [--other-checkpoint other.pt])\n"
        "    [--dataset train] [--forward file.py:fn] [--seed 0] [--rtol 1e-4] [--atol 1e-6]\n"
        "    [--backward] [--bisect] [--train-mode]",
    )
    parser.add_argument("--checkpoint", help="parameters for the config's model")
    parser.add_argument("--reference", help="file.py:factory or package.module:factory returning an nn.Module")
    parser.add_argument("--state-dict", help="parameters for the reference")
    parser.add_argument("--rule", action="append", default=[], help="'regex=>replacement' on reference names")
    parser.add_argument("--mapping", help="mapping file: 'reference_name -> framework_name' lines")
    parser.add_argument("--other", action="append", default=[], help="another config (instead of --reference)")
    parser.add_argument("--other-checkpoint", help="parameters for the other config's model")
    parser.add_argument("--dataset", default="train", help="the config's dataset option to take the batch from")
    parser.add_argument("--forward", help="file.py:fn, fn(model, batch) -> output, run on both sides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    parser.add_argument("--backward", action="store_true", help="also compare the gradients")
    parser.add_argument("--bisect", action="store_true", help="narrow the first diverging module down to an op")
    parser.add_argument("--train-mode", action="store_true", help="run in train mode (dropout etc. with the same seed)")
    args = parser.parse_tool_args(argv)
    if bool(args.other) == bool(args.reference or args.state_dict):
        parser.error("give either --reference (and/or --state-dict) or --other")
    return args


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import torch  # noqa: E402

from framework.base.errors import ConfigError, FrameworkError  # noqa: E402
from framework.check_library.tensors import iter_tensors  # noqa: E402
from framework.compare import Row, bisect, compare_calls, compare_tensors, format_rows, pair_modules, record_calls  # noqa: E402
from framework.model_import import (  # noqa: E402
    load_object,
    load_reference,
    map_with_options,
    mapped_state_dict,
)
from framework.tooling import case_from_argv, load_case  # noqa: E402


def main(args: argparse.Namespace) -> int:
    try:
        case = case_from_argv(args.config_args, dataset=args.dataset, checkpoint_path=args.checkpoint)
        model, batch = case.model, case.batch
        if args.other:
            reference = load_case(args.other, dataset=None, checkpoint_path=args.other_checkpoint).model
        else:
            reference, _ = load_reference(args.reference, args.state_dict)
            if reference is None:
                raise ConfigError("Comparing needs the reference's code: give --reference file.py:factory.")
        mapping, rules = map_with_options(reference.state_dict(), model.state_dict(), args.rule, args.mapping)
        forward = load_object(args.forward) if args.forward else _default_forward(case)
    except FrameworkError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return exc.exit_code
    if not mapping.complete:
        print(f"Parameter mapping incomplete (those parameters are not compared): {mapping.problems()}.")
    if args.checkpoint is None and not args.other:
        model.load_state_dict({**model.state_dict(), **mapped_state_dict(mapping, reference.state_dict())})
        print("No --checkpoint: the config's model got the reference's parameters through the mapping.")
    for m in (model, reference):
        m.train(args.train_mode)
    (calls, output), failed = _run(model, forward, batch, args.seed, "the config's model")
    (ref_calls, ref_output), ref_failed = _run(reference, forward, batch, args.seed, "the reference")
    pairs = pair_modules(model, reference, mapping, rules)
    rows = compare_calls(calls, ref_calls, pairs, args.rtol, args.atol)
    print(format_rows(rows))
    unpaired = sorted({c.path for c in calls if c.path not in pairs and c.outputs})
    if unpaired:
        print(f"Not compared (no counterpart in the reference): {', '.join(unpaired)}")
    first = next((r for r in rows if not r.match), None)
    if first is None and (failed or ref_failed):
        print(f"The {len(rows)} module outputs before the failure agree (rtol {args.rtol:g}, atol {args.atol:g}).")
    elif first is None:
        print(f"The models match: {len(rows)} module outputs agree (rtol {args.rtol:g}, atol {args.atol:g}).")
    else:
        print(
            f"First diverging module (in execution order): {first.framework} (reference: {first.reference}), "
            f"max abs diff {first.max_abs:.3g}."
        )
        if args.bisect:
            print(bisect(first, args.seed, args.rtol, args.atol))
    differ = first is not None or failed or ref_failed
    if args.backward and not (failed or ref_failed):
        differ = _compare_gradients(model, reference, output, ref_output, mapping, args) or differ
    return 1 if differ else 0


def _run(model, forward, batch, seed, side):
    """Record the calls of one side; an exception is reported, and the calls before it are still compared."""
    try:
        return record_calls(model, lambda: forward(model, batch), seed), False
    except Exception as exc:
        print(f"{side} failed in forward: {type(exc).__name__}: {exc}")
        for note in getattr(exc, "__notes__", []):
            print(note)
        return (exc.calls, None), True


def _default_forward(case):
    """``model(batch[first input key])``."""
    key = case.input_key
    return lambda model, batch: model(batch[key])


def _compare_gradients(model, reference, output, ref_output, mapping, args) -> bool:
    """Backward through a fixed random projection of both outputs; compare the mapped parameters' gradients."""
    outputs, ref_outputs = list(iter_tensors(output)), list(iter_tensors(ref_output))
    generator = torch.Generator().manual_seed(args.seed)
    projections = [torch.randn(t.shape, generator=generator) for t in outputs]
    for outs in (outputs, ref_outputs):
        sum((o * p).sum() for o, p in zip(outs, projections, strict=True) if o.requires_grad).backward()
    params, ref_params = dict(model.named_parameters()), dict(reference.named_parameters())
    rows = []
    for ref_name, name, _ in mapping.pairs:
        grad, ref_grad = params[name].grad, ref_params[ref_name].grad
        if grad is None or ref_grad is None:
            continue
        shape, max_abs, max_rel, match = compare_tensors([grad], [ref_grad], args.rtol, args.atol)
        rows.append(Row(name, ref_name, shape, max_abs, max_rel, match))
    print(format_rows(rows, "gradient"))
    first = next((r for r in rows if not r.match), None)
    if first is not None:
        print(
            f"First differing gradient: {first.framework} (reference: {first.reference}), max abs diff {first.max_abs:.3g}."
        )
    return first is not None


if __name__ == "__main__":
    sys.exit(main(ARGS))
