#!/usr/bin/env bash
# One device call: the app's paths on the GPU, each beside the engine alone in the same run, on
# bench.checkpoint's random 600M checkpoint: `dragoman translate` of one line from launch, first on
# the machine (kernels compiled) then warm (startup); whether the first launch's kernel build
# covers the documents' kernels (bench.kernel_coverage); a typed sentence while a document runs
# (bench.typed_latency, through the engine and through the app's pipeline); a .docx book through
# `dragoman translate`'s path (bench.docx_book); the
# local server under 64 clients with a typed sentence beside them (bench.server); a .txt book
# through the translation session against Generator.run (bench.documents); a PDF book through the
# same path, its layout timed apart, against the engine alone on its texts (bench.pdf_book);
# constrained decoding against plain, documents' plain and constrained sentences in steps apart and
# together (constraints; docx_together: the .docx book with them together). Logs and JSON under
# $OUT. Needs python-docx, the server's packages (starlette, uvicorn, python-multipart,
# platformdirs) and the PDF's (reportlab, pdfminer.six, pikepdf, fonttools, uharfbuzz, PySide6's
# QtCore with the glib it links) on PYTHONPATH, and for the PDF fonts of every script in
# ~/.local/share/fonts (the device has none), carried as wheels and two archives:
# docs/performance.md says how. TRITON_INTERPRET=0 is set here: on the device a plain pytest or
# python picked Triton's interpreter.
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/pycache}
OUT=${OUT:-/tmp/out}
CK=${CK:-/tmp/ck600}
DEVICE=${DEVICE:-cuda}  # cpu: a dry run of the script, with PAGES and SENTENCES small
PAGES=${PAGES:-300}  # of the .docx book
SENTENCES=${SENTENCES:-512}  # the server's, from each number of clients
BUDGET=${BUDGET:-560}  # seconds this script may take: a step that could not finish in what is left is skipped
STEPS=${STEPS:-"startup kernel_coverage typed docx docx_together server documents pdf constraints"}
mkdir -p "$OUT"
[ -f "$CK/config.json" ] || python3 -m bench.checkpoint --size 600M "$CK" > /dev/null
step() {  # name, seconds it may take, command...
  local name=$1 limit=$2; shift 2
  case " $STEPS " in *" $name "*) ;; *) return ;; esac
  [ $((BUDGET - SECONDS)) -gt 30 ] || { echo "== $name skipped: $((BUDGET - SECONDS)) s left"; return; }
  [ $((BUDGET - SECONDS)) -gt "$limit" ] || limit=$((BUDGET - SECONDS))
  local start=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "== $name ($((SECONDS - start)) s, rc $?)"
  tail -c 1500 "$OUT/$name.log"
  echo
}
startup() {  # first launch on the machine (its kernels compiled), then warm twice
  # An installed app's modules are compiled to bytecode at install; the device's packages are not
  # (read-only), and bytecode written there under PYTHONPYCACHEPREFIX was not used either (each
  # launch still compiled ~1,200 modules, 2.4-3.4 s): compiled once here, as pip would, and said.
  unset PYTHONDONTWRITEBYTECODE
  python3 -c "import sys, torch, triton, numpy, dragoman.app.cli, dragoman.engine.translator
print('bytecode: written', not sys.flags.dont_write_bytecode, 'under', sys.pycache_prefix)"
  # to the translation's line and to exit; the first launch on a fresh Triton cache
  python3 -m bench.cli_start --checkpoint "$CK" --device "$DEVICE" --launches 3 --out "$OUT"
  # Where a warm launch's seconds go, in the command's own order (its threads' timeline to the log).
  echo "The quick brown fox jumps over the lazy dog." | DRAGOMAN_HOME=$(mktemp -d) python3 -m bench.startup_trace \
    --out "$OUT" -- translate --from eng_Latn --to fra_Latn --model "$CK" --device "$DEVICE" --max-length 48 > /dev/null
}
export CK DEVICE PAGES
export -f startup
step startup 240 bash -c startup
# the first launch's kernel build against what a .docx book, a .txt and a glossary meet: compiled since, 0 wanted
step kernel_coverage 200 python3 -m bench.kernel_coverage --checkpoint "$CK" --device "$DEVICE" --out "$OUT"
typed() {  # through the engine, then through the app's pipeline beside a .docx book
  python3 -m bench.typed_latency --checkpoint "$CK" --device "$DEVICE" --out "$OUT"
  python3 -m bench.typed_latency --checkpoint "$CK" --device "$DEVICE" --through-app "$PAGES" --out "$OUT"
}
export -f typed
step typed 200 bash -c typed
# two runs of each path, the faster counting: a path's first run on a machine compiles the kernel variants it meets
step docx 240 python3 -m bench.docx_book --checkpoint "$CK" --device "$DEVICE" --pages "$PAGES" --repeats 2 --steps --out "$OUT"
step docx_together 240 python3 -m bench.docx_book --checkpoint "$CK" --device "$DEVICE" --pages "$PAGES" --repeats 2 --kinds-together
step server 150 python3 -m bench.server --checkpoint "$CK" --device "$DEVICE" --clients 64 --sentences "$SENTENCES"
step documents 150 python3 -m bench.documents --checkpoint "$CK" --device "$DEVICE" --beams 4 --out "$OUT"
step pdf 240 python3 -m bench.pdf_book --checkpoint "$CK" --device "$DEVICE" --pages "$PAGES" --repeats 2 --out "$OUT"
constraints() {  # documents' plain and constrained sentences in steps apart (the default), and together
  local together
  for together in "" --kinds-together; do
    echo "== bench.constraints $together"
    python3 -m bench.constraints --checkpoint "$CK" --device "$DEVICE" --doc-repeats 2 --repeats 5 $together
  done
}
export -f constraints
step constraints 240 bash -c constraints
