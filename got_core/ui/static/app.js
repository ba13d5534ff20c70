// got ui: a small single-page viewer. Repository content only ever reaches the page as text
// (textContent / attribute values we build); the one exception is thought.md and the run table,
// rendered on the server by markdown-it with raw HTML off and unsafe link schemes refused.
"use strict";

const TOKEN = document.querySelector('meta[name="got-token"]').content;
const SVG = "http://www.w3.org/2000/svg";
const state = { info: null, version: null, compare: [], audit: null, resolved: null };

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "onclick" || k === "onchange" || k === "oninput") el.addEventListener(k.slice(2), v);
    else if (k === "href") el.setAttribute("href", safeHref(v));
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// Only our own routes and API paths become links: nothing from a repository picks a scheme.
function safeHref(v) {
  const s = String(v);
  return s.startsWith("#/") || s.startsWith("/api/") ? s : "#/";
}

function s(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}

function route(page, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const qs = q.toString();
  return "#/" + page + (qs ? "?" + qs : "");
}

function short(oid) { return (oid || "").slice(0, 10); }
function when(t) { return t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) : ""; }
function fmt(x) { return typeof x === "number" ? (Number.isInteger(x) ? String(x) : x.toFixed(3)) : ""; }

async function api(path, params) {
  const q = new URLSearchParams(params || {}).toString();
  const res = await fetch("/api/" + path + (q ? "?" + q : ""));
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

async function post(path, body) {
  const res = await fetch("/api/" + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Got-Token": TOKEN },
    body: JSON.stringify(body),
  });
  const out = await res.json();
  if (!res.ok) throw new Error(out.error || res.statusText);
  return out;
}

function markdown(html) {
  const div = h("div", { class: "md" });
  div.innerHTML = html; // server-rendered by markdown-it, raw HTML escaped (see the header)
  return div;
}

function pre(text, cls) { return h("pre", { class: cls || "" }, text); }
function json(v) { return pre(JSON.stringify(v, null, 2), "json"); }
function section(title, ...body) { return h("section", { class: "card" }, h("h2", {}, title), ...body); }
function kv(obj) {
  const rows = Object.entries(obj || {}).map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, typeof v === "object" ? JSON.stringify(v) : String(v))));
  return rows.length ? h("table", { class: "kv" }, h("tbody", {}, rows)) : h("p", { class: "muted" }, "none");
}

// ------------------------------------------------------------------------------------ trees
function layout(nodes) {
  const by = new Map(nodes.map((n) => [n.oid, n]));
  const depth = new Map();
  const d = (n, seen) => {
    if (depth.has(n.oid)) return depth.get(n.oid);
    if (seen.has(n.oid)) return 0;
    seen.add(n.oid);
    const ps = n.parents.filter((p) => by.has(p));
    const v = ps.length ? 1 + Math.max(...ps.map((p) => d(by.get(p), seen))) : 0;
    depth.set(n.oid, v);
    return v;
  };
  const ordered = [...nodes].sort((a, b) => a.time - b.time);
  ordered.forEach((n) => d(n, new Set()));
  const layers = [];
  const pos = new Map();
  for (const n of ordered) {
    const k = depth.get(n.oid);
    (layers[k] = layers[k] || []).push(n);
  }
  layers.forEach((layer, k) => {
    layer.sort((a, b) => parentX(a) - parentX(b));
    layer.forEach((n, i) => pos.set(n.oid, { x: 60 + i * 90, y: 50 + k * 110 }));
  });
  function parentX(n) {
    const p = n.parents.find((q) => pos.has(q));
    return p ? pos.get(p).x : 0;
  }
  return pos;
}

function colour(n) {
  if (n.outcome === "success") return "success";
  if (n.outcome === "failed") return "failed";
  return n.status;
}

