"""The viewer's HTTP rules without a browser: Host check, CSP, the write token, what is served."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from gitcli import git
from timeouts import TEST_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]


def request(served, method: str, path: str, body: dict | None = None, headers: dict | None = None):
    host, port = served.server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=TEST_TIMEOUT)
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    res = conn.getresponse()
    out = res.status, dict(res.getheaders()), res.read()
    conn.close()
    return out


RESOLVE = {"name": "alice", "into": "memory", "decisions": {"lessons/units.md": {"take": "theirs"}}}


def test_pages_carry_a_strict_csp_and_refuse_a_foreign_host(serve, built):
    s = serve(built["demo"])
    status, headers, body = request(s, "GET", "/")
    assert status == 200 and b"/static/app.js" in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    status, _, _ = request(s, "GET", "/api/tree", headers={"Host": "evil.example:80"})
    assert status == 421  # a DNS-rebinding page gets nothing


def test_writes_need_allow_write_and_the_launch_token(serve, built, tmp_path):
    repo = tmp_path / "merge.git"
    shutil.copytree(built["merge"], repo)
    pending = git(repo, "for-each-ref", "refs/got/merge-pending/")
    off = serve(repo)
    assert request(off, "POST", "/api/merges/resolve", RESOLVE, {"X-Got-Token": off.config.token})[0] == 403
    on = serve(repo, allow_write=True)
    assert request(on, "POST", "/api/merges/resolve", RESOLVE)[0] == 403
    assert request(on, "POST", "/api/merges/resolve", RESOLVE, {"X-Got-Token": "guess"})[0] == 403
    assert git(repo, "for-each-ref", "refs/got/merge-pending/") == pending  # nothing moved
    status, _, body = request(
        on, "POST", "/api/merges/resolve", {**RESOLVE, "decisions": {}}, {"X-Got-Token": on.config.token}
    )
    assert status == 400 and b"decide lessons/units.md" in body
    status, _, body = request(on, "POST", "/api/merges/resolve", RESOLVE, {"X-Got-Token": on.config.token})
    assert status == 200, body
    assert git(repo, "show", "memory:lessons/units.md") == "Keep the units of the question.\n"
    assert not git(repo, "for-each-ref", "refs/got/merge-pending/")
    _, _, page = request(on, "GET", "/")
    assert on.config.token.encode() in page
    _, _, page = request(off, "GET", "/")
    assert off.config.token.encode() not in page


def test_only_listed_plots_are_served(serve, built):
    run = built["run"]
    s = serve(run / "central.git", run_dir=run)
    assert request(s, "GET", "/api/run/plot?name=deltas.png")[2][:4] == b"\x89PNG"
    for name in ("../config.json", "config.json", "%2e%2e%2fetc%2fpasswd", "central.git/config"):
        assert request(s, "GET", f"/api/run/plot?name={name}")[0] == 404
    assert request(s, "GET", "/static/../server.py")[0] == 404
    status, _, body = request(s, "GET", "/api/node?rev=no-such-rev")
    assert status == 404 and b"no commit" in body


def test_got_ui_rejects_a_directory_that_is_not_a_run(tmp_path):
    cmd = [
        sys.executable,
        "-c",
        "from got_core.cli import main; raise SystemExit(main())",
        "ui",
        "--run",
        str(tmp_path),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=TEST_TIMEOUT)
    assert proc.returncode == 2 and "not a run directory" in proc.stdout + proc.stderr
