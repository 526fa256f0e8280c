#!/usr/bin/env python3
"""Flip single bits in a checkpoint and load each copy as a resume does: is every damaged copy refused or harmless?

    python tools/checkpoint-bitflips.py output/model.002.pt --flips 200 --seed 0
    python tools/checkpoint-bitflips.py output/model.002.pt --outside-records

Each of ``--flips`` copies of the checkpoint gets one random bit flipped (anywhere in the file) and
is loaded with the framework's loader (every record's CRC-32, torch.load, the entries a resume
needs). A copy is *refused* (the loader raises its one-paragraph CheckpointError), *harmless* (it
loads, and every tensor is bitwise equal and every value equal to the original's) or *loaded
changed* (it loads with other contents: silent corruption). ``--outside-records`` flips every bit
that no record's CRC-32 covers instead (headers, padding, the zip directory; inside a record a
single flipped bit always changes its CRC-32), one copy each. ``--unverified`` loads with plain
``torch.load(weights_only=True)`` instead, as before verification. The table also says where the
flips landed, and the tool times verification against torch.load on the file (best of 5, page
cache warm). Exit status 1 if any copy loaded changed.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from framework.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, takes_config=False, usage_tail="checkpoint.pt [options]")
    parser.add_argument("path", metavar="checkpoint.pt", help="a checkpoint written by a run of this framework")
    parser.add_argument("--flips", type=int, default=200, help="how many single-bit flips (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random bit positions (default 0)")
    parser.add_argument("--outside-records", action="store_true", help="every bit outside the records' data")
    parser.add_argument("--unverified", action="store_true", help="load with plain torch.load, without verification")
    return parser.parse_tool_args(argv)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import random  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import zipfile  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from framework.base.errors import CheckpointError  # noqa: E402
from framework.training import checkpoint, checkpoint_integrity  # noqa: E402


def same(a: Any, b: Any) -> bool:
    """Equal contents: tensors bitwise (dtype, shape, bytes), containers element by element, the rest by ==."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if (a.dtype, a.shape) != (b.dtype, b.shape):
            return False
        return torch.equal(a.contiguous().view(-1).view(torch.uint8), b.contiguous().view(-1).view(torch.uint8))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def regions(path: str) -> list[tuple[int, int, str]]:
    """(start, end, what) of every part of the file: record headers, the pickled structure, tensor data, metadata,
    and the zip directory at the end."""
    found = []
    with zipfile.ZipFile(path) as archive:
        infos = sorted(archive.infolist(), key=lambda i: i.header_offset)
        with open(path, "rb") as f:
            for info in infos:
                f.seek(info.header_offset + 26)
                name_length, extra_length = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
                begin = info.header_offset + 30 + name_length + extra_length
                found.append((info.header_offset, begin, "record headers"))
                if info.filename.endswith("data.pkl"):
                    what = "structure (data.pkl)"
                else:
                    what = "tensor data" if "/data/" in info.filename else "torch metadata"
                found.append((begin, begin + info.compress_size, what))
        found.append((archive.start_dir, os.path.getsize(path), "zip directory"))
    return found


def bits_to_flip(args: argparse.Namespace, size: int, parts: list[tuple[int, int, str]]) -> list[int]:
    """Random bit positions, or (``--outside-records``) every bit outside the records' CRC-covered data."""
    if not args.outside_records:
        rng = random.Random(args.seed)
        return [rng.randrange(size * 8) for _ in range(args.flips)]
    covered = sorted((start, end) for start, end, what in parts if what not in ("record headers", "zip directory"))
    outside, position = [], 0
    for start, end in [*covered, (size, size)]:
        outside.extend(range(position * 8, start * 8))
        position = max(position, end)
    return outside


def region_of(offset: int, parts: list[tuple[int, int, str]]) -> str:
    return next((what for start, end, what in parts if start <= offset < end), "between records")


def load(path: str, unverified: bool) -> Any:
    if unverified:
        return torch.load(path, map_location="cpu", weights_only=True)
    saved = checkpoint.load_checkpoint(path)
    return checkpoint.load_training_state(path) if "optimizer" in saved else saved


def best_time(function: Any, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main(args: argparse.Namespace) -> int:
    try:
        original = load(args.path, unverified=False)
    except CheckpointError as exc:
        print(f"ERROR: the original must load: {exc}", file=sys.stderr)
        return 2
    with open(args.path, "rb") as f:
        data = f.read()
    parts = regions(args.path)
    bits = bits_to_flip(args, len(data), parts)
    outcomes: Counter = Counter()
    landed: Counter = Counter()
    changed = []
    with tempfile.TemporaryDirectory(prefix="bitflips-") as tmp:
        copy = os.path.join(tmp, "model.001.pt")  # named like a checkpoint: the refusal names its siblings
        for bit in bits:
            damaged = bytearray(data)
            damaged[bit // 8] ^= 1 << (bit % 8)
            with open(copy, "wb") as f:
                f.write(damaged)
            where = region_of(bit // 8, parts)
            try:
                loaded = load(copy, args.unverified)
            except Exception:  # refused: CheckpointError, or whatever plain torch.load raises
                outcome = "refused"
            else:
                outcome = "harmless" if same(loaded, original) else "loaded changed"
            if outcome == "loaded changed":
                changed.append(f"byte {bit // 8} bit {bit % 8} ({where})")
            outcomes[outcome] += 1
            landed[(where, outcome)] += 1
    loader = "plain torch.load" if args.unverified else "framework loader (CRC-32 of every record verified)"
    which = "every bit outside the records' data" if args.outside_records else f"random, seed {args.seed}"
    print(f"{args.path}: {len(data)} bytes; {len(bits)} single-bit flips ({which}), {loader}")
    for outcome in ("refused", "harmless", "loaded changed"):
        print(f"  {outcome:<15} {outcomes[outcome]:>4}")
    print("where the flips landed (region: refused / harmless / loaded changed):")
    for where in sorted({w for w, _ in landed}):
        counts = " / ".join(str(landed[(where, o)]) for o in ("refused", "harmless", "loaded changed"))
        print(f"  {where:<22} {counts}")
    for line in changed[:10]:
        print(f"  loaded changed: {line}")
    load_time = best_time(lambda: torch.load(args.path, map_location="cpu", weights_only=True))
    verify_time = best_time(lambda: checkpoint_integrity.damage(args.path))
    print(
        f"verification {verify_time * 1e3:.1f} ms, torch.load {load_time * 1e3:.1f} ms (best of 5): "
        f"+{100 * verify_time / load_time:.0f}% load time"
    )
    return 1 if outcomes["loaded changed"] else 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
