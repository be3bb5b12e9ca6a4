#!/usr/bin/env bash
# One device call: GPU tests, then Dragoman and the peers on each size (results as JSON under
# $OUT when it is set, as on the device machine).
# Needs .peers/ (shared/bench's scripts) and .whl/ (the CTranslate2 wheel): see shared/bench/README.md.
# Run from the repository root: the tree imports as `dragoman` from there with nothing installed
# (dragoman/__init__.py), for pytest and `python3 -m bench` alike.
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0
SIZES=${SIZES:-"600M 1.3B 3.3B"}
rm -rf .ct2 && python3 -m pip install -q --no-index --no-deps --target "$PWD/.ct2" .whl/ctranslate2-*.whl  # fresh: a second install into it breaks the package
L=$(python3 -c 'import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))')
mkdir -p .cb12 && ln -sf $L/libcublas.so.13 .cb12/libcublas.so.12 && ln -sf $L/libcublasLt.so.13 .cb12/libcublasLt.so.12
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
timeout 180 python3 -m pytest -q -p no:cacheprovider tests/engine/test_cuda*.py 2>&1 | tail -5
[ -z "${KERNELS:-}" ] || timeout 400 python3 -m bench.kernels_check ${OUT:+--out "$OUT"} 2>&1 | tail -80  # KERNELS=1: each kernel against its reference in bf16
for size in $SIZES; do
  timeout 200 python3 -m bench --size $size --batches 64,256 --gpu-memory 64 ${OUT:+--out "$OUT"} 2>&1 | tail -20  # the memory the speed table was measured with
  (export PYTHONPATH=$PWD/.ct2 LD_LIBRARY_PATH=$PWD/.cb12:$L:${LD_LIBRARY_PATH:-}; \
   BATCHES=4:64,4:256,1:512 timeout 200 python3 .peers/ct2_baseline.py $size bfloat16 2>&1 | tail -20)
  [ -n "${SKIP_HF:-}" ] || BATCHES=4:64,4:256,1:512 timeout 200 python3 .peers/hf_baseline.py $size bf16 2>&1 | tail -20
done
# The device tool returns at most 8 files: every engine's JSON of every size goes back as one,
# {"dragoman_600M": {...}, "ct2_600M": {...}, ...}, ready to be added to results/h200-calls.json as a call.
[ -z "${OUT:-}" ] || python3 - <<'PY'
import json, os, pathlib
out = pathlib.Path(os.environ["OUT"])
parts = sorted(p for p in out.glob("*.json") if p.name != "call.json")
(out / "call.json").write_text(json.dumps({p.stem: json.loads(p.read_text()) for p in parts}, indent=1))
for p in parts:
    p.unlink()
PY
