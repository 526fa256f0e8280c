#!/usr/bin/env python3
"""Import the parameters of another PyTorch implementation into a framework checkpoint.

The reference's tensors are mapped onto the model of the config's ``get_model``: by the lines of
``--mapping`` (``reference_name -> framework_name``), then by name after the ``--rule``s, then by
shape in order of appearance. The mapping table is printed (save it with ``--save-mapping``, edit
it, pass it back with ``--mapping``). Unmapped tensors and shape mismatches are listed; without
``--partial`` the import then fails (exit 1) and writes nothing. The written checkpoint starts a
training with ``import_model_train_epoch1 = "imported.pt"`` and is what tools/compare-models.py
takes as ``--checkpoint``.
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
        usage_tail="--out imported.pt\n"
        "    (--reference file.py:factory | package.module:factory) and/or --state-dict weights.pt\n"
        "    [--rule 'regex=>replacement' ...] [--mapping mapping.txt] [--save-mapping mapping.txt] [--partial]",
    )
    parser.add_argument("--reference", help="file.py:factory or package.module:factory returning an nn.Module")
    parser.add_argument("--state-dict", help="the reference's state_dict (or framework checkpoint) file")
    parser.add_argument("--rule", action="append", default=[], help="'regex=>replacement' on reference names")
    parser.add_argument("--mapping", help="a mapping file: 'reference_name -> framework_name' lines")
    parser.add_argument("--save-mapping", help="write the mapping that was used to this file")
    parser.add_argument("--out", required=True, help="the framework checkpoint to write")
    parser.add_argument("--partial", action="store_true", help="write even if some tensors stay unmapped")
    return parser.parse_tool_args(argv)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

from framework.base.errors import FrameworkError  # noqa: E402
from framework.model_import import (  # noqa: E402
    format_mapping,
    load_reference,
    map_with_options,
    mapped_state_dict,
)
from framework.tooling import case_from_argv  # noqa: E402
from framework.training import checkpoint  # noqa: E402


def main(args: argparse.Namespace) -> int:
    try:
        _, reference = load_reference(args.reference, args.state_dict)
        model = case_from_argv(args.config_args, dataset=None).model
        own = model.state_dict()
        mapping, _ = map_with_options(reference, own, args.rule, args.mapping)
    except FrameworkError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"Mapping of {len(mapping.pairs)} reference tensors onto the model of {args.config_args[0]}:")
    print(format_mapping(mapping, reference))
    if args.save_mapping:
        with open(args.save_mapping, "w", encoding="utf-8") as f:
            f.write(format_mapping(mapping, reference) + "\n")
        print(f"Saved the mapping to {args.save_mapping}; edit it and pass it back with --mapping.")
    if not mapping.complete:
        print(f"NOT MAPPED: {mapping.problems()}.", file=sys.stderr)
        if not args.partial:
            print("Nothing written. Add --rule or --mapping lines, or --partial to write anyway.", file=sys.stderr)
            return 1
    state = dict(own)  # tensors the reference does not provide keep the model's initial values (--partial)
    state.update(mapped_state_dict(mapping, reference))
    source = args.reference or args.state_dict
    checkpoint.save_checkpoint(args.out, {"model": state, "epoch": 0, "global_step": 0, "imported_from": source})
    print(
        f"Wrote {args.out}: {len(mapping.pairs)} tensors from {source}. Train from it with "
        f"import_model_train_epoch1 = {args.out!r}, or compare with framework-compare-models --checkpoint {args.out}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
