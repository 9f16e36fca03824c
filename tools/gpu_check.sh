#!/usr/bin/env bash
# The CUDA paths of tbd on a real GPU, in one prepared run: a lent GPU machine is minutes of time,
# so every check is here, each capped, in order of value, and what it wrote comes back packed.
#
#   bash tools/gpu_check.sh                  # on the GPU machine, from the repository root
#   DEVICE=cpu SIZE=test bash tools/gpu_check.sh   # a dry run of the same steps on a CPU machine
#
# Environment: OUT (where the packed results go; default /tmp/gpu_check), BUDGET_S (seconds for all
# steps, default 420; each step gets at most what is left), WHEELS (a folder of wheels for what the
# machine's Python lacks: msgspec, nvtx, mlperf-logging, num2words; tbd itself is installed from this checkout),
# STEPS (the steps to run, by the names below: "profile train ncu"; default all).
# Steps: tbd env; tbd profile resnet50 (full size, batch 64) with NVML and the memory categories;
# bench/overhead.py (tbd's throughput against a bare loop, side by side); tbd train resnet50 on the
# GPU (time to accuracy, NVML energy); tbd profile transformer; tbd profile resnet50 --ncu 3 (Nsight
# Compute counters); tbd profile resnet50 --nproc-per-node 1 (torchrun, NCCL); tools/gpu_busy_truth.py
# (GPU busy measured apart from tbd); tbd sweep --tta at batch 16, 64, 256; tbd train seq2seq (num2words);
# tbd train --size full.
# At the end, tools/gpu_results.py writes OUT/gpu-check-<date>-<gpu>.md, the page docs/results/ keeps.
# docs/results/gpu-check-*.md record what each lease measured.
set -u
OUT=${OUT:-/tmp/gpu_check}
DEVICE=${DEVICE:-cuda}
SIZE=${SIZE:-full}
BUDGET_S=${BUDGET_S:-420}
WHEELS=${WHEELS:-.whl}
STEPS=${STEPS:-all}
RUNS=$(mktemp -d /tmp/tbd-gpu-runs.XXXXXX)
START=$(date +%s)
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
export PYTHONUNBUFFERED=1

left() { echo $(( BUDGET_S - ($(date +%s) - START) )); }
# step NAME CAP_S CMD...: run CMD under min(CAP_S, time left), logged with its exit status and time.
step() {
    local name=$1 cap=$2; shift 2
    local budget; budget=$(left)
    (( budget < cap )) && cap=$budget
    if (( cap < 15 )); then echo "== $name: skipped, ${budget}s left"; return; fi
    echo "== $(date +%T) $name (cap ${cap}s): $*"
    local t0=$SECONDS
    timeout --signal=INT --kill-after=10 "$cap" "$@"
    echo "== $name: exit $? after $(( SECONDS - t0 ))s"
}
pack() {  # pack NAME DIR: DIR as OUT/NAME.tar.gz (the lease returns at most 8 files)
    [ -d "$2" ] && tar -czf "$OUT/$1.tar.gz" -C "$(dirname "$2")" "$(basename "$2")"
}

PY=python3
if [ "$DEVICE" != "cpu" ]; then
    if compgen -G "$WHEELS/*.whl" > /dev/null; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$WHEELS"/*.whl
    fi
    $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --target /tmp/site . || exit 1
    export PYTHONPATH=/tmp/site
    TBD="$PY -m tbd.cli"
    if ! command -v ncu > /dev/null; then
        TBD_NCU=$(ls /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1) && export TBD_NCU
    fi
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
else
    PY=$PWD/.venv/bin/python
    TBD=$PWD/.venv/bin/tbd
fi
cd /tmp || exit 1  # the runs import the installed tbd, never the checkout's folders
ROOT=$OLDPWD
$PY -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda,
'device', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none')"

want() { [ "$STEPS" = all ] || [[ " $STEPS " == *" $1 "* ]]; }
want env && step env 30 $TBD env
want profile && step profile-resnet50 120 $TBD profile resnet50 --device "$DEVICE" --size "$SIZE" --batch 64 \
    --window-seconds 2 --quiet --out "$RUNS/resnet50-b64"
want overhead && step overhead 60 $PY "$ROOT/bench/overhead.py" --model resnet50 --batch 64 --size "$SIZE" \
    --device "$DEVICE" --iterations 20 --rounds 3
want train && step train-resnet50 90 $TBD train resnet50 --device "$DEVICE" --runs 3 --out "$RUNS/train-resnet50"
want transformer && step profile-transformer 90 $TBD profile transformer --device "$DEVICE" --size "$SIZE" \
    --window-seconds 2 --quiet --out "$RUNS/transformer"
if [ "$DEVICE" != "cpu" ]; then
    want ncu && step profile-resnet50-ncu 150 $TBD profile resnet50 --device "$DEVICE" --size "$SIZE" --batch 64 \
        --window-seconds 2 --ncu 3 --quiet --out "$RUNS/resnet50-b64-ncu"
    want ddp && step profile-resnet50-ddp 90 $TBD profile resnet50 --device "$DEVICE" --size "$SIZE" --batch 64 \
        --window-seconds 2 --nproc-per-node 1 --quiet --out "$RUNS/resnet50-b64-ddp"
    want busy-truth && step busy-truth 60 $PY "$ROOT/tools/gpu_busy_truth.py" --model resnet50 --batch 64 \
        --size "$SIZE" --out "$RUNS/busy-truth"
fi
want sweep-tta && step sweep-tta 100 $TBD sweep resnet50 --tta --batch 16,64,256 --runs 3 --device "$DEVICE" \
    --quiet --out "$RUNS/sweep-tta"
want train-seq2seq && step train-seq2seq 90 $TBD train seq2seq --device "$DEVICE" --runs 3 --out "$RUNS/train-seq2seq"
want train-full && step train-resnet50-full 80 $TBD train resnet50 --size full --device "$DEVICE" --runs 3 \
    --out "$RUNS/train-resnet50-full"
# The dated results page (docs/results/), from what the steps wrote, with tbd's GPU busy beside a stdlib recompute.
$PY "$ROOT/tools/gpu_results.py" "$RUNS" "$OUT/gpu_check.log" "$OUT"
pack runs "$RUNS"  # one file: a lease returns at most 8
ls -la "$OUT"
echo "== done in $(( $(date +%s) - START ))s"
