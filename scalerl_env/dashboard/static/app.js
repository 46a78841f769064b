// scalerl dashboard: plain JavaScript over this server's /api/dash routes; charts are drawn by the vendored
// uPlot (/dash-static/vendor/, loaded before this file), no other library and no network.
// Every value goes into the page through textContent or an attribute, never as HTML.
"use strict";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b"];
const BAND_FILL = "rgba(214,39,40,0.18)", EXTRAPOLATED_FILL = "rgba(128,128,128,0.10)";

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}
async function getJSON(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(url + ": HTTP " + r.status);
  return r.json();
}
function fmt(v) { return v === null || v === undefined ? "–" : (typeof v === "number" ? +v.toFixed(4) : v); }
function tick(v) {
  if (v === null || v === undefined) return null;
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(1) : String(+v.toPrecision(4));
}
const logX = () => new URLSearchParams(location.search).get("logx") === "1";

// The log-compute switch: kept in the URL (?logx=1), so a reload or a link keeps the choice.
function logSwitch() {
  const box = el("input", {type: "checkbox", id: "log-x"});
  box.checked = logX();
  box.addEventListener("change", () => {
    const q = new URLSearchParams(location.search);
    if (box.checked) q.set("logx", "1"); else q.delete("logx");
    location.search = q.toString();
  });
  return el("label", {class: "log-switch"}, box, " log compute axis");
}

// Aligned uPlot data from tables [x, y...] (uPlot.join: x values merged, gaps between tables skipped by the
// cursor); on a log axis the rows at x <= 0 are left out (log 0 does not exist).
function tables(spec) {
  const keep = x => !spec.logX || x > 0;
  const cut = cols => { const i = cols[0].map((x, k) => keep(x) ? k : -1).filter(k => k >= 0); return cols.map(c => i.map(k => c[k])); };
  const out = [], series = [{label: spec.xLabel}], bands = [];
  spec.points.forEach((s, k) => {
    out.push(cut([s.x, s.y]));
    series.push({label: s.name, stroke: COLORS[k % COLORS.length], width: spec.connect ? 1 : 0,
                 paths: spec.connect ? undefined : () => null, points: {show: true, size: 5, fill: COLORS[k % COLORS.length]}});
  });
  (spec.lines || []).forEach((s, k) => {
    out.push(cut([s.x, s.y]));
    series.push({label: s.name, stroke: COLORS[(k + 1) % COLORS.length], width: 2, spanGaps: true, points: {show: false}});
  });
  if (spec.band) {
    out.push(cut([spec.band.x, spec.band.high, spec.band.low]));
    const hi = series.length;
    series.push({label: "band high", stroke: BAND_FILL, spanGaps: true, points: {show: false}},
                {label: "band low", stroke: BAND_FILL, spanGaps: true, points: {show: false}});
    bands.push({series: [hi, hi + 1], fill: BAND_FILL});
  }
  return {data: uPlot.join(out), series, bands};
}

// A y range around the data; a constant series gets a range around its value (uPlot's own would be 0-100).
function flatSafe(u, min, max) {
  if (min !== max) return uPlot.rangeNum(min, max, 0.1, true);
  const pad = Math.abs(min) * 0.1 || 0.5;
  return [min === 0 ? 0 : min - pad, max + pad];
}

// The extrapolated part of a fit (past the last compute fitted), shaded under the series.
function shadeAfter(x0) {
  return {hooks: {drawClear: [u => {
    const left = u.valToPos(x0, "x", true), right = u.bbox.left + u.bbox.width;
    if (!(left < right)) return;
    const from = Math.max(left, u.bbox.left);
    u.ctx.save(); u.ctx.fillStyle = EXTRAPOLATED_FILL;
    u.ctx.fillRect(from, u.bbox.top, right - from, u.bbox.height); u.ctx.restore();
  }]}};
}

