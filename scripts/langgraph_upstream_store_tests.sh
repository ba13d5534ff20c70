#!/usr/bin/env bash
# LangGraph's own store tests against GitStore.
#
# 1. `tests/test_store.py` of the installed `langgraph-checkpoint` release (its PyPI sdist:
#    LangGraph's store test suite, written against InMemoryStore) runs twice: as shipped, and
#    with InMemoryStore replaced by GitStore on a fresh repository (a subclass taking the same
#    arguments). Every test passing with InMemoryStore must pass with GitStore.
# 2. The tests of the installed `langgraph` release that take the `sync_store` / `async_store`
#    fixtures (graphs with an injected store) run with GitStore (plain and AES-encrypted)
#    beside InMemoryStore, under scripts/langgraph_upstream/upstream_conftest.py.
#
# The sdists are fetched once with `pip download` and cached (nothing of LangGraph's is copied
# into this repository). Environment: PYTHON (default python), GOT_UPSTREAM_CACHE (default
# ~/.cache/gitofthoughts/langgraph-upstream). Needs the dev extra (pytest-mock, pycryptodome).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python}
CACHE=${GOT_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gitofthoughts/langgraph-upstream}
mkdir -p "$CACHE"
version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
fetch() {  # fetch NAME VERSION FILE
  [ -f "$CACHE/$3" ] || "$PY" -m pip download --quiet --no-deps --no-binary :all: "$1==$2" -d "$CACHE"
  [ -f "$CACHE/$3" ] || { echo "no sdist $3 for $1 $2 in $CACHE" >&2; exit 1; }
}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# ---- 1. langgraph-checkpoint's store suite, as shipped and on GitStore
CKV=$(version langgraph-checkpoint)
fetch langgraph-checkpoint "$CKV" "langgraph_checkpoint-$CKV.tar.gz"
tar -xzf "$CACHE/langgraph_checkpoint-$CKV.tar.gz" -C "$WORK" "langgraph_checkpoint-$CKV/tests" \
  "langgraph_checkpoint-$CKV/pyproject.toml"
CK=$WORK/langgraph_checkpoint-$CKV
[ -f "$CK/tests/test_store.py" ] || { echo "langgraph-checkpoint $CKV ships no tests/test_store.py" >&2; exit 1; }
IMPORT='from langgraph.store.memory import InMemoryStore'
grep -qx "$IMPORT" "$CK/tests/test_store.py" || { echo "test_store.py no longer imports InMemoryStore as expected" >&2; exit 1; }
cat > "$CK/tests/got_shim.py" <<'EOF'
"""GitStore built the way the tests build InMemoryStore (a fresh repository each)."""
import tempfile
from pathlib import Path

from got_integrations.langgraph import GitStore


class InMemoryStore(GitStore):
    def __init__(self, **kwargs):
        super().__init__(Path(tempfile.mkdtemp(prefix="got-upstream-store-")) / "store.git", **kwargs)
EOF
sed "s/^$IMPORT\$/from tests.got_shim import InMemoryStore/" "$CK/tests/test_store.py" > "$CK/tests/test_store_git.py"
echo "langgraph-checkpoint $CKV: tests/test_store.py with InMemoryStore, then with GitStore"
for run in test_store test_store_git; do
  (cd "$CK" && PYTHONPATH="$ROOT:$CK${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m pytest -p no:cacheprovider -o addopts="" \
    -q --junitxml="$WORK/$run.xml" "tests/$run.py") || true
done
"$PY" - "$WORK/test_store.xml" "$WORK/test_store_git.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET

def outcomes(path):
    out = {}
    for case in ET.parse(path).iter("testcase"):
        failed = any(child.tag in ("failure", "error") for child in case)
        skipped = any(child.tag == "skipped" for child in case)
        out[case.get("name")] = "failed" if failed else "skipped" if skipped else "passed"
    return out

memory, git = outcomes(sys.argv[1]), outcomes(sys.argv[2])
lost = sorted(name for name, result in memory.items() if result == "passed" and git.get(name) != "passed")
print(f"InMemoryStore passed {sum(r == 'passed' for r in memory.values())}, GitStore passed "
      f"{sum(r == 'passed' for r in git.values())} of {len(git)}")
if lost or not memory:
    print("passing with InMemoryStore but not with GitStore:", *lost, sep="\n  ")
    sys.exit(1)
EOF

# ---- 2. langgraph's graph tests that take an injected store
LGV=$(version langgraph)
fetch langgraph "$LGV" "langgraph-$LGV.tar.gz"
tar -xzf "$CACHE/langgraph-$LGV.tar.gz" -C "$WORK" "langgraph-$LGV/tests" "langgraph-$LGV/pyproject.toml"
RUN=$WORK/langgraph-$LGV
cp scripts/langgraph_upstream/upstream_conftest.py "$RUN/tests/conftest.py"
cat >> "$RUN/tests/conftest.py" <<'EOF'


# Appended by scripts/langgraph_upstream_store_tests.sh: the store fixtures with GitStore beside
# InMemoryStore (these definitions replace the ones above).
@pytest.fixture(scope="function", params=["in_memory", "git", "git_aes"])
def sync_store(request: pytest.FixtureRequest) -> Iterator[BaseStore]:
    from got_integrations.langgraph import GitStore

    if request.param == "in_memory":
        yield InMemoryStore()
        return
    serde = EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY) if request.param == "git_aes" else None
    with GitStore(request.getfixturevalue("tmp_path") / "store.git", serde=serde) as store:
        yield store


@pytest.fixture(scope="function", params=["in_memory", "git"])
async def async_store(request: pytest.FixtureRequest) -> AsyncIterator[BaseStore]:
    from got_integrations.langgraph import GitStore

    if request.param == "in_memory":
        yield InMemoryStore()
        return
    with GitStore(request.getfixturevalue("tmp_path") / "store.git") as store:
        yield store
EOF
rm -f "$RUN/tests/conftest_checkpointer.py" "$RUN/tests/conftest_store.py"
mapfile -t FILES < <(cd "$RUN" && grep -l -E '\b(sync|async)_store\b' tests/test_*.py | grep -v postgres)
[ "${#FILES[@]}" -gt 0 ] || { echo "no langgraph test file takes the store fixtures" >&2; exit 1; }
mapfile -t TESTS < <(cd "$RUN" && grep -h -B3 -E '\b(sync|async)_store: BaseStore' "${FILES[@]}" \
  | grep -o -E 'def (test_[A-Za-z0-9_]+)' | cut -d' ' -f2 | sort -u)
[ "${#TESTS[@]}" -gt 0 ] || { echo "no langgraph test takes the store fixtures" >&2; exit 1; }
echo "langgraph $LGV: ${#TESTS[@]} tests take an injected store: ${TESTS[*]}"
EXPR=$(printf ' or %s' "${TESTS[@]}")
(cd "$RUN" && NO_DOCKER=true GOT_UPSTREAM_SAVERS=sqlite,git,sqlite_aio,git_aio \
  PYTHONPATH="$ROOT:$RUN${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m pytest -p no:cacheprovider -o addopts="" -q \
  "${FILES[@]}" -k "${EXPR# or }")
