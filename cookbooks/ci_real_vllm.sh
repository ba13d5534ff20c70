#!/usr/bin/env bash
# CI step (issues 7, 15): every benchmark cookbook once, end to end, against REAL vLLM serving
# SmolLM2-135M on the CPU, at tiny sizes.
#
# Starts the server with cookbooks/serve_vllm.sh (setup is idempotent) and runs, against
# http://127.0.0.1:$PORT/v1 (model smollm2-135m):
#   1. five_substrates     5 MATH-style + 5 multiple-choice problems, backends git and vector (+ none)
#   2. copyability_sweep   2 Level 4-5 problems, tiers from the MATH-train sample, paraphrases by the model
#   3. test_time_arms      2 problems, all six arms, self-consistency with n=3
#   4. system_comparison   2 problems, the published per-arm budgets (vanilla 60 s, sc5 180 s, tot 600 s)
#   5. math500_ablations   2 problems, all eleven arms (the online arm included), pre-registered
# Each cookbook audits its own run (every node a commit, no answer in memory, fresh memory, gold
# letters, a seeded re-run identical, fsck, the pre-registration and online-memory checks) and
# exits non-zero when a check FAILs; then this script requires every arm's row in the table. The
# server is always stopped (trap). Accuracy is whatever a 135M model gets: the point is the real path.
#
# Budget: at most ~25 minutes on 2 cores; measured 11.5 minutes (690 s after setup) on a shared
# 2-core machine at load average ~15: server start 85 s, five substrates 136 s, sweep 91 s,
# test-time arms 113 s, system comparison 107 s, ablations 163 s (7.5 minutes at load ~10).
#
#   bash cookbooks/ci_real_vllm.sh                  # from the repository root or anywhere
#   GOT_PYTHON=/path/to/python RUN_ROOT=runs/x MAX_TOKENS=64 bash cookbooks/ci_real_vllm.sh
#   ONLY=five_substrates,math500_ablations bash cookbooks/ci_real_vllm.sh   # a subset
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GOT_PYTHON="${GOT_PYTHON:-python}"          # the project's interpreter (CI: the activated .venv)
RUN_ROOT="${RUN_ROOT:-${RUN_DIR:-runs/ci-real-vllm}}"
PORT="${PORT:-8765}"
MODEL="${SERVED_MODEL_NAME:-smollm2-135m}"
MAX_TOKENS="${MAX_TOKENS:-64}"              # small: ~17 tokens/s per request on 2 cores
WORKERS="${WORKERS:-2}"                     # 2 problems x 4 sibling nodes = vLLM's 8 sequences
ONLY="${ONLY:-five_substrates,copyability_sweep,test_time_arms,system_comparison,math500_ablations}"
export PORT HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

t0=$(date +%s)
log() { printf '[ci_real_vllm] %s (+%ss)\n' "$*" "$(( $(date +%s) - t0 ))" >&2; }

bash cookbooks/serve_vllm.sh setup
trap 'bash cookbooks/serve_vllm.sh stop' EXIT
bash cookbooks/serve_vllm.sh start
bash cookbooks/serve_vllm.sh check
mkdir -p "$RUN_ROOT"

# run NAME ARMS... -- COOKBOOK_ARGS...: the cookbook (it audits itself), then every arm's table row.
run() {
    local name="$1"; shift
    local arms=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do arms+=("$1"); shift; done
    shift
    [[ ",$ONLY," == *",$name,"* ]] || { log "skip $name"; return 0; }
    local out="$RUN_ROOT/$name" t1
    t1=$(date +%s)
    rm -rf "$out"
    log "$name into $out"
    "$GOT_PYTHON" "cookbooks/$name.py" \
        --base-url "http://127.0.0.1:$PORT/v1" --model "$MODEL" \
        --max-tokens "$MAX_TOKENS" --workers "$WORKERS" --no-progress --out "$out" "$@"
    test -s "$out/table.md" || { echo "no table at $out/table.md" >&2; exit 1; }
    for arm in "${arms[@]}"; do
        grep -qF "| $arm |" "$out/table.md" || { echo "$name: no row for arm $arm in $out/table.md" >&2; exit 1; }
    done
    log "$name done in $(( $(date +%s) - t1 )) s: $(git --git-dir="$out/central.git" rev-list --all | wc -l) commits, \
$(wc -l <"$out/results.jsonl") results"
}

run five_substrates none git vector -- \
    --n-math 5 --n-gpqa 5 --k-study 4 --m-test 6 --backends git,vector --budget-s 600

run copyability_sweep none identical paraphrase method_band same_subject unrelated -- \
    --levels 4,5 --m-test 2 --paraphrase model --workers 1

run test_time_arms greedy self_consistency argue revision verifier_bon tot -- \
    --n-math 5 --n-gpqa 5 --m-test 2 --arm-option self_consistency.n=3

run system_comparison vanilla sc5 tot -- \
    --n-math 5 --n-gpqa 5 --m-test 2 --budgets vanilla=60,sc5=180,tot=600

cat >"$RUN_ROOT/prereg.yaml" <<'EOF'
title: retrieved worked examples lift a 135M model on MATH (CI smoke test; n=2 cannot confirm it)
decision_rule: {arm: vector, baseline: none, require: ci_above_zero, benchmark: math}
validity:
  - {check: min_n, value: 2}
  - {check: baseline_below_ceiling, max_accuracy: 0.95}
EOF
run math500_ablations none sc5 static_fewshot markdown vector git vector_subject vector_answer_only \
    vector_full_solution vector_lesson git_online -- \
    --m-test 2 --prereg "$RUN_ROOT/prereg.yaml"

for name in ${ONLY//,/ }; do
    [[ -s "$RUN_ROOT/$name/table.md" ]] && cat "$RUN_ROOT/$name/table.md"
done
log "done"
