"""`got ui` in a real browser: Debian's chromium clicks through every page of real repositories.

Screenshots land in each test's tmp_path (two of them are copied into docs/img/ for the README).
"""

from __future__ import annotations

import shutil

import pytest
from gitcli import fsck_clean, git
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from timeouts import TEST_TIMEOUT as TIMEOUT

from got_core.repo import ReasoningRepo
from got_core.types import Node

pytestmark = pytest.mark.slow


#: Live updates re-render a page; an element found just before may be gone: look again.
RERENDERED = (StaleElementReferenceException,)


def wait(driver, css: str, *, count: int = 1):
    """Elements matching ``css`` once at least ``count`` are on the page."""
    WebDriverWait(driver, TIMEOUT, ignored_exceptions=RERENDERED).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, css)) >= count
    )
    return driver.find_elements(By.CSS_SELECTOR, css)


def wait_text(driver, css: str, text: str):
    WebDriverWait(driver, TIMEOUT, ignored_exceptions=RERENDERED).until(
        lambda d: any(text in e.text for e in d.find_elements(By.CSS_SELECTOR, css))
    )


def page(driver, name: str) -> None:
    WebDriverWait(driver, TIMEOUT, ignored_exceptions=RERENDERED).until(
        lambda d: d.find_element(By.ID, "main").get_attribute("data-page") == name
    )


def test_tree_node_diff_clickthrough(browser, serve, built, tmp_path):
    s = serve(built["demo"])
    browser.get(s.url + "#/trees")
    nodes = wait(browser, "svg.graph g.node", count=5)
    assert len(nodes) == 5  # root and four children of `got demo`
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.node.success")) == 1
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.node.failed")) == 1
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.node.best")) == 1
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.node.pruned")) == 2
    assert "★ best" in browser.find_element(By.CSS_SELECTOR, "g.node.best").text
    browser.save_screenshot(str(tmp_path / "tree.png"))

    browser.find_element(By.CSS_SELECTOR, "g.node.best").click()
    page(browser, "node")
    wait_text(browser, ".md", "120 / 1.5 = 80 km/h")
    assert "s_comb" in browser.find_element(By.CSS_SELECTOR, "table.kv").text
    assert "calculator" in browser.find_element(By.CSS_SELECTOR, "ol.steps").text
    browser.save_screenshot(str(tmp_path / "node.png"))

    browser.find_element(By.CSS_SELECTOR, "[data-role=diff-parent]").click()
    page(browser, "diff")
    wait_text(browser, "section h2", "thought.md (modified)")
    right = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "table.sbs tr.replace td.r")]
    assert any("80 km/h" in t for t in right), right
    browser.find_element(By.ID, "mode-unified").click()
    wait(browser, "pre.unified span.add")
    browser.save_screenshot(str(tmp_path / "diff.png"))

    # compare mode: pick the two extreme children in the graph for a sibling-vs-sibling diff
    browser.get(s.url + "#/trees")
    wait(browser, "svg.graph g.node", count=5)
    browser.find_element(By.ID, "compare").click()
    browser.find_element(By.CSS_SELECTOR, "g.node.success").click()
    wait(browser, "g.node.picked")
    browser.find_element(By.CSS_SELECTOR, "g.node.failed").click()
    page(browser, "diff")
    wait_text(browser, "section h2", "thought.md")


def test_thread_fork_state_diff(browser, serve, built, tmp_path):
    s = serve(built["threads"])
    browser.get(s.url + "#/threads")
    wait(browser, "table.list a")
    browser.find_element(By.LINK_TEXT, "demo").click()
    page(browser, "thread")
    wait(browser, "svg.timeline g.node", count=10)
    lanes = browser.find_elements(By.CSS_SELECTOR, "[data-lane]")
    assert {lane.get_attribute("data-lane").split(" · ")[1].split(" ")[0] for lane in lanes} == {"head", "fork"}
    browser.save_screenshot(str(tmp_path / "thread.png"))

    next(lane for lane in lanes if "fork" in lane.get_attribute("data-lane")).click()
    page(browser, "checkpoint")
    wait(browser, ".chat .msg", count=2)
    roles = [e.text.lower() for e in browser.find_elements(By.CSS_SELECTOR, ".msg .role")]
    assert any(r.startswith("human") for r in roles) and any(r.startswith("ai") for r in roles)
    browser.save_screenshot(str(tmp_path / "checkpoint.png"))

    browser.find_element(By.CSS_SELECTOR, "[data-role=state-diff]").click()
    page(browser, "diff")
    wait(browser, "table.sbs")
    assert "checkpoint.json" in browser.find_element(By.ID, "main").text
    browser.save_screenshot(str(tmp_path / "state-diff.png"))


