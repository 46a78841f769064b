// scalerl dashboard: plain JavaScript and SVG, no library, no network beyond this server's /api/dash routes.
// Every value goes into the page through textContent or an attribute, never as HTML.
"use strict";
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b"];

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}
function sv(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
async function getJSON(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(url + ": HTTP " + r.status);
  return r.json();
}
function fmt(v) { return v === null || v === undefined ? "–" : (typeof v === "number" ? +v.toFixed(4) : v); }

// One chart: each series is {name, x, y}; points are circles (class pt), `lines` are polylines.
function chart(title, points, lines, opts) {
  opts = opts || {};
  const W = opts.width || 420, H = opts.height || 220, L = 60, B = 28, all = [];
  for (const s of points.concat(lines || [])) s.x.forEach((x, i) => { if (s.y[i] !== null) all.push([x, s.y[i]]); });
  for (const b of opts.bands || []) b.high.forEach((y, i) => all.push([b.x[i], y]));
  const div = el("div", {class: "chart", "data-title": title, "data-points": 0}, el("h3", {}, title));
  const svg = sv("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`});
  div.append(svg);
  if (!all.length) { div.append(el("div", {class: "note"}, "no data yet")); return div; }
  const xs = all.map(p => p[0]), ys = all.map(p => p[1]);
  let x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(0, ...ys), y1 = Math.max(...ys);
  if (x1 === x0) x1 = x0 + 1; if (y1 === y0) y1 = y0 + 1;
  const px = x => L + (x - x0) / (x1 - x0) * (W - L - 10), py = y => H - B - (y - y0) / (y1 - y0) * (H - B - 10);
  svg.append(sv("line", {x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#999"}));
  svg.append(sv("line", {x1: L, y1: 10, x2: L, y2: H - B, stroke: "#999"}));
  for (const [v, x, y, a] of [[y0, L - 4, H - B, "end"], [y1, L - 4, 16, "end"], [x0, L, H - 8, "start"], [x1, W - 10, H - 8, "end"]]) {
    const t = sv("text", {x, y, "font-size": 10, "text-anchor": a}); t.textContent = fmt(v); svg.append(t);
  }
  (opts.bands || []).forEach(b => {
    const up = b.x.map((x, i) => `${px(x)},${py(b.high[i])}`), dn = b.x.map((x, i) => `${px(x)},${py(b.low[i])}`).reverse();
    svg.append(sv("polygon", {points: up.concat(dn).join(" "), fill: "#1f77b4", "fill-opacity": 0.12, class: "band"}));
  });
  if (opts.extrapolateAfter !== undefined && opts.extrapolateAfter < x1) {
    svg.append(sv("rect", {x: px(opts.extrapolateAfter), y: 10, width: W - 10 - px(opts.extrapolateAfter),
                           height: H - B - 10, fill: "#888", "fill-opacity": 0.08, class: "extrapolation"}));
  }
  const legend = el("div", {class: "legend"});
  (lines || []).forEach((s, k) => {
    const pts = s.x.map((x, i) => s.y[i] === null ? null : `${px(x)},${py(s.y[i])}`).filter(Boolean).join(" ");
    svg.append(sv("polyline", {points: pts, fill: "none", stroke: COLORS[(k + 1) % COLORS.length], class: "line", "data-series": s.name}));
    legend.append(el("span", {style: `color:${COLORS[(k + 1) % COLORS.length]}`}, "— " + s.name));
  });
  points.forEach((s, k) => {
    if (opts.connect) {
      const pts = s.x.map((x, i) => s.y[i] === null ? null : `${px(x)},${py(s.y[i])}`).filter(Boolean).join(" ");
      svg.append(sv("polyline", {points: pts, fill: "none", stroke: COLORS[k % COLORS.length], "stroke-opacity": 0.5, class: "trace"}));
    }
    s.x.forEach((x, i) => {
      if (s.y[i] === null) return;
      svg.append(sv("circle", {cx: px(x), cy: py(s.y[i]), r: 2.5, fill: COLORS[k % COLORS.length], class: "pt", "data-series": s.name}));
    });
    legend.append(el("span", {style: `color:${COLORS[k % COLORS.length]}`}, "● " + s.name));
  });
  div.append(legend);
  const shown = points.reduce((n, s) => n + s.y.filter(y => y !== null).length, 0);
  div.setAttribute("data-points", shown);
  const thinned = points.concat(lines || []).filter(s => s.total > s.x.length);
  if (thinned.length) div.append(el("div", {class: "note"}, thinned.map(s => `${s.name}: ${s.x.length} of ${s.total} points shown`).join("; ")));
  return div;
}

let INFO = {run: null, ledger: null, compare: []};
function noRun(main) {
  main.append(el("p", {class: "note", id: "no-run"}, "This page needs a run folder: start it with `scalerl dash RUN_DIR`. " +
    "The reward server's dashboard shows its ledger only (Ledger page)."));
}

async function overview(main) {
  if (!INFO.run) { noRun(main); return; }
  const d = await getJSON("/api/dash/overview");
  main.append(el("h2", {}, `Run ${d.run}: ${d.steps} steps, ${d.validations} evaluations`));
  const held = el("section", {id: "heldout"}, el("h3", {}, "Held-out pass rate vs compute (device-seconds): points, fit, confidence band, extrapolation shaded"));
  for (const c of d.curves) {
    const bands = c.band_low ? [{x: c.fit.x, low: c.band_low, high: c.band_high}] : [];
    held.append(chart("held-out " + c.domain, [c.points], c.fit ? [c.fit] : [], {bands, extrapolateAfter: c.fit_max_compute ?? undefined}));
    if (c.fit_error) held.append(el("div", {class: "note fit-error"}, `${c.domain}: ${c.fit_error}`));
    if (c.asymptote !== null) held.append(el("div", {class: "note"}, `${c.domain}: fitted asymptote A = ${fmt(c.asymptote)}`));
  }
  if (!d.curves.length) held.append(el("p", {class: "note"}, "no evaluation yet"));
  main.append(held);
  const steps = el("section", {id: "steps"}, el("h3", {}, "Per step: training reward, effective batch, truncation, format failures, throughput"));
  for (const s of d.step_series) steps.append(chart(s.name, [s], [], {connect: true}));
  main.append(steps);
}

function table(id, heads, rows) {
  const t = el("table", {id}, el("tr", {}, ...heads.map(h => el("th", {}, h))));
  for (const r of rows) t.append(r);
  return t;
}

function countsTable(counts) {
  const keys = ["prompts", "attempts", "retired", "benched", "never_drawn"];
  return table("ledger-counts", ["domain", "prompts", "attempts", "retired", "benched (idle)", "never drawn"], counts.map(c =>
    el("tr", {"data-domain": c.domain}, el("td", {}, c.domain), ...keys.map(k => el("td", {"data-count": k}, c[k])))));
}

function histTable(hists) {
  const heads = ["domain", "step"].concat(Array.from({length: 10}, (_, i) => `${i / 10}–${(i + 1) / 10}`));
  return table("ledger-hist", heads, hists.map(h => {
    const max = Math.max(1, ...h.counts);
    return el("tr", {class: "hist-row", "data-domain": h.domain, "data-step": h.step}, el("td", {}, h.domain), el("td", {}, h.step),
      ...h.counts.map(n => el("td", {style: `background: rgba(31,119,180,${(n / max).toFixed(2)})`}, n)));
  }));
}

async function ledger(main) {
  const d = await getJSON("/api/dash/ledger");
  if (!d.available) { main.append(el("p", {class: "note", id: "no-ledger"}, "ledger unavailable: " + d.reason)); return; }
  main.append(el("p", {class: "note", id: "ledger-source"}, `reading ${INFO.ledger}; `, el("b", {id: "ledger-attempts"}, d.attempts), " attempts"));
  main.append(el("h3", {}, "Prompts per domain"), countsTable(d.counts));
  main.append(el("h3", {}, "Pass-rate distribution as training moves it (prompts per bin, attempts up to each step)"), histTable(d.histograms));
  main.append(el("h3", {}, "Difficulty per source"), table("ledger-sources", ["source", "domain", "prompts", "drawn", "mean pass rate", "mean prior"],
    d.sources.map(s => el("tr", {}, ...[s.source, s.domain, s.prompts, s.drawn, fmt(s.mean_pass_rate), fmt(s.prior)].map(v => el("td", {}, v))))));
  const q = el("input", {id: "prompt-q", placeholder: "prompt id or text", size: 30}), hits = el("div", {id: "prompt-hits"});
  const hist = el("div", {id: "prompt-history"});
  const form = el("form", {id: "prompt-search"}, q, " ", el("button", {type: "submit"}, "Search"));
  form.addEventListener("submit", ev => { ev.preventDefault(); search(q.value, hits, hist).catch(fail); });
  main.append(el("h3", {}, "Prompt search"), form, hits, hist);
}

async function search(text, hits, hist) {
  hits.replaceChildren();
  if (!text.trim()) return;
  const rows = await getJSON("/api/dash/prompts?q=" + encodeURIComponent(text.trim()));
  if (!rows.length) hits.append(el("div", {class: "note"}, "no prompt matches"));
  for (const h of rows) {
    const a = el("a", {href: "#", class: "prompt-hit", "data-prompt": h.prompt_id}, `${h.prompt_id} (${h.domain}, ${h.attempts} attempts)`);
    a.addEventListener("click", ev => { ev.preventDefault(); openPrompt(h.prompt_id, hist).catch(fail); });
    hits.append(el("div", {}, a, " ", el("span", {class: "note"}, h.text.slice(0, 120))));
  }
  if (rows.length === 1) await openPrompt(rows[0].prompt_id, hist);
}

async function openPrompt(pid, hist) {
  const h = await getJSON("/api/dash/prompts/" + encodeURIComponent(pid));
  const t = table("prompt-steps", ["step", "attempts", "correct"], h.steps.map(s =>
    el("tr", {class: "prompt-step"}, el("td", {}, fmt(s.step)), el("td", {}, s.attempts), el("td", {}, s.correct))));
  const roll = INFO.run ? await getJSON("/api/dash/rollouts?limit=20&prompt=" + encodeURIComponent(pid)) : {rows: [], total: 0};
  const list = el("div", {id: "prompt-rollouts"});
  for (const r of roll.rows) list.append(el("div", {class: "prompt-rollout"}, `${r.kind} step ${r.step}: ${r.status} (reward ${fmt(r.reward)}) `, el("pre", {}, r.completion)));
  hist.replaceChildren(el("h4", {}, `${h.prompt_id} (${h.domain}, ${h.source})`), el("pre", {}, h.text),
    el("p", {}, "attempts: ", el("b", {id: "prompt-attempts"}, h.attempts), `; pass rate ${fmt(h.pass_rate)}; `,
       h.retired ? `retired at step ${fmt(h.retired_step)}` : "not retired"), t,
    el("p", {}, el("b", {id: "prompt-rollout-count"}, roll.total), " rollouts recorded"), list);
}

const FILTERS = ["kind", "domain", "status", "step", "prompt"];
function filterField(f, value, choices) {
  if (!choices) return el("input", {name: f, id: "f-" + f, value, size: f === "prompt" ? 18 : 6});
  const s = el("select", {name: f, id: "f-" + f}, el("option", {value: ""}, "any"));
  for (const c of choices) { const o = el("option", {value: c}, c); if (c === value) o.setAttribute("selected", ""); s.append(o); }
  return s;
}

function rolloutRow(r) {
  const out = el("td", {}, el("pre", {class: "completion"}, r.completion));
  if (r.stdout !== null || r.stderr !== null) {  // the sandbox's output of the first failing test (code)
    out.append(el("div", {class: "sandbox"}, el("b", {}, "sandbox stdout"), el("pre", {class: "stdout"}, r.stdout || "(empty)"),
      el("b", {}, "sandbox stderr"), el("pre", {class: "stderr"}, r.stderr || "(empty)")));
  }
  const prompt = el("td", {}, el("a", {href: "?prompt=" + encodeURIComponent(r.prompt_id)}, r.prompt_id));
  if (r.prompt) prompt.append(el("pre", {class: "prompt"}, r.prompt.slice(0, 400)));
  const verdict = el("td", {}, r.status);
  if (r.why) verdict.append(el("div", {class: "why note"}, r.why));
  return el("tr", {class: "rollout", "data-domain": r.domain, "data-status": r.status, "data-step": r.step, "data-prompt": r.prompt_id},
    el("td", {}, `${r.kind} ${r.step}`), el("td", {}, r.domain), prompt, verdict, el("td", {}, fmt(r.reward)),
    el("td", {}, fmt(r.completion_tokens)), el("td", {}, fmt(r.truncated)), out);
}

async function rollouts(main) {
  if (!INFO.run) { noRun(main); return; }
  const params = new URLSearchParams(location.search), q = new URLSearchParams();
  for (const f of FILTERS.concat(["offset"])) if (params.get(f)) q.set(f, params.get(f));
  q.set("limit", "50");
  const d = await getJSON("/api/dash/rollouts?" + q);
  const choices = {kind: ["train", "validation"], domain: d.domains, status: d.statuses};
  const form = el("form", {id: "rollout-filter", method: "get"});
  for (const f of FILTERS) form.append(el("label", {}, f + " ", filterField(f, params.get(f) || "", choices[f])), " ");
  form.append(el("button", {type: "submit"}, "Filter"));
  main.append(form);
  main.append(el("p", {}, "matching: ", el("b", {id: "rollout-total"}, d.total), `; showing ${d.rows.length ? d.offset + 1 : 0}–${d.offset + d.rows.length}`));
  for (const [label, off, id] of [["previous page", d.offset - d.limit, "prev-page"], ["next page", d.offset + d.limit, "next-page"]]) {
    if (off < 0 || off >= d.total) continue;
    params.set("offset", off);
    main.append(el("a", {href: "?" + params, id}, label), " ");
  }
  main.append(table("rollouts", ["step", "domain", "prompt", "verdict", "reward", "tokens", "truncated", "completion"], d.rows.map(rolloutRow)));
}

async function curriculum(main) {
  if (!INFO.run) { noRun(main); return; }
  const d = await getJSON("/api/dash/curriculum");
  main.append(el("h3", {}, "Curriculum per step: draws per source, dropped/refilled groups, strategy events and gauges (domain weights, skip probabilities, stage)"));
  if (!d.length) main.append(el("p", {class: "note"}, "no curriculum keys in metrics.jsonl"));
  for (const s of d) main.append(chart(s.name, [s], [], {connect: true}));
}

async function compare(main) {
  if (!INFO.run) { noRun(main); return; }
  const key = new URLSearchParams(location.search).get("key") || "reward/mean";
  const d = await getJSON("/api/dash/compare?key=" + encodeURIComponent(key));
  const sel = el("select", {name: "key", id: "compare-key"});
  for (const k of d.keys) { const o = el("option", {value: k}, k); if (k === key) o.setAttribute("selected", ""); sel.append(o); }
  const form = el("form", {method: "get", id: "compare-form"}, sel, " ", el("button", {type: "submit"}, "Show"));
  main.append(el("h3", {}, `Compare ${d.runs.length} runs: ${d.runs.join(", ")}`), form,
    el("p", {class: "note"}, "add runs with `scalerl dash RUN_DIR --compare OTHER_DIR`"), chart(`${key} vs ${d.x}`, d.series, [], {connect: true, width: 820, height: 380}));
}

const PAGES = {overview, ledger, rollouts, curriculum, compare};
function fail(err) {
  console.error(String(err));
  const main = document.getElementById("main");
  main.dataset.state = "error";
  main.append(el("p", {class: "error"}, String(err)));
}

async function start() {
  const page = (location.pathname.split("/")[2]) || "overview";
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === page);
  const main = document.getElementById("main");
  main.replaceChildren();
  try {
    INFO = await getJSON("/api/dash/info");
    document.getElementById("run-name").textContent = INFO.run || "reward server";
    await PAGES[page](main);
    main.dataset.state = "ready";
  } catch (err) { fail(err); }
}
start();
