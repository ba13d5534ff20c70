#!/usr/bin/env bash
# LlamaIndex's own memory, chat-store, agent-workflow and chat-engine tests against GitMemory /
# GitChatStore.
#
# Takes the tests of the installed `llama-index-core` release and runs them twice: once as
# they are (the reference) and once with our classes swapped in through their constructors
# (scripts/llamaindex_upstream/got_swap.py: Memory, SQLAlchemyChatStore and the agents' and chat
# engines' default memory build GitMemory / GitChatStore, each on a fresh repository). A test that
# passes in the reference run must pass with ours unless scripts/llamaindex_upstream/
# known_failures.txt lists it with the reason (scripts/llamaindex_upstream/compare.py).
# Nothing of LlamaIndex's is copied into this repository.
#
#   bash scripts/llamaindex_upstream_tests.sh
#   GOT_UPSTREAM_TESTS=~/src/llama_index/llama-index-core/tests bash scripts/llamaindex_upstream_tests.sh -k memory
#   GOT_UPSTREAM_GIT=/path/to/llama_index.git GOT_UPSTREAM_REV=v0.14.25 bash scripts/llamaindex_upstream_tests.sh
#
# Where the tests come from (the first that works):
#   1. GOT_UPSTREAM_TESTS: llama-index-core's `tests/` directory, or a llama_index checkout holding
#      it (e.g. `git clone --depth 1 --branch v<version> https://github.com/run-llama/llama_index`);
#   2. GOT_UPSTREAM_GIT: a local llama_index git directory (a clone or a bare mirror), read with
#      `git archive` at GOT_UPSTREAM_REV (default the release tag v<version>); nothing is checked out;
#   3. the release's sdist from PyPI (`pip download --no-binary :all:`), when it ships tests/
#      (0.14.x's sdists do not);
#   4. a shallow sparse clone of the release tag from GitHub (GOT_UPSTREAM_REPO, default
#      https://github.com/run-llama/llama_index), kept in the cache.
# Keep the tests outside this repository: nothing of LlamaIndex's is committed here.
# When none works the script says so and exits 3 (0 with GOT_UPSTREAM_OPTIONAL=1: CI machines
# that reach only PyPI).
#
# Environment: PYTHON (default python), GOT_UPSTREAM_CACHE (default ~/.cache/gitofthoughts/
# llamaindex-upstream), GOT_UPSTREAM_KEEP (a directory that receives both runs' pytest logs and
# junit files; by default they go with the temporary directory). Extra arguments go to both
# pytest runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python}
VERSION=$("$PY" -c "import importlib.metadata as m; print(m.version('llama-index-core'))")
CACHE=${GOT_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gitofthoughts/llamaindex-upstream}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RUN=$WORK/llama-index-core
mkdir -p "$RUN" "$CACHE"

unavailable() {
  echo "llama-index-core $VERSION: no copy of its tests found ($1)." >&2
  echo "Point GOT_UPSTREAM_TESTS at llama-index-core/tests of a llama_index checkout at tag v$VERSION," >&2
  echo "or GOT_UPSTREAM_GIT at a llama_index git directory that has that tag (GOT_UPSTREAM_REV=<commit> otherwise)." >&2
  if [ "${GOT_UPSTREAM_OPTIONAL:-0}" = 1 ]; then echo "SKIPPED: LlamaIndex upstream tests"; exit 0; fi
  exit 3
}

if [ -n "${GOT_UPSTREAM_TESTS:-}" ]; then
  [ -d "$GOT_UPSTREAM_TESTS" ] || unavailable "GOT_UPSTREAM_TESTS=$GOT_UPSTREAM_TESTS is not a directory"
  # a checkout's root or its llama-index-core/ work as well as llama-index-core/tests itself
  for SRC in "$GOT_UPSTREAM_TESTS/llama-index-core/tests" "$GOT_UPSTREAM_TESTS/tests" "$GOT_UPSTREAM_TESTS"; do
    [ ! -f "$SRC/conftest.py" ] || break
  done
  cp -r "$SRC" "$RUN/tests"
  echo "tests from $SRC"
elif [ -n "${GOT_UPSTREAM_GIT:-}" ]; then
  REV=${GOT_UPSTREAM_REV:-v$VERSION}
  COMMIT=$(git --git-dir="$GOT_UPSTREAM_GIT" rev-parse --verify -q "$REV^{commit}" 2>/dev/null) \
    || unavailable "GOT_UPSTREAM_GIT=$GOT_UPSTREAM_GIT has no commit $REV (GOT_UPSTREAM_REV)"
  mkdir -p "$WORK/archive"
  git --git-dir="$GOT_UPSTREAM_GIT" archive "$COMMIT" llama-index-core/tests 2>"$WORK/archive.err" \
    | tar -x -C "$WORK/archive" || unavailable "git archive $REV llama-index-core/tests failed: $(tail -1 "$WORK/archive.err")"
  [ -f "$WORK/archive/llama-index-core/tests/conftest.py" ] || unavailable "$REV has no llama-index-core/tests/conftest.py"
  mv "$WORK/archive/llama-index-core/tests" "$RUN/tests"
  echo "tests from $GOT_UPSTREAM_GIT at $REV ($COMMIT)"
