"""How fast `got ui` pages are on a large reasoning tree (issue 17 §1: under 300 ms at 10k nodes).

Builds a tree of ``--nodes`` node commits (branching 4, scores in files and trailers, outcome
tags on a few leaves) behind one result ref, starts the viewer on a free port and times, over
``--repeat`` runs each (median and max):

* the first tree page after launch (the one walk of the whole DAG; later pages slice it);
* the JSON of a tree page (first page and a deep page), a node page and a diff, over HTTP;
* with ``--browser``, the whole page in Debian's chromium: from the route change to the SVG
  being in the document (fetch, layout and drawing), read with ``performance.now()``.

    python benchmarks/ui.py --nodes 10000 --browser --out runs/ui
    python benchmarks/ui.py --nodes 500 --repeat 3            # smallest mode

Writes ``ui.json`` under ``--out`` (default: a new directory under the system temp dir).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from got_core.repo import ReasoningRepo
from got_core.ui.server import UIConfig, make_server

RESULT_REF = "refs/got/results/bench/p0"


def build(path: Path, n: int) -> dict[str, str]:
    """A branching-4 tree of ``n`` nodes; returns a few commits by role."""
    with ReasoningRepo.init(path) as repo:
        oids: list[str] = []
        for i in range(n):
            parent = [oids[(i - 1) // 4]] if i else []
            score = round((i * 7919 % 1000) / 1000, 3)
            msg = f"node n{i:06d}: thought {i}\n\nGot-Node: n{i:06d}\nGot-Problem: p0\nGot-Depth: {len(oids) and 1}\nGot-Score: {score:.6f}\n"
            files = {
                "thought.md": f"Thought {i}: try approach {i % 4} on the problem, then check the units.\n",
                "scores.json": json.dumps({"s_comb": score}),
                "metadata.json": json.dumps({"label": str(i % 4), "round": 1}),
            }
            oids.append(repo.prepare_commit(parent, files, msg, fresh_tree=not parent))
        leaves = oids[(n - 1) // 4 + 1 :] or oids[-1:]
        for i, leaf in enumerate(leaves[:20]):
            repo.tag_outcome(leaf, "success" if i % 2 else "failed", f"n{i}")
        result = repo.prepare_commit(leaves, {"result.json": "{}"}, "result bench/p0\n", fresh_tree=True)
        repo.set_ref(RESULT_REF, result)
        return {"root": oids[0], "leaf": leaves[0], "other": leaves[-1]}


def timed(fn, repeat: int) -> dict[str, float]:
    """Median and max milliseconds of ``fn`` over ``repeat`` runs (after one warm-up)."""
    fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(runs), 2), "max_ms": round(max(runs), 2)}


def browser_timings(url: str, routes: dict[str, str], repeat: int) -> dict[str, dict[str, float]]:
    """Route change → page drawn, in Debian's chromium (paths explicit; nothing downloaded)."""
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("GOT_CHROMIUM", "/usr/bin/chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    service = Service(executable_path=os.environ.get("GOT_CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_script_timeout(600)
    out = {}
    try:
        driver.get(url)
        script = """
            const [hash, done] = [arguments[0], arguments[arguments.length - 1]];
            const main = document.getElementById('main');
            location.hash = '#/diff';  // a page that reads nothing, so only the measured page costs
            setTimeout(() => {
              const t0 = performance.now();
              const obs = new MutationObserver(() => {
                if (main.dataset.page && main.querySelector('h1') && location.hash === hash) {
                  obs.disconnect(); requestAnimationFrame(() => done(performance.now() - t0));
                }
              });
              main.dataset.page = '';
              obs.observe(main, {childList: true, subtree: true, attributes: true});
              location.hash = hash;
            }, 50);
        """
        for name, route in routes.items():
            runs = [driver.execute_async_script(script, route) for _ in range(repeat + 1)][1:]
            out[name] = {"median_ms": round(statistics.median(runs), 2), "max_ms": round(max(runs), 2)}
    finally:
        driver.quit()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--browser", action="store_true", help="also time whole pages in chromium")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="got-ui-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="got-ui-bench-repo-"))
    t0 = time.perf_counter()
    roles = build(work / "big.git", args.nodes)
    build_s = time.perf_counter() - t0
    server = make_server(UIConfig(work / "big.git"), "127.0.0.1", 0)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{port}"

    def get(path: str):
        return lambda: urllib.request.urlopen(base + path, timeout=600).read()

    api = {
        "tree page 1 (300 nodes)": f"/api/tree?ref={RESULT_REF}",
        "tree page at offset n/2": f"/api/tree?ref={RESULT_REF}&offset={args.nodes // 2}",
        "node": f"/api/node?rev={roles['leaf']}",
        "diff": f"/api/diff?a={roles['leaf']}&b={roles['other']}",
    }
    t0 = time.perf_counter()
    get(api["tree page 1 (300 nodes)"])()
    cold_ms = round((time.perf_counter() - t0) * 1000, 1)  # the walk of the whole DAG, once per launch
    results = {
        "nodes": args.nodes,
        "build_s": round(build_s, 1),
        "first_tree_page_ms": cold_ms,
        "api": {},
        "browser": {},
    }
    for name, path in api.items():
        results["api"][name] = timed(get(path), args.repeat)
    if args.browser:
        routes = {
            "tree page": f"#/trees?repo=repo&ref={RESULT_REF}",
            "node page": f"#/node?repo=repo&rev={roles['leaf']}",
            "diff page": f"#/diff?repo=repo&a={roles['leaf']}&b={roles['other']}",
        }
        results["browser"] = browser_timings(base + "/", routes, args.repeat)
    server.shutdown()
    (out / "ui.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"{args.nodes} nodes (built in {build_s:.1f} s); target: a page under 300 ms")
    print(f"  first tree page after launch (walks the whole DAG once): {cold_ms:.1f} ms")
    for kind in ("api", "browser"):
        for name, t in results[kind].items():
            print(f"  {kind:8s} {name:28s} median {t['median_ms']:8.1f} ms   max {t['max_ms']:8.1f} ms")
    print(f"wrote {out / 'ui.json'}")


if __name__ == "__main__":
    main()