// One chart. spec: {points: [series], lines: [series], band: {x, low, high}, xLabel, yLabel, yRange, logX,
// extrapolateAfter, connect, width, height}; a series is {name, x, y, total}. The drawn tick labels are kept
// in data-x-ticks / data-y-ticks, the uPlot instance in the element's `uplot` property.
function chart(title, spec) {
  const div = el("div", {class: "chart", "data-title": title, "data-points": 0}, el("h3", {}, title));
  const {data, series, bands} = tables(spec);
  const shown = spec.points.reduce((n, s) => n + s.y.filter((y, i) => y !== null && (!spec.logX || s.x[i] > 0)).length, 0);
  div.setAttribute("data-points", shown);
  if (!data.slice(1).some(ys => ys.some(y => y !== null && y !== undefined))) {
    div.append(el("div", {class: "note"}, "no data yet")); return div;
  }
  const ticks = key => (u, splits) => { const v = splits.map(tick); div.dataset[key] = v.filter(s => s !== null).join(" "); return v; };
  const opts = {
    width: spec.width || 440, height: spec.height || 240, series, bands,
    scales: {x: {time: false, distr: spec.logX ? 3 : 1}, y: {range: spec.yRange || flatSafe}},
    axes: [{label: spec.xLabel, values: ticks("xTicks"), grid: {stroke: "#eee"}},
           {label: spec.yLabel, values: ticks("yTicks"), grid: {stroke: "#eee"}, size: 56}],
    legend: {live: true}, cursor: {points: {size: 7}},
    plugins: spec.extrapolateAfter != null ? [shadeAfter(spec.extrapolateAfter)] : [],
  };
  if (spec.band) opts.series.slice(-2).forEach(s => { s.value = (u, v) => fmt(v); });
  div.uplot = new uPlot(opts, data, div);
  if (spec.extrapolateAfter != null) div.setAttribute("data-extrapolated-after", spec.extrapolateAfter);
  const thinned = spec.points.concat(spec.lines || []).filter(s => s.total > s.x.length);
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
  const held = el("section", {id: "heldout"}, el("h3", {}, "Held-out pass rate vs compute: points, fit, confidence band, extrapolation shaded"), logSwitch());
  for (const c of d.curves) {
    const band = c.band_low ? {x: c.fit.x, low: c.band_low, high: c.band_high} : null;
    const box = el("div", {class: "curve", "data-domain": c.domain});
    box.append(chart("held-out " + c.domain, {points: [c.points], lines: c.fit ? [c.fit] : [], band, xLabel: c.x_label,
      yLabel: "held-out pass rate", yRange: c.y_range, logX: logX(), extrapolateAfter: c.fit_max_compute}));
    if (c.fit_error) box.append(el("div", {class: "note fit-error"}, `${c.domain}: ${c.fit_error}`));
    if (c.asymptote !== null) box.append(el("div", {class: "note"}, `${c.domain}: fitted asymptote A = ${fmt(c.asymptote)}`));
    for (const w of c.warnings) box.append(el("div", {class: "fit-warning"}, `warning: ${w}`));
    held.append(box);
  }
  if (!d.curves.length) held.append(el("p", {class: "note"}, "no evaluation yet"));
  main.append(held);
  const steps = el("section", {id: "steps"}, el("h3", {}, "Per step: training reward, effective batch, truncation, format failures, throughput"));
  for (const s of d.step_series) steps.append(chart(s.name, {points: [s], xLabel: "step", yLabel: s.name, connect: true}));
  main.append(steps);
  const second = el("section", {id: "second-opinion"}, el("h3", {}, "Running false-negative estimate: negatives the second opinion accepts / negatives it re-checked"));
  for (const s of d.second_opinion) second.append(chart("second opinion " + s.name, {points: [s], xLabel: "step",
    yLabel: "accepted / re-checked", yRange: [0, 1], connect: true}));
  if (!d.second_opinion.length) second.append(el("p", {class: "note"}, "no second opinions in metrics.jsonl"));
  main.append(second);
}

function table(id, heads, rows) {
  const t = el("table", {id}, el("tr", {}, ...heads.map(h => el("th", {}, h))));
  for (const r of rows) t.append(r);
  return t;
}

// "benched" is null unless the run benches prompts: the column is shown only then.
function countsTable(counts) {
  const bench = counts.some(c => c.benched !== null);
  const cols = [["prompts", "prompts"], ["attempts", "attempts"], ["retired", "retired"]]
    .concat(bench ? [["benched", "benched (idle)"]] : [], [["never_drawn", "never drawn"]]);
  return table("ledger-counts", ["domain"].concat(cols.map(c => c[1])), counts.map(c =>
    el("tr", {"data-domain": c.domain}, el("td", {}, c.domain), ...cols.map(([k]) => el("td", {"data-count": k}, c[k])))));
}

function histTable(bins, hists) {
  const heads = ["domain", "step"].concat(bins);
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
  main.append(el("h3", {}, "Pass-rate distribution as training moves it (prompts per pass rate k/n, n samples per prompt; attempts up to each step)"),
    histTable(d.bins, d.histograms));
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
  for (const s of d) main.append(chart(s.name, {points: [s], xLabel: "step", yLabel: s.name, connect: true}));
}

async function compare(main) {
  if (!INFO.run) { noRun(main); return; }
  const key = new URLSearchParams(location.search).get("key") || "reward/mean";
  const d = await getJSON("/api/dash/compare?key=" + encodeURIComponent(key));
  const sel = el("select", {name: "key", id: "compare-key"});
  for (const k of d.keys) { const o = el("option", {value: k}, k); if (k === key) o.setAttribute("selected", ""); sel.append(o); }
  const form = el("form", {method: "get", id: "compare-form"}, sel, " ", el("button", {type: "submit"}, "Show"));
  const compute = d.x !== "step";
  main.append(el("h3", {}, `Compare ${d.runs.length} runs: ${d.runs.join(", ")}`), form, compute ? logSwitch() : "",
    el("p", {class: "note"}, "add runs with `scalerl dash RUN_DIR --compare OTHER_DIR`"),
    chart(`${key} vs ${d.x}`, {points: d.series, xLabel: d.x_label, yLabel: key, yRange: d.y_range, logX: compute && logX(),
                               connect: true, width: 860, height: 400}));
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
