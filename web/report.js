// ppsim HTML report: renders the data src/report/html.cc writes inline (<script id="ppsim-data">).
// No network: everything it needs is in the file. Canvas timelines (zoom: wheel, pan: drag, reset:
// double-click), hover details, sortable tables, row <-> timeline selection, light/dark themes.
// When the engine (WebAssembly, tools/build_wasm.sh) is embedded, the controls and the URL
// fragment re-simulate in the page; otherwise the precomputed data is shown and the page says so.
(function () {
  "use strict";
  const errors = [];
  window.addEventListener("error", (e) => { errors.push(String(e.message)); markErrors(); });
  function markErrors() { document.body.dataset.errors = String(errors.length); }

  const DATA = JSON.parse(document.getElementById("ppsim-data").textContent);
  const KIND_NAMES = ["F", "I", "W", "B"];
  const PART_NAMES = ["whole", "attn", "mlp", "attn_w", "mlp_w", "dispatch", "combine"];
  const $ = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(e.dataset, v); else e.setAttribute(k, v);
    }
    for (const k of kids) if (k != null) e.append(k instanceof Node ? k : String(k));
    return e;
  };
  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  function fmtNum(x, digits) {
    if (x === null || x === undefined) return "";
    if (typeof x !== "number") return String(x);
    if (Number.isInteger(x)) return String(x);
    const d = digits === undefined ? 4 : digits;
    return String(parseFloat(x.toFixed(d)));
  }
  const get = (obj, path) => path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);

  // ---- timelines: decode the compact encoding (docs/JSON.md, "HTML report") ----
  function decode(tl) {
    if (tl._decoded) return tl._decoded;
    const q = tl.q, tpu = tl.tpu;
    const ranks = tl.ranks.map((flat, r) => {
      const ivs = [];
      let t = 0, i = 0;
      while (i < flat.length) {
        const f = flat[i++];
        const iv = { rank: r, stream: f & 1, part: (f >> 1) & 7, opIndex: ((f >> 4) & 3) - 1, k1: (f >> 6) & 3,
          pair: (f >> 8) & 1, k2: (f >> 9) & 3, s1: flat[i++], m1: flat[i++] };
        if (iv.pair) { iv.s2 = flat[i++]; iv.m2 = flat[i++]; }
        t += flat[i++];
        iv.start = t * q; iv.end = (t + flat[i++]) * q;
        ivs.push(iv);
      }
      return ivs;
    });
    const mem = (tl.mem ? tl.mem.ranks : []).map((flat) => {
      const s = []; let t = 0;
      for (let i = 0; i + 1 < flat.length; i += 2) { t += flat[i]; s.push([t * q, flat[i + 1]]); }
      return s;
    });
    let end = 0;
    for (const ivs of ranks) for (const iv of ivs) end = Math.max(end, iv.end);
    tl._decoded = { ranks, mem, end, ends: null, tpu, hasComm: ranks.some((v) => v.some((iv) => iv.stream === 1)) };
    return tl._decoded;
  }
  // Ends per op, for "waited on": built on the first hover, not at load.
  function endsOf(d) {
    if (d.ends) return d.ends;
    const ends = new Map();
    for (const ivs of d.ranks) for (const iv of ivs) {
      const ops = [[iv.k1, iv.s1, iv.m1]];
      if (iv.pair) ops.push([iv.k2, iv.s2, iv.m2]);
      ops.forEach(([k, s, m], j) => {
        if (iv.opIndex >= 0 && iv.opIndex !== j) return;
        const key = k + ":" + s + ":" + m, old = ends.get(key);
        if (!old || old.end < iv.end) ends.set(key, { end: iv.end, rank: iv.rank, name: opName(k, s, m) });
      });
    }
    d.ends = ends;
    return ends;
  }
  // A timeline's end in ticks from its flat arrays, without decoding them into objects.
  function tlEnd(tl) {
    if (tl._decoded) return tl._decoded.end;
    let end = 0;
    for (const flat of tl.ranks) {
      let t = 0, i = 0;
      while (i < flat.length) {
        const f = flat[i]; i += (f >> 8) & 1 ? 5 : 3;
        t += flat[i]; end = Math.max(end, (t + flat[i + 1]) * tl.q); i += 2;
      }
    }
    return end;
  }
  const opName = (k, s, m) => s + KIND_NAMES[k] + m;
  function actionName(iv) {
    return iv.pair ? "(" + opName(iv.k1, iv.s1, iv.m1) + ";" + opName(iv.k2, iv.s2, iv.m2) + ")" : opName(iv.k1, iv.s1, iv.m1);
  }
  // The inputs an op waits for: the neighbouring stage's op of the same micro-batch (F: the one
  // before; a backward: the one after, or its own F at the pipe's last stage); W: its own I.
  function depsOf(k, s, m, spp) {
    if (!spp) return [];
    const first = s % spp === 0, last = s % spp === spp - 1;
    if (k === 0) return first ? [] : [[0, s - 1, m]];
    if (k === 2) return [[1, s, m]];
    return last ? [[0, s, m]] : [[1, s + 1, m], [3, s + 1, m]];
  }
  function waitedOn(tl, d, iv, idx) {
    let best = null;
    const rankIvs = d.ranks[iv.rank];
    for (let j = idx - 1; j >= 0; --j) {
      const p = rankIvs[j];
      if (p.stream === iv.stream && p.end <= iv.start) { best = { end: p.end, text: actionName(p) + " (previous on rank " + iv.rank + ")" }; break; }
    }
    const ops = [[iv.k1, iv.s1, iv.m1]];
    if (iv.pair) ops.push([iv.k2, iv.s2, iv.m2]);
    for (const [k, s, m] of ops) for (const dep of depsOf(k, s, m, tl.spp)) {
      const e = endsOf(d).get(dep.join(":"));
      if (e && e.end <= iv.start && (!best || e.end > best.end)) best = { end: e.end, text: e.name + " (rank " + e.rank + ")" };
    }
    return best ? best.text + ", ended " + fmtNum(best.end / d.tpu) : "nothing (started at its earliest)";
  }

  // ---- shared view: every timeline on one time axis ----
  const view = { t0: 0, t1: 1, full: 1 };
  const panels = [];
  let selected = -1;

  function colorOf(iv) {
    if (iv.stream === 1 || iv.part === 5 || iv.part === 6) return css("--comm");
    if (iv.pair && iv.opIndex < 0) return css("--pair");
    const k = iv.opIndex === 1 ? iv.k2 : iv.k1;
    return css("--" + KIND_NAMES[k]);
  }

  const GUT_L = 58, GUT_R = 120, LANE = 16, COMM = 6, MEM = 14, GAP = 4, AXIS = 18;
  function laneHeight(d) { return LANE + (d.hasComm ? COMM : 0) + (d.mem.length ? MEM : 0) + GAP; }

  function drawPanel(p) {
    const { canvas, tl, row } = p;
    const d = decode(tl);
    const dpr = window.devicePixelRatio || 1;
    const W = canvas.clientWidth || 900, lh = laneHeight(d), H = AXIS + lh * d.ranks.length;
    canvas.style.height = H + "px";
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    const w = W - GUT_L - GUT_R, span = view.t1 - view.t0;
    const X = (t) => GUT_L + ((t - view.t0) / span) * w;
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = css("--muted");
    // axis
    const step = niceStep(span / d.tpu / 8);
    g.strokeStyle = css("--line");
    for (let u = Math.ceil(view.t0 / d.tpu / step) * step; u * d.tpu <= view.t1; u += step) {
      const x = X(u * d.tpu);
      g.fillText(fmtNum(u, 3), x + 2, 11);
      g.beginPath(); g.moveTo(x, 13); g.lineTo(x, H); g.stroke();
    }
    const bubbles = row && row.bubble ? row.bubble.per_rank : null;
    let memMax = 0;
    for (const s of d.mem) for (const [, v] of s) memMax = Math.max(memMax, v);
    d.ranks.forEach((ivs, r) => {
      const y0 = AXIS + r * lh;
      g.fillStyle = css("--bubble");
      g.fillRect(GUT_L, y0, w, LANE);
      g.fillStyle = css("--fg");
      g.fillText("rank " + r, 4, y0 + 12);
      if (bubbles) { g.fillStyle = css("--muted"); g.fillText("bubble " + fmtNum(bubbles[r], 3), W - GUT_R + 6, y0 + 12); }
      g.save(); g.beginPath(); g.rect(GUT_L, y0, w, lh); g.clip();
      for (const iv of ivs) {
        if (iv.end < view.t0 || iv.start > view.t1) continue;
        const x = X(iv.start), xe = X(iv.end), ww = Math.max(1, xe - x - (xe - x > 4 ? 1 : 0));
        const y = iv.stream === 1 ? y0 + LANE : y0, h = iv.stream === 1 ? COMM : LANE;
        g.fillStyle = colorOf(iv);
        g.fillRect(x, y, ww, h);
        if (iv.stream === 0 && ww > 16) {
          g.fillStyle = "#fff";
          const label = iv.pair && iv.opIndex < 0 ? iv.m1 + "|" + iv.m2 : String(iv.opIndex === 1 ? iv.m2 : iv.m1);
          if (g.measureText(label).width < ww - 2) g.fillText(label, x + 2, y + 12);
        }
      }
      const mem = d.mem[r];
      if (mem && mem.length && memMax > 0) {
        const my = y0 + LANE + (d.hasComm ? COMM : 0);
        g.fillStyle = css("--mem"); g.globalAlpha = 0.55;
        g.beginPath(); g.moveTo(X(mem[0][0]), my + MEM);
        for (let i = 0; i < mem.length; ++i) {
          const t = mem[i][0], v = mem[i][1], nt = i + 1 < mem.length ? mem[i + 1][0] : d.end;
          const y = my + MEM - (v / memMax) * (MEM - 2);
          g.lineTo(X(t), y); g.lineTo(X(nt), y);
        }
        g.lineTo(X(d.end), my + MEM); g.closePath(); g.fill(); g.globalAlpha = 1;
      }
      g.restore();
      if (mem && mem.length) {
        let peak = 0; for (const [, v] of mem) peak = Math.max(peak, v);
        g.fillStyle = css("--muted");
        g.fillText("mem " + fmtNum(peak, 2) + " " + (tl.mem.unit === "chunks" ? "" : tl.mem.unit), W - GUT_R + 6, y0 + LANE + (d.hasComm ? COMM : 0) + 11);
      }
    });
  }
  function niceStep(x) {
    const e = Math.pow(10, Math.floor(Math.log10(x || 1))), f = x / e;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * e;
  }
  function redrawAll() { for (const p of panels) if (p.visible) drawPanel(p); }
  // Panels are decoded and drawn when they scroll into view: a page of many large timelines
  // loads at the cost of the ones on screen.
  const observer = typeof IntersectionObserver === "function" ? new IntersectionObserver((entries) => {
    for (const e of entries) {
      const p = panels.find((x) => x.el === e.target);
      if (p && e.isIntersecting && !p.visible) { p.visible = true; drawPanel(p); }
    }
  }, { rootMargin: "400px" }) : null;

  function hitTest(p, ev) {
    const d = decode(p.tl), rect = p.canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top, lh = laneHeight(d);
    const r = Math.floor((y - AXIS) / lh);
    if (r < 0 || r >= d.ranks.length || x < GUT_L) return null;
    const yy = y - AXIS - r * lh, stream = yy < LANE ? 0 : d.hasComm && yy < LANE + COMM ? 1 : -1;
    if (stream < 0) return null;
    const w = rect.width - GUT_L - GUT_R, t = view.t0 + ((x - GUT_L) / w) * (view.t1 - view.t0);
    const ivs = d.ranks[r], tol = (view.t1 - view.t0) / w;
    for (let i = 0; i < ivs.length; ++i) {
      const iv = ivs[i];
      if (iv.stream === stream && iv.start - tol <= t && t <= iv.end + tol) return { iv, i, d };
    }
    return null;
  }
  function tipText(p, h) {
    const { iv, d } = h, tpu = d.tpu;
    const k = iv.opIndex === 1 ? iv.k2 : iv.k1, s = iv.opIndex === 1 ? iv.s2 : iv.s1, m = iv.opIndex === 1 ? iv.m2 : iv.m1;
    const lines = [actionName(iv) + "  (" + p.tl.name + ")",
      "rank " + iv.rank + ", " + (iv.stream ? "communication" : "compute") + " stream" + (iv.part ? ", " + PART_NAMES[iv.part] : ""),
      "stage " + s + ", micro-batch " + m + ", pass " + KIND_NAMES[k] + (iv.pair && iv.opIndex < 0 ? " + " + KIND_NAMES[iv.k2] + " (pair)" : ""),
      "start " + fmtNum(iv.start / tpu) + ", end " + fmtNum(iv.end / tpu) + " " + (p.tl.unit || ""),
      "waited on: " + waitedOn(p.tl, d, iv, h.i)];
    return lines.join("\n");
  }

  function attachInteraction(p) {
    const c = p.canvas, tip = document.getElementById("tip");
    let drag = null;
    c.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const rect = c.getBoundingClientRect(), w = rect.width - GUT_L - GUT_R;
      const frac = Math.min(1, Math.max(0, (ev.clientX - rect.left - GUT_L) / w));
      const at = view.t0 + frac * (view.t1 - view.t0), z = ev.deltaY > 0 ? 1.25 : 0.8;
      const span = Math.min(view.full * 1.05, Math.max(view.full / 1e5, (view.t1 - view.t0) * z));
      view.t0 = at - frac * span; view.t1 = view.t0 + span;
      redrawAll();
    }, { passive: false });
    c.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, t0: view.t0, t1: view.t1 }; c.style.cursor = "grabbing"; });
    window.addEventListener("mouseup", () => { drag = null; c.style.cursor = "grab"; });
    c.addEventListener("mousemove", (ev) => {
      if (drag) {
        const w = c.getBoundingClientRect().width - GUT_L - GUT_R, dt = ((ev.clientX - drag.x) / w) * (drag.t1 - drag.t0);
        view.t0 = drag.t0 - dt; view.t1 = drag.t1 - dt; redrawAll(); return;
      }
      const h = hitTest(p, ev);
      if (!h) { tip.style.display = "none"; return; }
      tip.textContent = tipText(p, h);
      tip.style.display = "block";
      tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 4) + "px";
      tip.style.top = ev.clientY + 14 + "px";
    });
    c.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    c.addEventListener("dblclick", () => resetView());
    p.el.querySelector(".tl-head").addEventListener("click", () => select(p.index, false));
  }
  function resetView() {
    view.full = 1;
    for (const p of panels) view.full = Math.max(view.full, tlEnd(p.tl));
    view.t0 = 0; view.t1 = view.full; redrawAll();
  }

  // ---- tables ----
  // Peak activations in rank shares, the JSON's unit (docs/JSON.md): the unit of search's
  // --memory-cap and of this page's memory cap, so both agree on which schedules fit.
  const rankShares = (r) => r.peak_activations.max;
  function resultColumns(rows) {
    const unit = rows.length ? rows[0].time_unit : "";
    const cols = [
      { key: "schedule", label: "schedule" },
      { key: "pp", label: "P" }, { key: "microbatches", label: "M" },
      { key: "makespan", label: "makespan (" + unit + ")" },
      { key: "bubble.max", label: "bubble max (" + unit + ")" }, { key: "bubble.ratio", label: "bubble ratio" },
      { key: "published_bubble", label: "published bubble (" + unit + ")" },
      { key: "exposed_comm.max", label: "exposed comm (" + unit + ")" },
      { key: "peak_activations.max", label: "peak act. (rank shares)", fn: rankShares },
      { key: "throughput", label: "mb / " + unit },
    ];
    if (rows.some((r) => r.step_time !== undefined)) {
      cols.push({ key: "step_time", label: "step (s)" }, { key: "tokens_per_second", label: "tokens/s" },
        { key: "mfu", label: "MFU" }, { key: "peak_memory_bytes.max", label: "peak mem (GB)", scale: 1e-9 });
    }
    return cols;
  }
  function makeTable(cols, rows, opts) {
    const tbody = $("tbody");
    const thead = $("thead", {}, $("tr", {}, ...cols.map((c, ci) => $("th", { dataset: { col: ci } }, c.label))));
    const table = $("table", { class: "results", id: opts.id }, thead, tbody);
    let sortCol = -1, dir = 1;
    const value = (row, c) => (c.fn ? c.fn(row) : get(row, c.key));
    function fill() {
      tbody.textContent = "";
      const order = opts.indices ? opts.indices.slice() : rows.map((_, i) => i);
      if (sortCol >= 0) {
        const c = cols[sortCol];
        order.sort((a, b) => {
          const va = value(rows[a], c), vb = value(rows[b], c);
          if (va === vb) return a - b;
          if (va === null || va === undefined) return 1;
          if (vb === null || vb === undefined) return -1;
          return (va < vb ? -1 : 1) * dir;
        });
      }
      for (const i of order) {
        const row = rows[i];
        const tr = $("tr", { dataset: { row: i } }, ...cols.map((c) => {
          const v = value(row, c);
          const shown = c.fmt ? c.fmt(v) : Array.isArray(v) ? v.map((x) => fmtNum(x)).join(" ")
            : c.scale && typeof v === "number" ? fmtNum(v * c.scale, 3) : fmtNum(v);
          const td = $("td", { dataset: { key: c.key }, class: typeof v === "string" ? "text" : "" }, shown);
          if (v !== undefined && v !== null) td.dataset.value = Array.isArray(v) ? JSON.stringify(v) : String(v);
          return td;
        }));
        if (opts.rowClass) { const cl = opts.rowClass(row); if (cl) tr.className = cl; }
        if (opts.rowTitle) { const t = opts.rowTitle(row); if (t) tr.title = t; }
        if (opts.onRow) tr.addEventListener("click", () => opts.onRow(i));
        if (i === selected && opts.selectable) tr.classList.add("selected");
        tbody.append(tr);
      }
    }
    thead.addEventListener("click", (ev) => {
      const th = ev.target.closest("th"); if (!th) return;
      const ci = Number(th.dataset.col);
      dir = sortCol === ci ? -dir : 1; sortCol = ci;
      thead.querySelectorAll("th").forEach((x) => x.classList.remove("sorted-asc", "sorted-desc"));
      th.classList.add(dir > 0 ? "sorted-asc" : "sorted-desc");
      fill();
    });
    fill();
    return table;
  }
  function select(i, scroll) {
    selected = i;
    document.querySelectorAll("#results tbody tr").forEach((tr) => tr.classList.toggle("selected", Number(tr.dataset.row) === i));
    for (const p of panels) p.el.classList.toggle("selected", p.index === i);
    const p = panels.find((x) => x.index === i);
    if (scroll && p) p.el.scrollIntoView({ behavior: "smooth", block: "nearest" });
  }

  // ---- sections ----
  function legend() {
    return $("div", { class: "legend" },
      ...[["F", "--F"], ["B / I (backward)", "--B"], ["W (weight-grad)", "--W"], ["F&B pair", "--pair"], ["communication", "--comm"], ["memory", "--mem"]]
        .map(([t, v]) => $("span", { style: "--c: var(" + v + ")" }, t)));
  }
  function renderResults(root) {
    const res = DATA.results || { results: [], skipped: [] };
    const rows = res.results || [];
    const cap = state.cap > 0 ? state.cap : 0;
    if (DATA.results) root.append($("h2", {}, "Schedules"), $("div", { class: "wide" }, makeTable(resultColumns(rows), rows, {
      id: "results", selectable: true, onRow: (i) => select(i, true),
      rowClass: (r) => (cap && rankShares(r) > cap + 1e-9 ? "over-cap" : ""),
    })));
    if (cap) {
      const over = rows.filter((r) => rankShares(r) > cap + 1e-9).map((r) => r.schedule);
      root.append($("p", { class: "note" }, "memory cap " + cap + " rank shares of activations per rank (as search --memory-cap): " +
        (over.length ? "over it: " + over.join(", ") : "every schedule fits")));
    }
    for (const s of res.skipped || []) root.append($("p", { class: "note" }, "skipped " + s.schedule + ": " + s.reason));
    if (!(DATA.timelines || []).length) return;
    root.append($("h2", {}, DATA.kind === "validate" ? "Timelines: each measured over its prediction" : "Timelines"), legend(),
      $("p", { class: "note noprint" }, "wheel: zoom, drag: pan, double-click: reset; hover an op for its details; click a table row or a title to select"));
    panels.length = 0;
    DATA.timelines.forEach((tl, i) => {
      const ri = tl.row === undefined ? i : tl.row;
      const row = rows[ri];
      if (tl.omitted) { root.append(omittedPanel(tl, i, row)); return; }
      const canvas = $("canvas", { "aria-label": "timeline of " + tl.name });
      const head = $("div", { class: "tl-head" }, $("b", {}, tl.name),
        row ? $("span", { class: "note" }, "makespan " + fmtNum(row.makespan) + " " + row.time_unit + ", bubble ratio " + fmtNum(row.bubble.ratio, 3)) : null,
        tl.label ? $("span", { class: "note" }, tl.label) : null);
      const el = $("div", { class: "tl", id: "tl-" + i, dataset: { schedule: tl.name } }, head, canvas);
      root.append(el);
      const p = { el, canvas, tl, row, index: ri, visible: !observer };
      panels.push(p);
      attachInteraction(p);
      if (observer) observer.observe(el);
    });
    resetView();
  }
  // A timeline the file does not carry (over the page's budget, src/report/html.cc): simulated
  // on request by the engine, with the inputs of the table above.
  function omittedPanel(tl, i, row) {
    const what = "timeline of " + tl.omitted.toLocaleString("en-US") + " intervals not written into this page (over its budget of 200,000)";
    const el = $("div", { class: "tl", id: "tl-" + i, dataset: { schedule: tl.name } },
      $("div", { class: "tl-head" }, $("b", {}, tl.name), row ? $("span", { class: "note" }, "makespan " + fmtNum(row.makespan) + " " + row.time_unit) : null));
    if (engine.ready && DATA.inputs) {
      el.append($("button", { type: "button", class: "draw", onclick: () => {
        const out = JSON.parse(engine.call(JSON.stringify(Object.assign(engineRequest(shown), { schedules: tl.name }))));
        if (out.error || !out.timelines || !out.timelines.length) { el.append($("p", { class: "note warn" }, "engine: " + (out.error || "no timeline"))); return; }
        DATA.timelines[i] = Object.assign(out.timelines[0], { row: tl.row === undefined ? i : tl.row });
        render();
      } }, "draw it (simulated here)"), $("span", { class: "note" }, " " + what));
    } else {
      el.append($("p", { class: "note" }, what + ": ppsim simulate -s " + tl.name + (DATA.inputs ? " --pp " + shown.pp + " -m " + shown.m : "") + " --html FILE draws it"));
    }
    return el;
  }
  // The scalar fields of an array of objects, nested objects flattened to "a.b" (two levels),
  // arrays of numbers shown joined: the columns of a section given as `objects`.
  function columnsOf(objs) {
    const keys = [];
    const seen = new Set();
    const walk = (o, prefix, depth) => {
      for (const [k, v] of Object.entries(o)) {
        const key = prefix + k;
        if (v !== null && typeof v === "object" && !Array.isArray(v)) { if (depth < 2) walk(v, key + ".", depth + 1); continue; }
        if (Array.isArray(v) && v.some((x) => x !== null && typeof x === "object")) continue;
        if (!seen.has(key)) { seen.add(key); keys.push(key); }
      }
    };
    for (const o of objs) walk(o, "", 0);
    // JSON objects come with sorted keys: the names that identify a row first.
    const first = ["rank", "schedule", "name", "variant", "reason", "count", "pp", "vpp", "microbatches", "step_time_ms",
      "tokens_per_second", "mfu", "peak_memory_gb", "bubble_ratio", "layer", "pass", "stream"];
    const pos = (k) => { const i = first.indexOf(k); return i < 0 ? first.length : i; };
    keys.sort((a, b) => pos(a) - pos(b));
    // One unit per quantity: a value given in two units shows once (ms over ns, GB over bytes).
    const twin = { _ns: "_ms", _bytes: "_gb" };
    const shownKeys = keys.filter((k) => !Object.entries(twin).some(([u, v]) => k.endsWith(u) && keys.includes(k.slice(0, -u.length) + v)));
    return shownKeys.map((k) => ({ key: k, label: humanLabel(k), fmt: humanFormat(k) }));
  }
  // Column names for people: the JSON key's words, its unit suffix as "(unit)".
  const UNITS = [["_per_second", "/s"], ["_ms", "ms"], ["_ns", "ns"], ["_gb", "GB"], ["_bytes", "bytes"], ["_s", "s"], ["_us", "µs"]];
  const NAMES = { pp: "P", vpp: "v", dp: "DP", tp: "TP", ep: "EP", cp: "CP", microbatches: "M", mfu: "MFU", id: "plan id",
    micro_batch_size: "micro-batch size", gpus: "GPUs", example_id: "example plan id", bubble_ratio: "bubble", headroom_gb: "headroom (GB)" };
  function humanLabel(key) {
    const parts = key.split("."), last = parts.pop();
    let name = NAMES[last], unit = "";
    if (!name) {
      name = last;
      for (const [suf, u] of UNITS) if (last.endsWith(suf)) { name = last.slice(0, -suf.length); unit = u; break; }
      name = name.replace(/_/g, " ");
      if (unit === "/s") { name += "/s"; unit = ""; }
    }
    return [...parts, name].join(" ") + (unit ? " (" + unit + ")" : "");
  }
  // Numbers for people: thousands separators, ratios as percents, at most 4 significant digits
  // after the point (the exact value stays in the cell's data-value).
  function humanFormat(key) {
    const pct = /(^|\.)(mfu|bubble_ratio|[a-z_]*_share|error)$/.test(key);
    return (v) => {
      if (typeof v !== "number") return Array.isArray(v) ? v.map((x) => humanFormat(key)(x)).join(" ") : fmtNum(v);
      if (pct && Math.abs(v) <= 1.5) return (v * 100).toLocaleString("en-US", { maximumFractionDigits: 1 }) + "%";
      const a = Math.abs(v), digits = a >= 1000 ? 0 : a >= 100 ? 1 : a >= 1 ? 2 : 4;
      return v.toLocaleString("en-US", { maximumFractionDigits: digits, maximumSignificantDigits: a >= 1000 || a === 0 ? undefined : 4 });
    };
  }
  // One row per distinct row: rows equal but for their id and rank show once (the first).
  function distinctRows(rows) {
    const seen = new Set();
    return rows.map((r, i) => [r, i]).filter(([r]) => {
      const key = JSON.stringify(Object.assign({}, r, { id: undefined, rank: undefined, example_id: undefined }));
      if (seen.has(key)) return false;
      seen.add(key); return true;
    });
  }
  function renderSections(root) {
    for (const sec of DATA.sections || []) {
      root.append($("h2", {}, sec.title));
      if (sec.note) root.append($("p", { class: "note" }, sec.note));
      let cols, rows;
      if (sec.objects) { rows = sec.objects; cols = columnsOf(rows); }
      else {
        cols = sec.columns.map((c) => ({ key: c, label: c }));
        rows = sec.rows.map((r) => Object.fromEntries(sec.columns.map((c, i) => [c, r[i]])));
      }
      if (!rows.length) { root.append($("p", { class: "note" }, "none")); continue; }
      const distinct = sec.objects ? distinctRows(rows) : rows.map((r, i) => [r, i]);
      if (distinct.length < rows.length)
        root.append($("p", { class: "note" }, (rows.length - distinct.length) + " row(s) equal to one above but for the id: shown once"));
      // Override lists (`sets`) go in the row's tooltip, not a column as wide as the page.
      const sets = cols.find((c) => c.key === "sets");
      if (sets) cols = cols.filter((c) => c !== sets);
      root.append($("div", { class: "wide" }, makeTable(cols, rows, { id: sec.id, indices: distinct.map(([, i]) => i),
        rowTitle: sets ? (r) => (r.sets || []).join("\n") : null,
        rowClass: (r) => (sec.out_key && get(r, sec.out_key) ? "out" : "") })));
    }
  }

  // ---- controls, fragment, engine ----
  const state = { family: "", pp: 0, m: 0, times: "", p2p: 0, a2a: -1, cap: 0 };
  function readFragment() {
    const h = location.hash.replace(/^#/, "");
    if (!h) return false;
    for (const part of h.split("&")) {
      if (part === "selftest") { state.selftest = true; continue; }
      const eq = part.indexOf("="); if (eq < 0) continue;
      const k = decodeURIComponent(part.slice(0, eq)), v = decodeURIComponent(part.slice(eq + 1));
      if (k === "family") state.family = v;
      else if (k === "pp") state.pp = Number(v);
      else if (k === "m") state.m = Number(v);
      else if (k === "times") state.times = v;
      else if (k === "p2p") state.p2p = Number(v);
      else if (k === "a2a") state.a2a = Number(v);
      else if (k === "cap") state.cap = Number(v);
      else if (k === "bench") state.bench = v;
      else if (k === "selftest") state.selftest = true;
    }
    return true;
  }
  function writeFragment() {
    const parts = ["family=" + state.family, "pp=" + state.pp, "m=" + state.m, "times=" + state.times];
    if (state.p2p) parts.push("p2p=" + state.p2p);
    if (state.a2a >= 0) parts.push("a2a=" + state.a2a);
    if (state.cap) parts.push("cap=" + state.cap);
    history.replaceState(null, "", "#" + parts.join("&"));
  }
  const engine = { ready: false, call: null, why: "" };
  // The inputs of the data on display (the header describes these, never the controls' values
  // that were not simulated): the file's, then each successful re-simulation's.
  const shown = {};
  const engineRequest = (s) => ({ schedules: s.family || "all", pp: s.pp, m: s.m, times: s.times, p2p_latency: s.p2p, a2a: s.a2a });
  function resimulate() {
    const status = document.getElementById("engine-status");
    if (!engine.ready) return;
    const t0 = performance.now();
    const out = JSON.parse(engine.call(JSON.stringify(engineRequest(state))));
    const ms = performance.now() - t0;
    if (out.error) { status.textContent = "engine: " + out.error + " (the table shows the previous inputs)"; status.className = "note warn"; return; }
    DATA.results = out.results; DATA.timelines = out.timelines;
    Object.assign(shown, state);
    status.textContent = "re-simulated in the page (WebAssembly engine) in " + ms.toFixed(1) + " ms";
    status.className = "note";
    document.body.dataset.resimulated = "1";
    render();
  }
  // #bench=N: N ops (1F1B, P=16, no timeline) simulated by the engine 5 times; the fastest
  // run's milliseconds in #bench (docs/PERFORMANCE.md).
  function bench(n) {
    const P = 16, m = Math.max(1, Math.round(Number(n) / (2 * P)));
    const req = JSON.stringify({ schedules: "1f1b", pp: P, m, times: "F=1,B=2", no_timelines: true });
    let best = Infinity, ops = 2 * P * m, out = null;
    for (let i = 0; i < 5; ++i) {
      const t0 = performance.now();
      out = JSON.parse(engine.call(req));
      best = Math.min(best, performance.now() - t0);
    }
    document.getElementById("main").prepend($("p", { id: "bench", dataset: { ms: String(best), ops: String(ops) } },
      "bench: " + ops + " ops simulated in " + best.toFixed(2) + " ms (best of 5)" + (out.error ? ": " + out.error : "")));
  }
  // #selftest: the page drives its own interaction with synthetic events (hover an op, wheel,
  // select a row and a timeline, sort) and writes what happened to #selftest as JSON, for
  // tools/browser_test.py.
  function selftest() {
    const out = {};
    const p = panels[0];
    if (p) {
      const d = decode(p.tl), iv = d.ranks[0][0], rect = p.canvas.getBoundingClientRect();
      const w = rect.width - GUT_L - GUT_R, span = view.t1 - view.t0;
      const x = rect.left + GUT_L + ((iv.start + iv.end) / 2 - view.t0) / span * w, y = rect.top + AXIS + LANE / 2;
      p.canvas.dispatchEvent(new MouseEvent("mousemove", { clientX: x, clientY: y, bubbles: true }));
      out.tip = document.getElementById("tip").textContent;
      out.hovered = actionName(iv);
      if (d.ranks.length > 1) {  // rank 1's first op waits for rank 0's
        const iv1 = d.ranks[1][0];
        const x1 = rect.left + GUT_L + ((iv1.start + iv1.end) / 2 - view.t0) / span * w;
        p.canvas.dispatchEvent(new MouseEvent("mousemove", { clientX: x1, clientY: y + laneHeight(d), bubbles: true }));
        out.tip1 = document.getElementById("tip").textContent;
      }
      const before = view.t1 - view.t0;
      p.canvas.dispatchEvent(new WheelEvent("wheel", { clientX: x, clientY: y, deltaY: -100, bubbles: true, cancelable: true }));
      out.zoomed = (view.t1 - view.t0) / before;
      p.canvas.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
      out.reset = view.t0 === 0 && view.t1 === view.full;
    }
    const rows = document.querySelectorAll("#results tbody tr");
    if (rows.length > 1) {
      rows[1].click();
      out.row_selects_timeline = panels.filter((q) => q.el.classList.contains("selected")).map((q) => q.tl.name);
      panels[0].el.querySelector(".tl-head").click();
      out.timeline_selects_row = [...document.querySelectorAll("#results tbody tr.selected")].map((tr) => tr.firstChild.textContent);
      const th = document.querySelectorAll("#results thead th")[3];
      th.click(); th.click();  // makespan, descending
      out.sorted_desc = [...document.querySelectorAll("#results tbody tr")].map((tr) => Number(tr.children[3].dataset.value));
    }
    // The memory cap marks the rows over it; with the engine, a control re-simulates and the URL
    // fragment follows.
    const setControl = (id, value) => {
      const e = document.getElementById(id);
      if (!e) return false;
      e.value = String(value);
      e.dispatchEvent(new Event("change", { bubbles: true }));
      return true;
    };
    if (setControl("ctl-cap", 4))
      out.over_cap = [...document.querySelectorAll("#results tbody tr.over-cap")].map((tr) => tr.firstChild.textContent);
    if (engine.ready && setControl("ctl-m", 12)) {
      out.m_after_change = [...document.querySelectorAll('#results td[data-key="microbatches"]')].map((td) => Number(td.dataset.value));
      out.fragment = location.hash;
    }
    document.getElementById("main").prepend($("pre", { id: "selftest" }, JSON.stringify(out)));
  }
  function renderControls(root) {
    if (!DATA.inputs) return;
    const inp = (k, type, cls) => {
      const e = $("input", { type, value: String(state[k]), class: cls || "", id: "ctl-" + k });
      e.addEventListener("change", () => { state[k] = type === "number" ? Number(e.value) : e.value; writeFragment(); resimulate(); if (!engine.ready) render(); });
      return e;
    };
    const fam = $("select", { id: "ctl-family" }, $("option", { value: "all" }, "all"),
      ...(DATA.inputs.families || []).map((f) => $("option", { value: f }, f)));
    fam.value = state.family || "all";
    fam.addEventListener("change", () => { state.family = fam.value; writeFragment(); resimulate(); });
    const box = $("div", { class: "controls" },
      $("label", {}, "family ", fam), $("label", {}, "P ", inp("pp", "number")), $("label", {}, "M ", inp("m", "number")),
      $("label", {}, "times ", inp("times", "text", "times")), $("label", {}, "P2P latency ", inp("p2p", "number")),
      $("label", { title: "-1: off (no overlap model)" }, "all-to-all ", inp("a2a", "number")), $("label", { title: "peak activations per rank in rank shares (a micro-batch of a whole rank's layers is 1, of one of its vpp chunks 1/vpp), as search --memory-cap; 0: none" }, "memory cap (rank shares) ", inp("cap", "number")));
    // Without the engine only the memory cap works (it marks rows): the other controls are hidden.
    if (!engine.ready) for (const e of box.querySelectorAll("input,select")) if (e.id !== "ctl-cap") e.closest("label").hidden = true;
    root.append(box, $("p", { id: "engine-status", class: engine.ready ? "note" : "note warn" },
      engine.ready ? "engine: WebAssembly, re-simulates as the controls change" : (engine.why ||
        "no engine in this file (emscripten was not installed when ppsim was built; apt install emscripten, then bash tools/quickstart.sh)") +
        ": only the memory cap can change; the tables show the data the file was written with"));
  }

  function subtitle() {
    const el = document.getElementById("subtitle");
    if (!el || !DATA.inputs) return;
    const parts = ["P=" + shown.pp, "M=" + shown.m, "times " + shown.times];
    if (shown.p2p) parts.push("P2P latency " + shown.p2p);
    if (shown.a2a >= 0) parts.push("all-to-all " + shown.a2a);
    el.textContent = (shown.family && shown.family !== "all" ? shown.family + ", " : "") + parts.join(", ");
  }
  function render() {
    subtitle();
    const main = document.getElementById("main");
    main.textContent = "";
    renderControls(main);
    renderResults(main);
    renderSections(main);
    if (selected >= 0) select(selected, false);
    // Milliseconds from navigation to the first render (tools/browser_test.py reads it).
    if (!document.body.dataset.loadMs) document.body.dataset.loadMs = String(Math.round(performance.now()));
    document.body.dataset.ready = "1";
    markErrors();
  }

  function init() {
    const root = document.documentElement;
    const saved = (() => { try { return localStorage.getItem("ppsim-theme"); } catch (e) { return null; } })();
    root.dataset.theme = saved || (matchMedia && matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
    document.getElementById("theme").addEventListener("click", () => {
      root.dataset.theme = root.dataset.theme === "dark" ? "light" : "dark";
      try { localStorage.setItem("ppsim-theme", root.dataset.theme); } catch (e) { /* file:// may refuse */ }
      redrawAll();
    });
    if (DATA.inputs) Object.assign(state, {
      family: DATA.inputs.family || "all", pp: DATA.inputs.pp, m: DATA.inputs.m, times: DATA.inputs.times,
      p2p: DATA.inputs.p2p_latency || 0, a2a: DATA.inputs.a2a === undefined ? -1 : DATA.inputs.a2a, cap: 0 });
    Object.assign(shown, state);
    const fromFragment = readFragment();
    window.addEventListener("resize", redrawAll);
    window.addEventListener("hashchange", () => { readFragment(); if (engine.ready) resimulate(); else render(); });
    const boot = window.ppsimEngineBoot;
    if (DATA.inputs && typeof boot === "function") {
      const ready = (call) => {
        engine.ready = true; engine.call = call;
        render();
        if (state.bench) bench(state.bench);
        else if (fromFragment && !state.selftest) resimulate();
        if (state.selftest) selftest();
      };
      const failed = (e) => { engine.why = "the engine failed to start (" + e + ")"; errors.push("engine: " + e); render(); };
      try {
        const r = boot();
        if (typeof r === "function") ready(r); else r.then(ready).catch(failed);
      } catch (e) { failed(e); }
    } else {
      render();
      if (state.selftest) selftest();
      else if (fromFragment && DATA.inputs) {
        const st = document.getElementById("engine-status");
        if (st) st.textContent += "; the URL fragment's values are not simulated (no engine)";
      }
    }
  }
  window.ppsimReport = { data: DATA, errors, state, resimulate: () => resimulate() };
  init();
})();