function treeGraph(nodes, repo) {
  const pos = layout(nodes);
  const xs = [...pos.values()].map((p) => p.x), ys = [...pos.values()].map((p) => p.y);
  const svg = s("svg", { class: "graph", width: Math.max(...xs, 200) + 80, height: Math.max(...ys, 50) + 70 });
  const by = new Map(nodes.map((n) => [n.oid, n]));
  for (const n of nodes) for (const p of n.parents) if (pos.has(p)) {
    const a = pos.get(p), b = pos.get(n.oid);
    svg.append(s("path", { d: `M${a.x},${a.y} C${a.x},${(a.y + b.y) / 2} ${b.x},${(a.y + b.y) / 2} ${b.x},${b.y}`, class: "edge" + (n.round > 1 ? " reexp" : "") + (n.status === "pruned" ? " pruned" : "") + (n.status === "winner" && by.get(p).status === "winner" ? " win" : "") }));
  }
  for (const n of nodes) {
    const p = pos.get(n.oid);
    const g = s("g", { class: "node " + colour(n) + (n.tags.includes("best") ? " best" : "") + (state.compare.includes(n.oid) ? " picked" : ""), transform: `translate(${p.x},${p.y})`, "data-oid": n.oid, tabindex: 0 });
    const r = 12 + 10 * Math.max(0, Math.min(1, n.score || 0));
    g.append(s("circle", { r }));
    const title = s("title");
    title.textContent = n.summary;
    g.append(title);
    const t = s("text", { y: r + 14, class: "score" });
    t.textContent = n.score === null || n.score === undefined ? "" : n.score.toFixed(2);
    g.append(t);
    const tagText = [n.tags.includes("best") ? "★ best" : "", n.round > 1 ? "re-expansion" : "", n.label].filter(Boolean).join(" · ");
    if (tagText) {
      const l = s("text", { y: -r - 6, class: "tag" });
      l.textContent = tagText;
      g.append(l);
    }
    g.addEventListener("click", () => pickOrOpen(n.oid, repo));
    svg.append(g);
  }
  return svg;
}

function pickOrOpen(oid, repo) {
  if (!document.getElementById("compare")?.checked) {
    location.hash = route("node", { repo, rev: oid });
    return;
  }
  state.compare = state.compare.includes(oid) ? state.compare.filter((x) => x !== oid) : [...state.compare, oid];
  if (state.compare.length === 2) {
    const [a, b] = state.compare;
    state.compare = [];
    location.hash = route("diff", { repo, a, b });
  } else render();
}

const legend = () => h("div", { class: "legend" },
  ["success", "failed", "winner", "open", "pruned"].map((k) => h("span", { class: "chip " + k }, k)),
  h("span", { class: "chip reexp" }, "re-expansion (dashed)"), h("span", { class: "chip best" }, "★ best"));

async function pageTrees(p) {
  const repo = p.repo || "repo";
  const offset = Number(p.offset || 0);
  const data = await api("tree", { repo, ref: p.ref || "", offset, win: p.win || "" });
  const pager = h("div", { class: "pager" },
    offset > 0 ? h("a", { href: route("trees", { ...p, offset: Math.max(0, offset - data.limit) }), class: "button" }, "← newer") : null,
    h("span", { class: "muted" }, `nodes ${offset + 1}–${offset + data.nodes.length}`),
    data.more ? h("a", { href: route("trees", { ...p, offset: offset + data.limit }), class: "button", id: "older" }, "older →") : null);
  const rows = data.nodes.map((n) => h("tr", { class: colour(n) },
    h("td", {}, h("a", { href: route("node", { repo, rev: n.oid }), class: "mono" }, short(n.oid))),
    h("td", {}, n.summary), h("td", { class: "num" }, fmt(n.score)), h("td", {}, h("span", { class: "chip " + colour(n) }, colour(n))),
    h("td", {}, n.tags.join(", ")), h("td", {}, n.refs.join(", "))));
  return [
    h("h1", {}, p.ref ? "Tree " + p.ref : "Reasoning trees"),
    h("div", { class: "toolbar" }, legend(),
      h("label", {}, h("input", { type: "checkbox", id: "compare", checked: state.compare.length > 0 }), " pick two nodes to diff")),
    section("Graph", h("div", { class: "scroll" }, data.nodes.length ? treeGraph(data.nodes, repo) : h("p", { class: "muted" }, "no commits")), pager),
    section("Nodes", h("table", { class: "list" }, h("thead", {}, h("tr", {}, ["commit", "summary", "score", "outcome", "tags", "refs"].map((x) => h("th", {}, x)))), h("tbody", {}, rows))),
  ];
}

