#!/usr/bin/env python3
"""Run the framework's accelerator checks (tests/test_accelerator.py) on a device: training, eval and
forward, a bit-for-bit resume, float16 loss scaling with a skipped update, the non-finite stop and its
replay, the device check's finding failing for real, memory logging, and at most one host sync per
training step (TensorBoard adding none), each sync named by its call site.

``--device emu`` (the default) runs them on the emulated accelerator the test suite uses (a
PrivateUse1 backend over CPU memory: no pinned memory, events or memory statistics, so the
fallbacks run). ``--device cuda`` (or xpu, mps, ...) runs the same checks on the machine's real
accelerator, where the fast paths run instead: pinned-memory copies behind events, CUDA memory
statistics, CUDA kernels. Needs a checkout (its tests/ directory) and pytest. Exit status: pytest's
(0: every check passed), 2 on bad usage or when the device is not there.
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.tool_args import ToolParser  # noqa: E402


def main(argv: list[str]) -> int:
    parser = ToolParser(__file__, __doc__, takes_config=False, usage_tail="[--device emu|cuda|...] [-- pytest args]")
    parser.add_argument("--device", default="emu", help="emu (emulated, default) or a torch device type, e.g. cuda")
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (after --), e.g. -x or -k resume")
    args = parser.parse_tool_args(argv)
    test_file = os.path.join(ROOT, "tests", "test_accelerator.py")
    if not os.path.exists(test_file):
        parser.error(f"{test_file} is missing: run this tool in a checkout of the repository")
    if args.device != "emu":
        import torch

        accelerator = torch.accelerator.current_accelerator(check_available=True)
        if accelerator is None or accelerator.type != args.device:
            parser.error(
                f"--device {args.device}: torch {torch.__version__} finds {accelerator or 'no accelerator'} here"
            )
    env = dict(os.environ, FRAMEWORK_TEST_ACCELERATOR=args.device)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", test_file, *args.pytest_args]
    print(f"checks on device {args.device}: {' '.join(command)}", flush=True)
    return subprocess.run(command, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
