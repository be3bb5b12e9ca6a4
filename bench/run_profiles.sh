#!/usr/bin/env bash
# One device call on one GPU: the GPU tests under each card profile (kernels/gpu_profile.py), then,
# with BENCH set, `python -m bench --size 600M` under each "profile:GB of GPU memory[:unchained]" of
# BENCH (e.g. BENCH="sm_90:64 sm_86:64 sm_90:2 sm_90:64:unchained", the last without chained launches,
# DRAGOMAN_CHAINED=0). Logs and the figures, as one JSON, under $OUT.
# Run from the repository root: the tree imports as `dragoman` from there with nothing installed
# (dragoman/__init__.py), for pytest and `python3 -m bench` alike.
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0
PROFILES=${PROFILES-"sm_90 sm_86 sm_75 sm_89 sm_80"}
BUDGET=${BUDGET:-540}  # seconds this script may take: a step that could not finish in what is left is skipped
TESTS=${TESTS:-"tests/engine/test_cuda.py tests/engine/test_cuda_graphs.py tests/engine/test_device.py"}  # K: pytest -k
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
left() { echo $((BUDGET - SECONDS)); }
for p in $PROFILES; do
  limit=${TEST_LIMIT:-170}
  [ "$(left)" -gt 60 ] || { echo "$p: tests skipped, $(left) s left"; continue; }
  [ "$(left)" -gt "$limit" ] || limit=$(left)
  start=$SECONDS
  { echo "=== tests under $p"; DRAGOMAN_GPU_PROFILE=$p timeout "$limit" python3 -m pytest -q -p no:cacheprovider -rs -s \
      ${K:+-k "$K"} $TESTS 2>&1; } > "$OUT/tests_$p.log"
  echo "$p: $(grep -E 'passed|failed|error' "$OUT/tests_$p.log" | tail -1) ($((SECONDS - start)) s)"
  grep -E "OVER|^FAILED|^ERROR" "$OUT/tests_$p.log" | head -20
done
for spec in ${BENCH:-}; do
  IFS=: read -r p gb mode <<< "$spec"
  chained=1; [ "$mode" = unchained ] && chained=0
  name=${spec//:/_}
  [ "$(left)" -gt 100 ] || { echo "bench $spec skipped, $(left) s left"; continue; }
  start=$SECONDS
  DRAGOMAN_GPU_PROFILE=$p DRAGOMAN_CHAINED=$chained timeout $(( $(left) - 10 )) python3 -m bench --size 600M \
    --gpu-memory "$gb" --out "$OUT" > "$OUT/bench_$name.log" 2>&1 && mv "$OUT/dragoman_600M.json" "$OUT/bench_${name}.json"
  echo "bench $spec ($((SECONDS - start)) s):"; grep -E '"(interactive|document|rows|cache|max_|kernel)' "$OUT/bench_$name.log"
  grep -E "OVER|Error" "$OUT/bench_$name.log" | head -5
done
# At most 8 files come back: the test logs as one, the bench logs as one, the figures as one JSON.
cd "$OUT" || exit
cat tests_*.log > tests.log 2>/dev/null && rm -f tests_*.log
cat bench_*.log > bench.log 2>/dev/null && rm -f bench_*.log
python3 - <<'PY'
import json, pathlib
parts = sorted(pathlib.Path(".").glob("bench_*.json"))
if parts:
    pathlib.Path("bench.json").write_text(json.dumps({p.stem: json.loads(p.read_text()) for p in parts}, indent=1))
    for p in parts:
        p.unlink()
PY