async function pageNode(p) {
  const repo = p.repo || "repo";
  const n = await api("node", { repo, rev: p.rev });
  const steps = n.trace.map((st, i) => h("li", { class: "step" },
    h("b", {}, st.action || st.tool || st.type || `step ${st.step ?? i + 1}`), " ",
    st.input !== undefined ? h("code", {}, typeof st.input === "string" ? st.input : JSON.stringify(st.input)) : null,
    st.observation !== undefined || st.output !== undefined ? pre(String(st.observation ?? st.output)) : null,
    h("details", {}, h("summary", {}, "raw"), json(st))));
  return [
    h("h1", {}, n.message.split("\n")[0]),
    h("p", { class: "meta" }, h("span", { class: "mono" }, n.oid), " · ", n.author, " · ", when(n.time), " ",
      n.tags.map((t) => h("span", { class: "chip " + (t.startsWith("success_") ? "success" : t.startsWith("failed_") ? "failed" : "open") }, t))),
    h("p", {}, n.parents.map((par) => h("span", {}, "parent ", h("a", { href: route("node", { repo, rev: par }), class: "mono" }, short(par)), " ",
      h("a", { href: route("diff", { repo, a: par, b: n.oid }), class: "button", "data-role": "diff-parent" }, "diff with parent"), " "))),
    section("thought.md", markdown(n.thought_html)),
    h("div", { class: "cols" }, section("scores.json", kv(n.scores)), section("Trailers", kv(n.trailers))),
    section("Trace: ReAct steps and tool calls", steps.length ? h("ol", { class: "steps" }, steps) : h("p", { class: "muted" }, "no steps")),
    section("metadata.json", json(n.metadata)),
    section("Notes history (scores and re-scores)", n.notes.length ? h("ul", {}, n.notes.map((x) => h("li", {}, h("span", { class: "muted" }, when(x.time) + " "), pre(x.note)))) : h("p", { class: "muted" }, "no notes")),
    section("Files", h("ul", {}, n.files.map((f) => h("li", { class: "mono" }, f)))),
  ];
}

// ------------------------------------------------------------------------------------ diff
async function pageDiff(p) {
  const repo = p.repo || "repo";
  const a = h("input", { id: "diff-a", value: p.a || "", placeholder: "revision A (sha, tag, branch)" });
  const b = h("input", { id: "diff-b", value: p.b || "", placeholder: "revision B" });
  const mode = p.mode === "unified" ? "unified" : "side";
  const form = h("div", { class: "toolbar" }, a, b,
    h("button", { onclick: () => { location.hash = route("diff", { repo, a: a.value, b: b.value, mode }); } }, "Compare"),
    h("a", { class: "button" + (mode === "side" ? " on" : ""), href: route("diff", { ...p, mode: "side" }) }, "side by side"),
    h("a", { class: "button" + (mode === "unified" ? " on" : ""), href: route("diff", { ...p, mode: "unified" }), id: "mode-unified" }, "unified"));
  if (!p.a || !p.b) return [h("h1", {}, "Diff"), form];
  const d = await api("diff", { repo, a: p.a, b: p.b });
  const files = d.files.map((f) => section(`${f.path} (${f.status})`, mode === "unified"
    ? h("pre", { class: "unified" }, f.unified.map((l) => h("span", { class: l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : l.startsWith("@@") ? "hunk" : "" }, l + "\n")))
    : h("table", { class: "sbs" }, h("tbody", {}, f.side.map(([k, ln, lt, rn, rt]) => h("tr", { class: k },
      h("td", { class: "ln" }, ln ?? ""), h("td", { class: "l" }, lt), h("td", { class: "ln" }, rn ?? ""), h("td", { class: "r" }, rt)))))));
  return [h("h1", {}, `Diff ${short(d.a)} → ${short(d.b)}`), form, files.length ? files : h("p", { class: "muted" }, "no differences")];
}

// ------------------------------------------------------------------------------------ threads
async function pageThreads(p) {
  const d = await api("threads", { repo: p.repo || "repo" });
  if (!d.threads.length) return [h("h1", {}, "LangGraph threads"), h("p", { class: "muted" }, "no threads in this repository (got threads demo writes one)")];
  return [h("h1", {}, "LangGraph threads"), h("table", { class: "list" }, h("thead", {}, h("tr", {}, ["thread", "lines", "latest"].map((x) => h("th", {}, x)))),
    h("tbody", {}, d.threads.map((t) => h("tr", {}, h("td", {}, h("a", { href: route("thread", { id: t.thread }) }, t.thread)), h("td", { class: "num" }, t.lines), h("td", {}, t.summary)))))];
}

