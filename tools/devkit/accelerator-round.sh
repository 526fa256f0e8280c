#!/usr/bin/env bash
# One round of checks and timings on a machine with an accelerator, prepared to run unattended in one call:
#   a. tools/check-accelerator.py (tests/test_accelerator.py on the real device),
#   b. tools/benchmark-step.py --model transformer: defaults, --all-off, --amp bfloat16,
#   c. tools/benchmark-step.py (the MLP).
# Each step has its own timeout (a hang costs that step only) and writes its whole output to $OUT/<name>.txt as
# well as to stdout; $OUT/summary.txt lists each step's exit status and seconds. Estimated 4 minutes on an H100
# (not yet measured); the timeouts add up to 8.
#
#   OUT=/some/dir bash tools/devkit/accelerator-round.sh            # in the repository root (a copy, not installed)
#
# Rehearsal without an accelerator (wheels of the same versions for the local Python in WHEELS):
#   DEVICE=cpu CHECK_DEVICE=emu CHECK_ARGS="-k loss_scaling" ROUNDS=1 PYTHON=.venv/bin/python WHEELS=/tmp/whl311 \
#   SITE=/tmp/site311 OUT=/tmp/gpu-out bash tools/devkit/accelerator-round.sh
#
# The machine has Python 3.12 with torch, numpy, psutil, tensorboard, h5py, pytest, pytest-xdist and no network; the
# framework's other requirements come as wheels in .whl/ (ignored by git: carry it), installed into a --target
# folder put on PYTHONPATH. The wheels (versions as installed in the development venv):
#   better_exchook==1.20260812.120953 lovely-tensors==0.1.22 lovely-numpy==0.2.24 fastcore==2.2.41
#   google-crc32c==1.9.0 matplotlib==3.11.2 pillow==13.0.0 contourpy==1.3.3 cycler==0.12.1 fonttools==4.68.0
#   kiwisolver==1.5.1 pyparsing==3.3.2 python-dateutil==2.9.0.post0 six==1.17.0
# (lovely-tensors needs lovely-numpy, which needs fastcore and matplotlib; matplotlib needs the rest but numpy and
# packaging.) Fetch them again with:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     better_exchook==1.20260812.120953 lovely-tensors==0.1.22 ...   (the list above)
set -u
export PYTHONUNBUFFERED=1
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
CHECK_DEVICE=${CHECK_DEVICE:-$DEVICE}
CHECK_ARGS=${CHECK_ARGS:-}
ROUNDS=${ROUNDS:-11}
WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/site}
OUT=${OUT:-/tmp/accelerator-round}
cd "$(dirname "$0")/../.." || exit 2
mkdir -p "$OUT"

# Without pip, unpacking each wheel into the folder does what --target does for these (no compiled scripts needed).
if "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl ||
    "$PYTHON" -c "import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]" "$SITE" "$WHEELS"/*.whl; then
    export PYTHONPATH=$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}
else
    echo "accelerator-round: installing the wheels in $WHEELS/ failed; going on without them" | tee "$OUT/install.txt"
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi

# step NAME SECONDS COMMAND...: run COMMAND under a timeout, its output to stdout and $OUT/NAME.txt.
step() {
    local name=$1 limit=$2 start rc
    shift 2
    echo "=== $name (limit ${limit}s): $*"
    start=$SECONDS
    timeout -k 10 "$limit" "$@" 2>&1 | tee "$OUT/$name.txt"
    rc=${PIPESTATUS[0]}
    echo "$name: exit $rc after $((SECONDS - start)) s$([ "$rc" = 124 ] && echo ' (timed out)')" | tee -a "$OUT/summary.txt"
}

step environment 30 "$PYTHON" -c "import sys, torch, framework.assembly; print(sys.version.split()[0], 'torch', torch.__version__, \
torch.accelerator.current_accelerator(), 'framework from', framework.assembly.__file__)"
# shellcheck disable=SC2086  # CHECK_ARGS is a list of pytest arguments
step check-accelerator 90 "$PYTHON" tools/check-accelerator.py --device "$CHECK_DEVICE" -- $CHECK_ARGS
BENCH=("$PYTHON" tools/benchmark-step.py --device "$DEVICE" --rounds "$ROUNDS")
step transformer-defaults 120 "${BENCH[@]}" --model transformer
step transformer-all-off 120 "${BENCH[@]}" --model transformer --all-off
step transformer-amp-bfloat16 70 "${BENCH[@]}" --model transformer --amp bfloat16
step mlp-defaults 60 "${BENCH[@]}"
cat "$OUT/summary.txt"