else
  SDIST=$(ls "$CACHE"/llama_index_core-"$VERSION".tar.gz 2>/dev/null || true)
  if [ -z "$SDIST" ]; then
    "$PY" -m pip download --quiet --no-deps --no-binary :all: "llama-index-core==$VERSION" -d "$CACHE" >/dev/null 2>&1 || true
    SDIST=$(ls "$CACHE"/llama_index_core-"$VERSION".tar.gz 2>/dev/null || true)
  fi
  if [ -n "$SDIST" ] && tar -tzf "$SDIST" | grep -q "^llama_index_core-$VERSION/tests/conftest.py$"; then
    tar -xzf "$SDIST" -C "$WORK" "llama_index_core-$VERSION/tests"
    mv "$WORK/llama_index_core-$VERSION/tests" "$RUN/tests"
    echo "tests from $SDIST"
  else
    CLONE=$CACHE/llama_index-v$VERSION
    if [ ! -d "$CLONE/llama-index-core/tests" ]; then
      rm -rf "$CLONE"
      GIT_TERMINAL_PROMPT=0 git clone --quiet --depth 1 --filter=blob:none --sparse --branch "v$VERSION" \
        "${GOT_UPSTREAM_REPO:-https://github.com/run-llama/llama_index}" "$CLONE" 2>"$WORK/clone.err" \
        && git -C "$CLONE" sparse-checkout set llama-index-core/tests 2>>"$WORK/clone.err" \
        || { rm -rf "$CLONE"; unavailable "the sdist has no tests/ and the clone failed: $(tail -1 "$WORK/clone.err")"; }
    fi
    cp -r "$CLONE/llama-index-core/tests" "$RUN/tests"
    echo "tests from $CLONE at v$VERSION ($(git -C "$CLONE" rev-parse HEAD))"
  fi
fi

# The files that exercise memory, the async chat-store interface, the workflow agents and the
# chat engines (whose default memory is Memory).
mapfile -t FILES < <(cd "$RUN" && ls tests/memory/test_memory*.py tests/storage/chat_store/test_sql*.py \
  tests/agent/workflow/test_*.py tests/chat_engine/test_*.py 2>/dev/null)
[ "${#FILES[@]}" -gt 0 ] || { echo "no memory / chat-store / agent / chat-engine test files in the tests" >&2; exit 1; }
echo "llama-index-core $VERSION: ${#FILES[@]} test files"
cat >"$RUN/pytest.ini" <<'INI'
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
INI

# llama-index-core's root conftest.py imports what its whole suite needs (LLM clients and
# more); when it does not load here, the memory and agent tests run without it (they use none
# of its fixtures but mock_llm) and the script says so.
if [ -f "$RUN/tests/conftest.py" ] && ! (cd "$RUN" && PYTHONPATH="$ROOT:$ROOT/scripts/llamaindex_upstream" \
    "$PY" -m pytest -p no:cacheprovider -p got_swap -q -o addopts="" --collect-only "${FILES[@]}" \
    >"$WORK/collect.txt" 2>&1); then
  echo "note: llama-index-core's tests/conftest.py does not load here; running without it:" >&2
  grep -m1 -E "Error|error" "$WORK/collect.txt" >&2 || tail -3 "$WORK/collect.txt" >&2
  mv "$RUN/tests/conftest.py" "$RUN/tests/conftest.py.unused"
fi

for swap in 0 1; do
  (cd "$RUN" && GOT_SWAP=$swap PYTHONPATH="$ROOT:$ROOT/scripts/llamaindex_upstream${PYTHONPATH:+:$PYTHONPATH}" \
    "$PY" -m pytest -p no:cacheprovider -p got_swap -q -o addopts="" --junitxml="$WORK/results-$swap.xml" \
    "${FILES[@]}" "$@" >"$WORK/log-$swap.txt" 2>&1) || true
  if [ -n "${GOT_UPSTREAM_KEEP:-}" ]; then
    mkdir -p "$GOT_UPSTREAM_KEEP"
    cp "$WORK/log-$swap.txt" "$GOT_UPSTREAM_KEEP/"
    [ ! -f "$WORK/results-$swap.xml" ] || cp "$WORK/results-$swap.xml" "$GOT_UPSTREAM_KEEP/"
  fi
  [ -f "$WORK/results-$swap.xml" ] || { cat "$WORK/log-$swap.txt" >&2; echo "pytest wrote no results" >&2; exit 1; }
  grep "^got_swap: built" "$WORK/log-$swap.txt" || true
  tail -1 "$WORK/log-$swap.txt"
done
# pytest's own status counts the stock run's failures too; the comparison decides
"$PY" scripts/llamaindex_upstream/compare.py "$WORK/results-0.xml" "$WORK/results-1.xml" \
  scripts/llamaindex_upstream/known_failures.txt