async function pageThread(p) {
  const repo = p.repo || "repo";
  const d = await api("thread", { repo, id: p.id });
  const cps = d.checkpoints;
  const order = Object.values(cps).sort((a, b) => a.time - b.time || (a.checkpoint < b.checkpoint ? -1 : 1));
  const col = new Map(order.map((c, i) => [c.oid, i]));
  const lane = new Map();
  d.lanes.forEach((l, i) => l.commits.forEach((oid) => { if (!lane.has(oid)) lane.set(oid, i); }));
  const X = (oid) => 40 + col.get(oid) * 56, Y = (oid) => 40 + lane.get(oid) * 60;
  const svg = s("svg", { class: "graph timeline", width: 80 + order.length * 56 + 200, height: 40 + d.lanes.length * 60 });
  for (const c of order) for (const par of c.parents) if (col.has(par))
    svg.append(s("path", { d: `M${X(par)},${Y(par)} L${X(c.oid)},${Y(c.oid)}`, class: "edge" }));
  d.lanes.forEach((l, i) => { const t = s("text", { x: X(l.tip) + 16, y: 44 + i * 60, class: "lane" }); t.textContent = l.label; svg.append(t); });
  for (const c of order) {
    const g = s("g", { class: "node cp" + (state.compare.includes(c.oid) ? " picked" : ""), transform: `translate(${X(c.oid)},${Y(c.oid)})`, "data-oid": c.oid });
    g.append(s("circle", { r: 9 }));
    const t = s("title"); t.textContent = c.summary; g.append(t);
    g.addEventListener("click", () => {
      if (!document.getElementById("compare")?.checked) { location.hash = route("checkpoint", { repo, thread: d.thread, rev: c.oid }); return; }
      state.compare = state.compare.includes(c.oid) ? [] : [...state.compare, c.oid];
      if (state.compare.length === 2) { const [a, b] = state.compare; state.compare = []; location.hash = route("diff", { repo, a, b }); } else render();
    });
    svg.append(g);
  }
  return [h("h1", {}, "Thread " + d.thread),
    h("div", { class: "toolbar" }, h("label", {}, h("input", { type: "checkbox", id: "compare", checked: state.compare.length > 0 }), " pick two checkpoints for a state diff")),
    section("Timeline (forks are lanes)", h("div", { class: "scroll" }, svg)),
    section("Lines", h("ul", {}, d.lanes.map((l) => h("li", {}, h("a", { href: route("checkpoint", { repo, thread: d.thread, rev: l.tip }), "data-lane": l.label }, l.label), ` — ${l.commits.length} checkpoints, tip ${cps[l.tip].summary}`)))),
    section("Checkpoints", h("table", { class: "list" }, h("tbody", {}, [...order].reverse().map((c) => h("tr", {},
      h("td", {}, h("a", { href: route("checkpoint", { repo, thread: d.thread, rev: c.oid }), class: "mono" }, short(c.oid))), h("td", {}, c.summary), h("td", { class: "mono muted" }, c.checkpoint))))))];
}

function conversation(messages) {
  return h("div", { class: "chat" }, messages.map((m) => h("div", { class: "msg " + m.role },
    h("div", { class: "role" }, m.role + (m.name ? " · " + m.name : "")), h("div", { class: "text" }, m.content),
    m.tool_calls?.length ? h("div", { class: "calls" }, m.tool_calls.map((c) => h("code", {}, `${c.name}(${c.args})`))) : null,
    m.commit ? h("div", { class: "commit" }, "written by ", h("a", { href: route("node", { rev: m.commit }), class: "mono" }, short(m.commit)), " ", m.summary) : null)));
}

async function pageCheckpoint(p) {
  const repo = p.repo || "repo";
  const c = await api("checkpoint", { repo, thread: p.thread, rev: p.rev });
  const t = await api("thread", { repo, id: p.thread });
  const others = t.lanes.filter((l) => l.tip !== c.oid);
  return [h("h1", {}, `Checkpoint ${c.checkpoint || short(c.oid)}`),
    h("p", { class: "meta" }, "thread ", h("a", { href: route("thread", { repo, id: c.thread }) }, c.thread), " · commit ", h("span", { class: "mono" }, c.oid)),
    h("div", { class: "toolbar" }, c.parents.map((par) => h("a", { class: "button", href: route("diff", { repo, a: par, b: c.oid }), "data-role": "state-diff" }, "state diff with previous checkpoint")),
      others.map((l) => h("a", { class: "button", href: route("diff", { repo, a: l.tip, b: c.oid }) }, "state diff with " + l.label))),
    section("State: messages", c.messages.length ? conversation(c.messages) : h("p", { class: "muted" }, "no messages")),
    h("div", { class: "cols" }, section("Metadata", kv(c.metadata)), section("Other channels", kv(c.values))),
    section("Pending writes", c.writes.length ? h("table", { class: "list" }, h("tbody", {}, c.writes.map((w) => h("tr", {}, h("td", {}, w.task), h("td", {}, w.channel), h("td", {}, pre(w.value)))))) : h("p", { class: "muted" }, "none")),
    section("Interrupts", c.interrupts.length ? c.interrupts.map((w) => pre(w.value)) : h("p", { class: "muted" }, "none"))];
}

