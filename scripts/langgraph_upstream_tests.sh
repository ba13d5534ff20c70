#!/usr/bin/env bash
# LangGraph's own checkpointer tests against GitCheckpointSaver.
#
# Takes the test files of the installed `langgraph` release from its sdist on PyPI (fetched
# once with `pip download`, then kept in the cache below; nothing of LangGraph's is copied
# into this repository), runs every test file that takes the `sync_checkpointer` /
# `async_checkpointer` fixtures with our savers added beside LangGraph's reference savers
# (scripts/langgraph_upstream/upstream_conftest.py), and fails when a test passing with SqliteSaver
# fails with ours (scripts/langgraph_upstream/compare.py).
#
#   bash scripts/langgraph_upstream_tests.sh                  # git, git_aes, git_aio vs sqlite*
#   GOT_UPSTREAM_SAVERS=git,sqlite bash scripts/langgraph_upstream_tests.sh -k interrupt
#
# Environment: PYTHON (default python), GOT_UPSTREAM_CACHE (default ~/.cache/gitofthoughts/
# langgraph-upstream), GOT_UPSTREAM_SDIST (use this sdist file, no download; works offline),
# GOT_UPSTREAM_SAVERS (see the conftest). Extra arguments go to pytest.
# Needs the dev extra (pytest-mock, syrupy, pycryptodome, langgraph-checkpoint-sqlite).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python}
VERSION=$("$PY" -c "import importlib.metadata as m; print(m.version('langgraph'))")
CACHE=${GOT_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gitofthoughts/langgraph-upstream}
SDIST=${GOT_UPSTREAM_SDIST:-$CACHE/langgraph-$VERSION.tar.gz}
if [ ! -f "$SDIST" ]; then
  mkdir -p "$CACHE"
  "$PY" -m pip download --quiet --no-deps --no-binary :all: "langgraph==$VERSION" -d "$CACHE"
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
tar -xzf "$SDIST" -C "$WORK" "langgraph-$VERSION/tests" "langgraph-$VERSION/pyproject.toml"
RUN=$WORK/langgraph-$VERSION
[ -f "$RUN/tests/conftest.py" ] || { echo "langgraph $VERSION's sdist has no tests/conftest.py" >&2; exit 1; }

# Our conftest replaces LangGraph's (which needs Postgres and Redis clients): the same fixtures,
# checked by name, with our savers added. The Postgres/Redis helpers it imported go with it.
"$PY" scripts/langgraph_upstream/compare.py fixtures "$RUN/tests/conftest.py" scripts/langgraph_upstream/upstream_conftest.py
cp scripts/langgraph_upstream/upstream_conftest.py "$RUN/tests/conftest.py"
rm -f "$RUN/tests/conftest_checkpointer.py" "$RUN/tests/conftest_store.py"
mapfile -t FILES < <(cd "$RUN" && grep -l -E '\b(sync|async)_checkpointer\b' tests/test_*.py | grep -v postgres)
[ "${#FILES[@]}" -gt 0 ] || { echo "no test file takes the checkpointer fixtures" >&2; exit 1; }
echo "langgraph $VERSION: ${#FILES[@]} test files take the checkpointer fixtures"

status=0
(cd "$RUN" && NO_DOCKER=true PYTHONPATH="$ROOT:$RUN${PYTHONPATH:+:$PYTHONPATH}" \
  "$PY" -m pytest -p no:cacheprovider -o addopts="" --strict-markers -q --junitxml="$WORK/results.xml" \
  "${FILES[@]}" "$@") || status=$?
# pytest's own status counts the reference savers' failures too; the comparison decides
[ -f "$WORK/results.xml" ] || { echo "pytest wrote no results (status $status)" >&2; exit 1; }
"$PY" scripts/langgraph_upstream/compare.py results "$WORK/results.xml"
