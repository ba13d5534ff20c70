#!/usr/bin/env bash
# CI step (issue 16 §2): cross-episode memory on the REAL ScienceWorld simulator against REAL vLLM
# serving SmolLM2-135M on the CPU (cookbooks/serve_vllm.sh; setup is idempotent).
#
# Tiny sizes: one short task (find-non-living-thing), 2 variations, 6 steps per episode, all five
# memory backends played at once (one thread and one simulator each). Requires: the run exits 0
# (every arm's repository passes git fsck), the table and the learning curve exist, and every
# episode recorded in episodes.jsonl is on its own branch in git with one commit per step plus
# the summary, the outcome tag on the summary. The server is always stopped (trap). Scores are
# whatever a 135M model gets: the point is that the whole path is real.
#
#   bash cookbooks/ci_scienceworld_vllm.sh                  # from the repository root or anywhere
#   GOT_PYTHON=/path/to/python RUN_DIR=runs/x MAX_TOKENS=32 bash cookbooks/ci_scienceworld_vllm.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GOT_PYTHON="${GOT_PYTHON:-python}"          # the project's interpreter (CI: the activated .venv)
RUN_DIR="${RUN_DIR:-runs/ci-scienceworld-vllm}"
PORT="${PORT:-8765}"
MODEL="${SERVED_MODEL_NAME:-smollm2-135m}"
MAX_TOKENS="${MAX_TOKENS:-32}"              # a Thought line and an Action line
export PORT HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

t0=$(date +%s)
log() { printf '[ci_scienceworld_vllm] %s (+%ss)\n' "$*" "$(( $(date +%s) - t0 ))" >&2; }

command -v java >/dev/null 2>&1 || { echo "ScienceWorld needs a Java runtime: apt-get install -y openjdk-17-jre-headless" >&2; exit 1; }

bash cookbooks/serve_vllm.sh setup
trap 'bash cookbooks/serve_vllm.sh stop' EXIT
bash cookbooks/serve_vllm.sh start
bash cookbooks/serve_vllm.sh check

rm -rf "$RUN_DIR"
log "ScienceWorld episodes into $RUN_DIR"
"$GOT_PYTHON" cookbooks/scienceworld_episodes.py \
    --base-url "http://127.0.0.1:$PORT/v1" --model "$MODEL" \
    --tasks find-non-living-thing --variations 2 --max-steps 6 \
    --backends none,markdown,vector,graph,git --workers 5 \
    --max-tokens "$MAX_TOKENS" --out "$RUN_DIR"

log "checking the run against git"
test -s "$RUN_DIR/table.md" || { echo "no table at $RUN_DIR/table.md" >&2; exit 1; }
test -s "$RUN_DIR/learning_curve.png" || { echo "no plot at $RUN_DIR/learning_curve.png" >&2; exit 1; }
"$GOT_PYTHON" - "$RUN_DIR" <<'PY'
import json, subprocess, sys
from pathlib import Path

run = Path(sys.argv[1])
rows = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
assert len(rows) == 5 * 2, f"expected 10 episode records, found {len(rows)}"
def git(gitdir, *args):
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], check=True, capture_output=True, text=True).stdout.strip()
for r in rows:
    gitdir = run / "repos" / f"{r['arm']}.git"
    count = int(git(gitdir, "rev-list", "--count", r["branch"]))
    assert count == r["steps"] + 1, f"{r['arm']} {r['episode']}: {count} commits for {r['steps']} steps"
    assert git(gitdir, "rev-parse", f"{r['tag']}^{{commit}}") == git(gitdir, "rev-parse", r["branch"]) == r["commit"]
steps = sum(r["steps"] for r in rows)
parsed = sum(r["matches"]["exact"] + r["matches"]["mentioned"] for r in rows)
print(f"{len(rows)} episodes, {steps} steps as commits; {parsed} actions named by the model, "
      f"{sum(r['matches']['closest'] for r in rows)} matched to the closest valid one")
PY
cat "$RUN_DIR/table.md"
log "done"