async function pageSessions(p) {
  const d = await api("sessions", { repo: p.repo || "repo" });
  return [h("h1", {}, "LlamaIndex sessions"), d.sessions.length ? h("ul", {}, d.sessions.map((x) => h("li", {}, h("a", { href: route("session", { id: x.session }) }, x.session), " — ", x.summary))) : h("p", { class: "muted" }, "no sessions in this repository")];
}

async function pageSession(p) {
  const d = await api("session", { repo: p.repo || "repo", id: p.id });
  return [h("h1", {}, "Session " + d.session), section("Conversation", conversation(d.messages))];
}

// ------------------------------------------------------------------------------------ memory & merges
async function pageMemory(p) {
  const d = await api("memory", { repo: p.repo || "repo", branch: p.branch || "memory" });
  if (!d.topics.length) return [h("h1", {}, "Memory"), h("p", { class: "muted" }, `no lessons on ${d.branch}`)];
  return [h("h1", {}, `Memory (${d.branch})`), d.topics.map((t) => section(t.topic,
    t.lessons.map((l) => h("div", { class: "lesson" }, h("div", { class: "text" }, l.text), l.outcome || l.score !== null ? h("div", { class: "muted" }, [l.outcome, fmt(l.score)].filter(Boolean).join(" · ")) : null)),
    h("details", {}, h("summary", {}, `history (${t.history.length})`), h("ul", {}, t.history.map((x) => h("li", {}, h("span", { class: "muted" }, when(x.time) + " "), x.status + " ",
      h("a", { href: route("node", { rev: x.commit }), class: "mono" }, short(x.commit)), " ", x.summary))))))];
}

async function pageMerges(p) {
  const repo = p.repo || "repo";
  const d = await api("merges", { repo });
  const writable = state.info.allow_write;
  const out = [h("h1", {}, "Merges awaiting review"), writable ? null : h("p", { class: "note" }, "Read-only: start with `got ui --allow-write` to resolve.")];
  // the last resolve's outcome, kept across live re-renders: the merge itself changes the refs, so the
  // next poll re-renders this page (the merge gone from it) and would wipe a message kept in the old page
  if (state.resolved && state.resolved.repo === repo) out.push(h("p", { class: state.resolved.className, id: "resolved" }, state.resolved.text));
  if (!d.merges.length) out.push(h("p", { class: "muted", id: "no-merges" }, "nothing is waiting for review"));
  for (const m of d.merges) {
    const picks = {};
    const blocks = m.conflicts.map((c, i) => {
      const edit = h("textarea", { rows: 6, "data-path": c.path }, c.theirs ?? c.ours ?? "");
      const radios = ["ours", "theirs", "edit"].map((v) => h("input", { type: "radio", name: `take-${m.name}-${i}`, value: v, disabled: !writable, "data-take": v }));
      picks[c.path] = () => ({ take: radios.find((r) => r.checked)?.value || "", text: edit.value });
      return h("div", { class: "conflict" }, h("h3", { class: "mono" }, c.path),
        h("div", { class: "three" }, h("div", {}, h("h4", {}, "base"), pre(c.base ?? "(absent)")), h("div", {}, h("h4", {}, "ours"), pre(c.ours ?? "(absent)")), h("div", {}, h("h4", {}, "theirs"), pre(c.theirs ?? "(absent)"))),
        h("div", { class: "toolbar" }, radios.map((r) => h("label", {}, r, " " + r.value))), edit);
    });
    const msg = h("p", { class: "muted" });
    const button = h("button", { disabled: !writable, class: "primary", "data-merge": m.name, onclick: async () => {
      const decisions = Object.fromEntries(Object.entries(picks).map(([k, f]) => [k, f()]));
      try {
        const r = await post("merges/resolve?repo=" + encodeURIComponent(repo), { name: m.name, into: m.into, decisions });
        msg.textContent = `merged: ${m.name} → ${m.into}: ${r.status} ${short(r.commit)}`; msg.className = "ok";
        state.resolved = { repo, text: msg.textContent, className: "ok" };
      } catch (e) { msg.textContent = e.message; msg.className = "error"; }
    } }, "Resolve");
    out.push(section(`${m.name} → ${m.into}`, h("p", { class: "meta" }, "commit ", h("span", { class: "mono" }, m.commit)), blocks, h("div", { class: "toolbar" }, button, msg)));
  }
  return out;
}