def test_session_and_memory_pages(browser, serve, built, tmp_path):
    s = serve(built["sessions"])
    browser.get(s.url + "#/sessions")
    wait(browser, "main li a")
    browser.find_element(By.LINK_TEXT, "alice").click()
    page(browser, "session")
    msgs = wait(browser, ".chat .msg", count=3)
    assert "boiling point" in msgs[0].text and "100 °C" in msgs[1].text and "Everest" in msgs[2].text
    commits = [m.find_element(By.CSS_SELECTOR, ".commit a").text for m in msgs]
    assert len(set(commits)) == 3  # each message with the commit of its own write
    browser.save_screenshot(str(tmp_path / "session.png"))

    d = serve(built["demo"])
    browser.get(d.url + "#/memory")
    page(browser, "memory")
    wait_text(browser, ".lesson", "divide total distance by total time")
    browser.find_element(By.CSS_SELECTOR, "details summary").click()
    wait_text(browser, "details li", "added")
    browser.save_screenshot(str(tmp_path / "memory.png"))


def test_resolve_a_conflict_in_the_browser(browser, serve, built, tmp_path):
    # A copy of the conflicted repository: this test writes.
    repo_dir = tmp_path / "merge.git"
    shutil.copytree(built["merge"], repo_dir)
    s = serve(repo_dir, allow_write=True)
    browser.get(s.url + "#/merges")
    wait(browser, ".conflict")
    text = browser.find_element(By.ID, "main").text
    assert "Always convert to SI units first." in text and "Keep the units of the question." in text
    browser.save_screenshot(str(tmp_path / "merges.png"))
    browser.find_element(By.CSS_SELECTOR, "input[data-take=edit]").click()
    area = browser.find_element(By.CSS_SELECTOR, "textarea[data-path='lessons/units.md']")
    area.clear()
    area.send_keys("Convert to SI units, then answer in the units asked for.\n")
    browser.find_element(By.CSS_SELECTOR, "button[data-merge=alice]").click()
    wait_text(browser, "p.ok", "merged")
    # the merge moved refs, so the next live poll re-renders the page: the outcome must stay on it
    browser.execute_async_script("render().then(arguments[arguments.length - 1])")
    assert browser.find_elements(By.ID, "no-merges")  # re-rendered: the resolved merge is gone from the list
    assert any("merged: alice" in e.text for e in browser.find_elements(By.CSS_SELECTOR, "p.ok"))
    content = git(repo_dir, "show", "memory:lessons/units.md")
    assert content == "Convert to SI units, then answer in the units asked for.\n"
    parents = git(repo_dir, "log", "-1", "--format=%P", "memory").split()
    assert len(parents) == 2  # a real merge commit naming both sides
    assert not git(repo_dir, "for-each-ref", "refs/got/merge-pending/")
    assert fsck_clean(repo_dir)[0]
    browser.refresh()
    wait(browser, "#no-merges")


def test_merge_page_is_read_only_without_allow_write(browser, serve, built):
    s = serve(built["merge"])
    browser.get(s.url + "#/merges")
    wait(browser, ".conflict")
    assert not browser.find_element(By.CSS_SELECTOR, "button[data-merge=alice]").is_enabled()
    assert "--allow-write" in browser.find_element(By.CSS_SELECTOR, "p.note").text


