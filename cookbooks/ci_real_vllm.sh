#!/usr/bin/env bash
# CI step (issue 7): one cookbook end to end against REAL vLLM serving SmolLM2-135M on the CPU.
#
# Starts the server with cookbooks/serve_vllm.sh (setup is idempotent), runs the five-substrate
# experiment on 5 MATH-style + 5 multiple-choice sample problems with the `git` and `vector`
# backends (plus the `none` baseline) against http://127.0.0.1:$PORT/v1, model smollm2-135m,
# then requires: `got audit RUN_DIR` passes (every node a commit, no answer in memory, fresh
# memory, gold letters, a seeded re-run identical, fsck) and the table exists. The server is
# always stopped (trap). Accuracy is whatever a 135M model gets: the point is the real path.
#
#   bash cookbooks/ci_real_vllm.sh                  # from the repository root or anywhere
#   GOT_PYTHON=/path/to/python RUN_DIR=runs/x MAX_TOKENS=96 bash cookbooks/ci_real_vllm.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GOT_PYTHON="${GOT_PYTHON:-python}"          # the project's interpreter (CI: the activated .venv)
GOT_BIN="${GOT_BIN:-got}"                   # the project's CLI
RUN_DIR="${RUN_DIR:-runs/ci-real-vllm}"
PORT="${PORT:-8765}"
MODEL="${SERVED_MODEL_NAME:-smollm2-135m}"
MAX_TOKENS="${MAX_TOKENS:-96}"              # small: ~17 tokens/s per request on 2 cores
WORKERS="${WORKERS:-2}"                     # 2 problems x 4 sibling nodes = vLLM's 8 sequences
export PORT HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

t0=$(date +%s)
log() { printf '[ci_real_vllm] %s (+%ss)\n' "$*" "$(( $(date +%s) - t0 ))" >&2; }

bash cookbooks/serve_vllm.sh setup
trap 'bash cookbooks/serve_vllm.sh stop' EXIT
bash cookbooks/serve_vllm.sh start
bash cookbooks/serve_vllm.sh check

rm -rf "$RUN_DIR"
log "five-substrate run into $RUN_DIR"
"$GOT_PYTHON" cookbooks/five_substrates.py \
    --base-url "http://127.0.0.1:$PORT/v1" --model "$MODEL" \
    --n-math 5 --n-gpqa 5 --k-study 4 --m-test 6 --backends git,vector \
    --max-tokens "$MAX_TOKENS" --workers "$WORKERS" --budget-s 600 \
    --out "$RUN_DIR" --no-progress --no-audit

log "audit"
if "$GOT_BIN" --help 2>/dev/null | grep -qw audit; then
    "$GOT_BIN" audit "$RUN_DIR"
else
    "$GOT_PYTHON" -m got_core.cli.audit "$RUN_DIR"     # the same command, before it is registered
fi

test -s "$RUN_DIR/table.md" || { echo "no table at $RUN_DIR/table.md" >&2; exit 1; }
cat "$RUN_DIR/table.md"
log "central.git holds $(git --git-dir="$RUN_DIR/central.git" rev-list --all | wc -l) commits; \
$(wc -l <"$RUN_DIR/results.jsonl") results"
log "done"