// ------------------------------------------------------------------------------------ runs
async function pageRun() {
  const d = await api("run");
  const audit = h("div", { id: "audit" });
  const showAudit = (a) => audit.replaceChildren(h("p", { class: a.ok ? "ok" : "error" }, a.ok ? "audit passed" : "audit FAILED"),
    h("table", { class: "list" }, h("tbody", {}, a.checks.map((c) => h("tr", { class: c.status === "PASS" ? "success" : c.status === "FAIL" ? "failed" : "" }, h("td", {}, c.name), h("td", {}, c.status), h("td", {}, c.detail))))));
  if (state.audit) showAudit(state.audit); // kept across live re-renders
  const rows = d.rows.map((r) => h("tr", { class: r.correct ? "success" : "failed" },
    h("td", {}, r.phase), h("td", {}, r.arm), h("td", { class: "mono" }, r.ref ? h("a", { href: route("trees", { repo: "central", ref: r.ref, win: r.winner_label || "" }), "data-drill": `${r.arm}/${r.problem_id}` }, r.problem_id) : r.problem_id),
    h("td", {}, r.correct ? "✓" : "✗"), h("td", {}, r.answer ?? ""), h("td", { class: "num" }, r.n_nodes ?? "")));
  return [h("h1", {}, `Run ${d.dir}` + (d.experiment ? ` (${d.experiment})` : "")),
    section("Table", markdown(d.table_html)),
    d.plots.length ? section("Plots", d.plots.map((name) => h("img", { src: "/api/run/plot?name=" + encodeURIComponent(name), alt: name, class: "plot" }))) : null,
    section("Results: problem × arm (click for its tree)", h("table", { class: "list" }, h("thead", {}, h("tr", {}, ["phase", "arm", "problem", "correct", "answer", "nodes"].map((x) => h("th", {}, x)))), h("tbody", {}, rows))),
    section("Audit", h("button", { id: "run-audit", onclick: async (e) => {
      e.target.disabled = true; audit.replaceChildren(h("p", { class: "muted" }, "auditing…"));
      try {
        state.audit = await api("run/audit");
        showAudit(state.audit);
      } catch (err) { audit.replaceChildren(h("p", { class: "error" }, err.message)); }
      e.target.disabled = false;
    } }, "Run the audit"), audit)];
}

// ------------------------------------------------------------------------------------ router
const PAGES = { trees: pageTrees, node: pageNode, diff: pageDiff, threads: pageThreads, thread: pageThread, checkpoint: pageCheckpoint,
  sessions: pageSessions, session: pageSession, memory: pageMemory, merges: pageMerges, run: pageRun };

function current() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [page, qs] = hash.split("?");
  return { page: PAGES[page] ? page : "trees", params: Object.fromEntries(new URLSearchParams(qs || "")) };
}

let rendering = 0;
async function render() {
  const { page, params } = current();
  const ticket = ++rendering;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("on", a.dataset.page === page);
  const main = document.getElementById("main");
  try {
    const content = await PAGES[page](params);
    if (ticket !== rendering) return;
    const y = window.scrollY;
    main.replaceChildren(...[content].flat(2).filter(Boolean));
    window.scrollTo(0, y);
    main.dataset.page = page;
  } catch (e) {
    if (ticket === rendering) main.replaceChildren(h("h1", {}, "Not available"), h("p", { class: "error" }, e.message));
  }
}

async function poll() {
  try {
    const v = (await api("version")).version;
    const live = document.getElementById("live");
    live.classList.add("up");
    live.title = "last checked " + new Date().toLocaleTimeString();
    const editing = document.activeElement && ["TEXTAREA", "INPUT"].includes(document.activeElement.tagName);
    if (state.version !== null && v !== state.version && !editing) await render();
    if (!editing) state.version = v;
  } catch (e) {
    document.getElementById("live").classList.remove("up");
  }
}

window.addEventListener("hashchange", () => { state.compare = []; state.resolved = null; render(); });
window.addEventListener("DOMContentLoaded", async () => {
  state.info = await api("info");
  state.version = state.info.version;
  document.getElementById("nav-run").hidden = !state.info.run;
  await render();
  setInterval(poll, 1500);
});