def test_run_page_table_plot_drill_down_and_audit(browser, serve, built, tmp_path):
    run = built["run"]
    s = serve(run / "central.git", run_dir=run)
    browser.get(s.url + "#/run")
    page(browser, "run")
    wait(browser, ".md table")
    assert "accuracy" in browser.find_element(By.CSS_SELECTOR, ".md table").text
    img = wait(browser, "img.plot")[0]
    WebDriverWait(browser, TIMEOUT, ignored_exceptions=RERENDERED).until(
        lambda d: d.execute_script("return arguments[0].naturalWidth", img) > 0
    )
    browser.find_element(By.ID, "run-audit").click()
    wait_text(browser, "#audit p", "audit passed")
    assert "PASS" in browser.find_element(By.ID, "audit").text
    browser.save_screenshot(str(tmp_path / "run.png"))
    link = browser.find_element(By.CSS_SELECTOR, "[data-drill^='git/']")
    link.click()
    page(browser, "trees")
    nodes = wait(browser, "svg.graph g.node", count=5)  # the result commit, the root and four children
    assert len(nodes) >= 5
    browser.find_element(By.CSS_SELECTOR, "g.node.winner").click()
    page(browser, "node")
    wait(browser, ".md")


def test_new_commits_appear_without_a_reload(browser, serve, tmp_path):
    repo_dir = tmp_path / "live.git"
    with ReasoningRepo.init(repo_dir) as repo:
        root = repo.commit_node(Node("root thought", scores={"s_comb": 0.5}, problem_id="p"))
        s = serve(repo_dir)
        browser.get(s.url + "#/trees")
        wait(browser, "svg.graph g.node", count=1)
        browser.execute_script("window.__sameDocument = 42")
        repo.commit_node(Node("a new thought", scores={"s_comb": 0.9}, problem_id="p"), parents=[root.committed_oid()])
        wait(browser, "svg.graph g.node", count=2)
        assert browser.execute_script("return window.__sameDocument") == 42  # no reload happened


HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1;alert(1)">'


def test_hostile_content_never_executes(browser, serve, tmp_path):
    repo_dir = tmp_path / "hostile.git"
    with ReasoningRepo.init(repo_dir) as repo:
        root = repo.commit_node(
            Node(
                f"{HOSTILE}\n\n[click me](javascript:window.__pwned=1) ![x](javascript:alert(1))\n\n"
                '<a href="javascript:alert(1)">raw link</a> <svg onload="window.__pwned=1"></svg>',
                scores={"s_comb": 0.4},
                metadata={"label": HOSTILE, "note": "javascript:alert(1)"},
                trace=[{"action": HOSTILE, "input": '"><img src=x onerror=alert(1)>'}],
                problem_id="<script>window.__pwned=1</script>",
            )
        )
        child = repo.commit_files(
            "master",
            {'<img src=x onerror="window.__pwned=1">.md': HOSTILE, "thought.md": "javascript:alert(1)"},
            f"{HOSTILE}\n",
        )
        repo.tag_outcome(child, "failed", "x")
        repo.commit_files("memory", {'lessons/"><svg onload=alert(1)>.md': HOSTILE + "\n"}, f"lesson {HOSTILE}\n")
        repo.set_ref("refs/got/sessions/%3Cscript%3E", repo.tip("memory") or "", expected=None)
    s = serve(repo_dir)
    visits = [
        "#/trees",
        f"#/node?rev={root.committed_oid()}",
        f"#/node?rev={child}",
        f"#/diff?a={root.committed_oid()}&b={child}",
        f"#/diff?a={root.committed_oid()}&b={child}&mode=unified",
        "#/memory",
        "#/sessions",
    ]
    for hash_ in visits:
        browser.get(s.url + hash_)
        page(browser, hash_[2:].split("?")[0])
        assert browser.execute_script("return window.__pwned") is None, hash_
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018
        links = browser.execute_script("return [...document.querySelectorAll('a')].map((a) => a.href)")
        assert not [h for h in links if h.lower().startswith("javascript:")], hash_
        assert not browser.find_elements(By.CSS_SELECTOR, "main script, main img[onerror], main svg[onload]"), hash_
    # The hostile text is shown, as text.
    browser.get(s.url + f"#/node?rev={root.committed_oid()}")
    wait_text(browser, ".md", "<script>window.__pwned=1</script>")
    browser.get(s.url + "#/diff?a=" + root.committed_oid() + "&b=" + child)
    wait_text(browser, "section h2", '<img src=x onerror="window.__pwned=1">.md (added)')
    assert browser.execute_script("return window.__pwned") is None
