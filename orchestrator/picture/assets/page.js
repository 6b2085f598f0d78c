// The page's own script: builds the lanes, charts and lists from the JSON the page carries.
// Every text from the trace (item texts, model text, tool input and output, file names) is
// set through textContent or a text node, never parsed as markup; links are made only from
// file: URLs the page was written with. Charts are SVG drawn once; a resize redraws them.
(() => {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";
  const STATES = ["pending", "blocked", "in_progress", "completed", "cancelled"];
  const STATE_WORDS = {
    pending: "pending",
    blocked: "blocked (waits on another item)",
    in_progress: "in progress",
    completed: "completed",
    cancelled: "cancelled",
    holding: "holds an item",
    many: "more than one in progress",
  };
  // A symbol per state, drawn in each stretch wide enough and said in its title and the
  // legend, so no state is told by its colour alone (the fills differ in pattern too).
  const STATE_SYMBOLS = {
    pending: "○",
    blocked: "‖",
    in_progress: "▶",
    completed: "✓",
    cancelled: "✕",
    holding: "▶",
    many: "‼",
  };
  function stateWord(state) {
    const symbol = STATE_SYMBOLS[state];
    return (symbol ? symbol + " " : "") + (STATE_WORDS[state] || state);
  }
  const MARKER_WORDS = {
    reminder: "reminder",
    rejected: "rejected update",
    check: "check",
    blocked: "blocked call",
    cleared: "tool results cleared",
    compacted: "history compacted",
    window: "window learned from a refusal",
  };
  // Each call's details element, and what fills in its input and output when it opens.
  const fillers = new WeakMap();
  // Markers beyond this many are drawn but not put in the tab order.
  const FOCUSABLE_MARKERS = 400;

  function readJSON(id) {
    const node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  // An element with properties and children; strings become text nodes.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function tip(node, text) {
    node.append(svg("title", {}, text));
    return node;
  }

  const number = new Intl.NumberFormat("en-US");
  function count(value) {
    return value === null || value === undefined ? "?" : number.format(value);
  }
  function money(value) {
    if (value === null || value === undefined) return "cost unknown";
    return value < 1 ? "$" + value.toFixed(4) : "$" + value.toFixed(2);
  }
  function seconds(value) {
    if (value === null || value === undefined) return "unknown";
    if (value < 60) return value.toFixed(1) + " s";
    const minutes = Math.floor(value / 60);
    return minutes + " min " + Math.round(value - minutes * 60) + " s";
  }
  function duration(ms) {
    if (ms === null || ms === undefined) return "";
    return ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(1) + " s";
  }
  function oneLine(value, limit) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    const flat = (text === undefined ? "" : text).replace(/\s+/g, " ").trim();
    return flat.length > limit ? flat.slice(0, limit - 1) + "…" : flat;
  }
  function fileLink(uri, label) {
    // Only what the page was written with: a local file, never another scheme.
    if (typeof uri !== "string" || !uri.startsWith("file:///")) return el("span", { text: label });
    return el("a", { href: uri, text: label });
  }

  function facts(pairs) {
    const list = el("dl", { class: "facts" });
    for (const [term, value] of pairs) {
      if (value === null || value === undefined || value === "") continue;
      list.append(el("div", {}, el("dt", { text: term }), el("dd", {}, value)));
    }
    return list;
  }

  function section(id, title, ...children) {
    return el(
      "section",
      { id: id, "aria-labelledby": id + "-title" },
      el("h2", { id: id + "-title", text: title }),
      ...children,
    );
  }

  // --- a lane chart: rows of state segments over columns, with markers -----------------------

  function laneChart(options) {
    const { columns, rows, axisLabel, onPick, label } = options;
    const wrap = el("div", { class: "lanes", role: "group", "aria-label": label });
    const names = el("div", { class: "lane-names" });
    const plot = el("div", { class: "lane-plot" });
    wrap.append(names, plot);
    for (const row of rows) {
      names.append(el("div", { class: "lane-name " + (row.class || ""), title: row.title || row.label, text: row.label }));
    }
    const rowHeight = 18;
    const axisHeight = 18;
    function draw() {
      plot.replaceChildren();
      const width = Math.max(plot.clientWidth || 0, 200);
      const height = axisHeight + rows.length * rowHeight;
      const step = width / Math.max(columns, 1);
      const chart = svg("svg", {
        width: width,
        height: height,
        viewBox: "0 0 " + width + " " + height,
        class: "lane-svg",
        role: "group",
        "aria-label": label,
      });
      const background = svg("rect", { x: 0, y: 0, width: width, height: height, class: "plot-bg" });
      chart.append(background);
      for (const [column, text] of ticks(columns, axisLabel, width)) {
        const x = column * step;
        chart.append(svg("line", { x1: x, x2: x, y1: axisHeight - 4, y2: height, class: "tick" }));
        chart.append(svg("text", { x: x + 2, y: axisHeight - 6, class: "tick-label" }, text));
      }
      let focusable = 0;
      rows.forEach((row, index) => {
        const y = axisHeight + index * rowHeight;
        chart.append(svg("line", { x1: 0, x2: width, y1: y + rowHeight - 0.5, y2: y + rowHeight - 0.5, class: "row-rule" }));
        for (const [state, start, end, note] of row.segments) {
          const rect = svg("rect", {
            x: start * step,
            y: y + 3,
            width: Math.max((end - start) * step, 1),
            height: rowHeight - 6,
            class: "seg st-" + state,
          });
          const said = (STATE_SYMBOLS[state] ? STATE_SYMBOLS[state] + " " : "") + (note || STATE_WORDS[state] || state);
          tip(rect, (row.title || row.label) + ": " + said + ", " + axisLabel(start) + (end - start > 1 ? " to " + axisLabel(end - 1) : ""));
          chart.append(rect);
          if ((end - start) * step >= 16 && STATE_SYMBOLS[state]) {
            chart.append(svg("text", { x: start * step + 3, y: y + rowHeight - 5, class: "seg-symbol sym-" + state, "aria-hidden": "true" }, STATE_SYMBOLS[state]));
          }
        }
        for (const marker of row.markers || []) {
          const x = marker.round * step + step / 2;
          const shape = markerShape(marker, x, y + rowHeight / 2);
          tip(shape, axisLabel(marker.round) + ": " + marker.text);
          if (onPick) {
            shape.addEventListener("click", (event) => { event.stopPropagation(); onPick(marker.round); });
            if (focusable < FOCUSABLE_MARKERS) {
              focusable += 1;
              shape.setAttribute("tabindex", "0");
              shape.setAttribute("role", "button");
              shape.setAttribute("aria-label", axisLabel(marker.round) + ": " + marker.text);
              shape.addEventListener("keydown", (event) => {
                if (event.key === "Enter" || event.key === " ") { event.preventDefault(); onPick(marker.round); }
              });
            }
          }
          chart.append(shape);
        }
      });
      if (onPick) {
        chart.addEventListener("click", (event) => {
          const box = chart.getBoundingClientRect();
          const column = Math.floor((event.clientX - box.left) / step);
          if (column >= 0 && column < columns) onPick(column);
        });
      }
      plot.append(chart);
    }
    return { node: wrap, draw: draw };
  }

  function markerShape(marker, x, y) {
    const kind = "mk mk-" + marker.kind + (marker.ok === true ? " mk-pass" : marker.ok === false ? " mk-fail" : "");
    if (marker.kind === "reminder") {
      return svg("polygon", { points: [x - 5, y + 5, x + 5, y + 5, x, y - 5].join(" "), class: kind });
    }
    if (marker.kind === "rejected" || marker.kind === "blocked") {
      return svg("path", { d: "M" + (x - 4) + " " + (y - 4) + "l8 8m0 -8l-8 8", class: kind });
    }
    return svg("circle", { cx: x, cy: y, r: 4.5, class: kind });
  }

  function ticks(columns, axisLabel, width) {
    const wanted = Math.max(2, Math.floor(width / 90));
    const every = Math.max(1, Math.ceil(columns / wanted));
    const found = [];
    for (let column = 0; column < columns; column += every) found.push([column, axisLabel(column)]);
    return found;
  }

  function legend(items) {
    const list = el("ul", { class: "legend" });
    for (const [cls, word] of items.filter(Boolean)) list.append(el("li", {}, el("span", { class: "swatch " + cls, "aria-hidden": "true" }), word));
    return list;
  }

  // --- one run --------------------------------------------------------------------------------

  function runPage(data, root) {
    const rounds = data.rounds;
    const columns = data.columns;
    const roundLabel = (column) => {
      if (column < 0 || column >= columns) return "";
      const run = data.header.runs > 1 ? "run " + (rounds.run[column] + 1) + " · " : "";
      return run + "round " + rounds.number[column];
    };
    const pager = roundsSection(data, roundLabel);
    const redraw = [];
    root.prepend(
      headerSection(data),
      planSection(data, roundLabel, pager.show, redraw),
      tokensSection(data, roundLabel, pager.show, redraw),
      pager.node,
    );
    const machines = document.getElementById("machines");
    if (machines) machines.append(edgeTables(data.machines));
    if (data.team) root.append(teamSection(data.team, redraw));
    for (const draw of redraw) draw();
    // #round-N (N as in the column box) opens that round with its calls expanded.
    const wanted = /^#round-(\d+)$/.exec(window.location.hash);
    if (wanted) pager.show(Number(wanted[1]) - 1, true);
    else pager.show(null);
    redrawOnResize(redraw);
  }

  function headerSection(data) {
    const h = data.header;
    const usage = h.usage || {};
    const status = h.status + (h.exit_code === null || h.exit_code === undefined ? "" : " · exit " + h.exit_code) + (h.reason ? ": " + h.reason : "");
    const header = el(
      "header",
      { id: "summary" },
      el("h1", {}, "Run ", el("code", { text: h.run_id || "?" })),
      h.task ? el("p", { class: "task", text: h.task }) : null,
      facts([
        ["status", status],
        ["model", h.model + (h.served && h.served.length ? " · served as " + h.served.join(", ") : "")],
        ["rounds", count(h.rounds) + (h.runs > 1 ? " in " + h.runs + " runs" : "")],
        ["tokens in", count(usage.input_tokens)],
        ["tokens out", count(usage.output_tokens)],
        ["cache read", count(usage.cache_read_input_tokens)],
        ["cache write", count(usage.cache_creation_input_tokens)],
        ["cost", money(h.cost)],
        ["wall time", seconds(h.wall_seconds) + (h.runs > 1 ? " summed over " + h.runs + " runs" : "")],
        ["first to last event", h.runs > 1 ? seconds(h.span_seconds) : null],
        ["started", h.started],
        ["sandbox", h.sandbox || "not recorded"],
        ["approval", h.approval || "not recorded"],
        ["context window", h.window ? count(h.window) + " tokens" : null],
        ["shared board", h.shared_board],
        ["agent", h.agent],
        ["trace", fileLink(h.trace_uri, h.trace)],
      ]),
    );
    header.querySelector(".facts dd").classList.add("status-" + (h.status === "done" ? "ok" : "bad"));
    const stop = el("p", { id: "stop", class: data.stop.complete ? "stop ok" : "stop warn", role: "status", text: data.stop.note });
    header.append(stop);
    if (data.skipped && data.skipped.length) {
      header.append(el("p", { class: "stop warn", text: data.skipped.length + " line(s) had fields of a shape this page cannot draw and were left out: line " + data.skipped.slice(0, 10).join(", ") + (data.skipped.length > 10 ? ", …" : "") }));
    }
    return header;
  }

  function planSection(data, roundLabel, show, redraw) {
    const columns = data.columns;
    // On a shared board the lanes hold every agent's items; one in progress is per agent.
    const shared = Boolean(data.header.shared_board);
    const byLane = new Map();
    const general = [];
    for (const marker of data.markers) {
      if (["cleared", "compacted", "window"].includes(marker.kind)) continue;
      if (marker.lane !== null && marker.lane !== undefined) {
        if (!byLane.has(marker.lane)) byLane.set(marker.lane, []);
        byLane.get(marker.lane).push(marker);
      } else general.push(marker);
    }
    const rows = [
      { label: "markers", title: "reminders, blocked calls, done-checks", segments: [], markers: general, class: "lane-meta" },
      shared
        ? { label: "in progress", title: "items in progress, every agent's (the rule is one per agent)", segments: inProgress(data.lanes, columns, false), class: "lane-meta" }
        : { label: "in progress", title: "how many items were in progress: at most one", segments: inProgress(data.lanes, columns, true), class: "lane-meta" },
    ];
    for (const lane of data.lanes) {
      rows.push({
        label: "#" + lane.item + " " + lane.text,
        title: "#" + lane.item + ": " + lane.text,
        segments: lane.segments,
        markers: byLane.get(lane.key) || [],
      });
    }
    const chart = laneChart({ columns: columns, rows: rows, axisLabel: roundLabel, onPick: show, label: "plan items' states per round" });
    redraw.push(chart.draw);
    const body = [];
    if (!data.lanes.length) body.push(el("p", { class: "empty", text: "This run wrote no plan." }));
    body.push(
      chart.node,
      legend([
        ...STATES.map((state) => ["st-" + state, stateWord(state)]),
        ["st-many", stateWord("many")],
        ["mk-reminder", "reminder"],
        ["mk-rejected", "rejected update"],
        ["mk-pass", "check passed"],
        ["mk-fail", "check failed"],
        ["mk-blocked", "blocked call"],
      ]),
      markerList(data.markers, roundLabel, show),
    );
    return section("plan", "The plan over time", ...body);
  }

  // The in-progress row: one segment per stretch with the same number of items in progress.
  function inProgress(lanes, columns, single) {
    const delta = new Int32Array(columns + 1);
    for (const lane of lanes) {
      for (const [state, start, end] of lane.segments) {
        if (state === "in_progress") { delta[start] += 1; delta[Math.min(end, columns)] -= 1; }
      }
    }
    const segments = [];
    let now = 0;
    let since = 0;
    let held = 0;
    for (let column = 0; column <= columns; column += 1) {
      const next = column < columns ? now + delta[column] : -1;
      if (column === columns || next !== held) {
        if (held > 0 && column > since) segments.push([held > 1 && single ? "many" : "in_progress", since, column, held + " in progress"]);
        since = column;
        held = next;
      }
      now = next;
    }
    return segments;
  }

  function markerList(markers, roundLabel, show) {
    const details = el("details", { class: "marker-list" }, el("summary", { text: "Every marker as a list (" + markers.length + ")" }));
    let built = false;
    details.addEventListener("toggle", () => {
      if (built || !details.open) return;
      built = true;
      const list = el("ol");
      for (const marker of markers) {
        list.append(el("li", { class: "mk-row mk-row-" + marker.kind },
          el("button", { type: "button", class: "link", onclick: () => show(marker.round), text: roundLabel(marker.round) }),
          " ",
          el("span", { class: "mk-kind", text: MARKER_WORDS[marker.kind] || marker.kind }),
          ": ",
          el("span", { text: marker.text }),
          el("span", { class: "muted", text: " (trace line " + marker.line + ")" }),
        ));
      }
      details.append(list);
    });
    return details;
  }

  // A round step for an axis: 1, 2, 2.5 or 5 times a power of ten, about `wanted` to the top.
  function niceStep(top, wanted) {
    const raw = Math.max(top, 1e-9) / wanted;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const fraction = raw / power;
    return (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 2.5 ? 2.5 : fraction <= 5 ? 5 : 10) * power;
  }
  function shortCount(value) {
    if (value >= 1e6) return +(value / 1e6).toFixed(2) + "M";
    if (value >= 1e3) return +(value / 1e3).toFixed(1) + "k";
    return String(+value.toFixed(2));
  }
  function shortMoney(value) {
    return value === 0 ? "$0" : value < 0.1 ? "$" + +value.toFixed(4) : "$" + +value.toFixed(2);
  }

  // Three panels over the same rounds, each on its own scale and axis: the tokens of each
  // round; the context's fill as a share of the window (so 1% looks like 1%); the cost so far.
  function tokensSection(data, roundLabel, show, redraw) {
    const rounds = data.rounds;
    const columns = data.columns;
    const plot = el("div", { class: "token-plot" });
    const readout = el("p", { class: "readout", "aria-live": "polite", text: "Point at a round for its numbers; click it for its tool calls." });
    const series = [
      ["input", "t-input", "input"],
      ["cache_read", "t-read", "cache read"],
      ["cache_write", "t-write", "cache write"],
      ["output", "t-output", "output"],
    ];
    const context = data.markers.filter((m) => ["cleared", "compacted", "window"].includes(m.kind));
    // The cost so far after each round; a round without a price adds nothing and is counted.
    const spentSoFar = new Float64Array(columns);
    let spent = 0;
    let unpriced = 0;
    for (let c = 0; c < columns; c += 1) {
      if (rounds.cost[c] === null) unpriced += 1;
      else spent += rounds.cost[c];
      spentSoFar[c] = spent;
    }
    const priced = unpriced < columns;
    function share(column) {
      return rounds.window[column] && rounds.context[column] !== null ? rounds.context[column] / rounds.window[column] : null;
    }
    function describe(column) {
      const part = share(column);
      const fill = part === null ? "no window recorded" : (100 * part).toFixed(part < 0.1 ? 1 : 0) + "% of the " + count(rounds.window[column]) + "-token window";
      return roundLabel(column) + ": " + count(rounds.input[column]) + " in, " + count(rounds.output[column]) + " out, " +
        count(rounds.cache_read[column]) + " cache read, " + count(rounds.cache_write[column]) + " cache write, " +
        money(rounds.cost[column]) + (priced ? " (" + money(spentSoFar[column]) + " so far)" : "") +
        "; context " + count(rounds.context[column]) + " tokens, " + fill;
    }
    function draw() {
      plot.replaceChildren();
      const width = Math.max(plot.clientWidth || 0, 320);
      const gutter = 64;
      const inner = width - gutter - 8;
      const step = inner / Math.max(columns, 1);
      const panels = [
        { key: "tokens", title: "tokens per round", height: 170 },
        { key: "context", title: "context: % of the window", height: 80 },
        { key: "cost", title: priced ? "cost so far" + (unpriced ? " (" + count(unpriced) + " rounds without a price left out)" : "") : "cost: unknown (no price for this model)", height: priced ? 70 : 0 },
      ];
      const gap = 26;
      const axis = 20;
      let y = gap;
      for (const panel of panels) { panel.top = y; y += panel.height + gap; }
      const height = y - gap + axis;
      const chart = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, class: "token-svg", role: "img", "aria-label": "per round: tokens stacked by kind on a token axis; the context's fill as a share of the window; the cost so far" });
      chart.append(svg("rect", { x: 0, y: 0, width: width, height: height, class: "plot-bg" }));
      const x = (column) => gutter + column * step;
      // The rounds' axis: ticks through every panel, labels at the bottom.
      for (const [column, text] of ticks(columns, roundLabel, inner)) {
        chart.append(svg("line", { x1: x(column), x2: x(column), y1: panels[0].top, y2: height - axis, class: "tick" }));
        chart.append(svg("text", { x: x(column) + 2, y: height - 6, class: "tick-label" }, text));
      }
      // One panel's frame: its title, its value axis (ticks from 0 to top) and its baseline.
      function frame(panel, top, label, every) {
        chart.append(svg("text", { x: gutter, y: panel.top - 8, class: "panel-title" }, panel.title));
        every = every || niceStep(top, panel.height > 100 ? 4 : 2);
        for (let value = 0; value <= top * 1.0001; value += every) {
          const at = panel.top + panel.height - (value / top) * panel.height;
          chart.append(svg("line", { x1: gutter, x2: gutter + inner, y1: at, y2: at, class: value === 0 ? "baseline" : "grid" }));
          chart.append(svg("text", { x: gutter - 6, y: at + 3, class: "axis-label" }, label(value)));
        }
      }
      // Tokens: the top is the largest round, rounded up to the axis' step.
      let peak = 1;
      for (let c = 0; c < columns; c += 1) {
        peak = Math.max(peak, rounds.input[c] + rounds.output[c] + rounds.cache_read[c] + rounds.cache_write[c]);
      }
      const tokens = panels[0];
      const tokenStep = Math.max(1, niceStep(peak, 4)); // whole tokens
      const tokenTop = Math.ceil(peak / tokenStep) * tokenStep;
      frame(tokens, tokenTop, shortCount, tokenStep);
      // One path per series: the bars of every round, drawn at once.
      const base = new Float64Array(columns);
      const barWidth = Math.max(step * 0.8, 0.6);
      const scale = tokens.height / tokenTop;
      for (const [key, cls] of series) {
        const parts = [];
        const values = rounds[key];
        for (let c = 0; c < columns; c += 1) {
          const value = values[c];
          if (!value) continue;
          const y0 = tokens.top + tokens.height - base[c] * scale;
          parts.push("M" + x(c).toFixed(2) + " " + y0.toFixed(2) + "h" + barWidth.toFixed(2) + "v" + (-value * scale).toFixed(2) + "h" + (-barWidth).toFixed(2) + "z");
          base[c] += value;
        }
        chart.append(svg("path", { d: parts.join(""), class: "bar " + cls }));
      }
      // Context: 0 to 100% of the window, always; the window is the top line.
      const fill = panels[1];
      frame(fill, 1, (value) => Math.round(value * 100) + "%");
      chart.append(tip(svg("line", { x1: gutter, x2: gutter + inner, y1: fill.top, y2: fill.top, class: "window-line" }), "the context window (100%)"));
      const points = [];
      let fullest = -1;
      for (let c = 0; c < columns; c += 1) {
        const part = share(c);
        if (part === null) continue;
        if (fullest < 0 || part > share(fullest)) fullest = c;
        points.push((x(c) + step / 2).toFixed(2) + "," + (fill.top + fill.height - Math.min(part, 1.05) * fill.height).toFixed(2));
      }
      if (points.length === 1) points.push(points[0]);
      if (points.length) chart.append(svg("polyline", { points: points.join(" "), class: "context-line" }));
      if (fullest >= 0) {
        // The fullest the context got, said in words beside its point.
        const part = share(fullest);
        const px = x(fullest) + step / 2;
        const words = "fullest: " + (100 * part).toFixed(part < 0.1 ? 1 : 0) + "% (" + roundLabel(fullest) + ")";
        const right = px > gutter + inner - 160;
        chart.append(svg("text", { x: right ? px - 4 : px + 4, y: Math.max(fill.top + 10, fill.top + fill.height - Math.min(part, 1) * fill.height - 4), class: "peak-label" + (right ? " end" : "") }, words));
      }
      for (const marker of context) {
        const mx = x(marker.round) + step / 2;
        chart.append(tip(svg("line", { x1: mx, x2: mx, y1: fill.top, y2: fill.top + fill.height, class: "ctx-mark mk-" + marker.kind }), roundLabel(marker.round) + ": " + marker.text));
      }
      // Cost so far: a line from $0 to what the run cost.
      const cost = panels[2];
      if (priced) {
        const costTop = spent > 0 ? Math.ceil(spent / niceStep(spent, 2)) * niceStep(spent, 2) : 1;
        frame(cost, costTop, shortMoney);
        // A step each round: across a round's column, what the run had cost by its end.
        const parts = ["M" + x(0).toFixed(2) + " " + (cost.top + cost.height).toFixed(2)];
        for (let c = 0; c < columns; c += 1) {
          parts.push("V" + (cost.top + cost.height - (spentSoFar[c] / costTop) * cost.height).toFixed(2) + "H" + (x(c) + step).toFixed(2));
        }
        chart.append(svg("path", { d: parts.join(""), class: "cost-line" }));
      } else {
        chart.append(svg("text", { x: gutter, y: cost.top - 8, class: "panel-title muted-title" }, cost.title));
      }
      const overlay = svg("rect", { x: gutter, y: 0, width: inner, height: height, class: "overlay" });
      const column = (event) => Math.min(columns - 1, Math.max(0, Math.floor((event.clientX - chart.getBoundingClientRect().left - gutter) / step)));
      overlay.addEventListener("mousemove", (event) => { if (columns) readout.textContent = describe(column(event)); });
      overlay.addEventListener("click", (event) => { if (columns) show(column(event)); });
      chart.append(overlay);
      plot.append(chart);
    }
    redraw.push(draw);
    const h = data.header;
    return section(
      "tokens",
      "Tokens, cost and context per round",
      plot,
      readout,
      legend([
        ["t-input", "input"],
        ["t-read", "cache read"],
        ["t-write", "cache write"],
        ["t-output", "output"],
        ["context-swatch", "context fill, % of the window"],
        priced ? ["cost-swatch", "cost so far"] : null,
        ["mk-cleared", "tool results cleared"],
        ["mk-compacted", "history compacted"],
        ["mk-window", "window learned from a refusal"],
      ]),
      el("p", { class: "muted", text: "Rounds: " + count(columns) + " · " + (priced && !unpriced ? money(spent) : money(h.cost)) + " · clearings " + context.filter((m) => m.kind === "cleared").length + " · compactions " + context.filter((m) => m.kind === "compacted").length + " · each round's cost is also under it in the list below" }),
    );
  }

  function roundsSection(data, roundLabel) {
    const per = data.chunk;
    const columns = data.columns;
    const pages = Math.max(1, Math.ceil(columns / per));
    const list = el("div", { class: "round-list" });
    const where = el("span", { class: "where", "aria-live": "polite" });
    const input = el("input", { type: "number", min: 1, max: Math.max(columns, 1), value: 1, id: "goto-round", "aria-label": "round (column) number" });
    const chunks = new Map();
    let page = -1;
    const earlier = el("button", { type: "button", text: "◀ earlier", onclick: () => open(page - 1, null, false) });
    const later = el("button", { type: "button", text: "later ▶", onclick: () => open(page + 1, null, false) });
    const go = el("button", { type: "button", text: "go", onclick: () => show(Number(input.value) - 1) });
    input.addEventListener("keydown", (event) => { if (event.key === "Enter") show(Number(input.value) - 1); });
    const nav = el("nav", { class: "pager", "aria-label": "rounds" }, earlier, " ", where, " ", later, " ", el("label", { for: "goto-round", text: "column" }), " ", input, " ", go);

    function chunk(index) {
      if (!chunks.has(index)) chunks.set(index, readJSON("picture-rounds-" + index) || []);
      return chunks.get(index);
    }

    function open(target, focus, expand) {
      if (target < 0 || target >= pages) return;
      if (target !== page) {
        page = target;
        const first = page * per;
        const last = Math.min(columns, first + per);
        where.textContent = columns ? roundLabel(first) + " to " + roundLabel(last - 1) + " (columns " + (first + 1) + "–" + last + " of " + columns + ")" : "no rounds";
        earlier.disabled = page === 0;
        later.disabled = page >= pages - 1;
        const details = chunk(page);
        list.replaceChildren(...details.map((round, offset) => roundArticle(data, first + offset, round, roundLabel)));
      }
      if (focus !== null) {
        const target = document.getElementById("round-" + (focus + 1));
        if (target) {
          if (expand) {
            for (const call of target.querySelectorAll("details.call")) {
              call.open = true;
              // "toggle" comes a task later; the page is whole at once.
              fillers.get(call)();
            }
          }
          target.scrollIntoView({ block: "start" });
          target.querySelector("h3").focus();
        }
      }
    }

    function show(column, expand) {
      if (column === null) { open(0, null, false); return; }
      if (!Number.isFinite(column) || column < 0 || column >= columns) return;
      input.value = column + 1;
      open(Math.floor(column / per), column, expand === true);
    }

    const node = section("rounds", "Tool calls per round", nav, list);
    return { node: node, show: show };
  }

  function roundArticle(data, column, round, roundLabel) {
    const r = data.rounds;
    const share = r.window[column] ? " · context " + Math.round((100 * r.context[column]) / r.window[column]) + "%" : "";
    const article = el(
      "article",
      { class: "round", id: "round-" + (column + 1) },
      el("h3", { tabindex: "-1", text: roundLabel(column) }),
      el("p", { class: "muted", text: count(r.input[column]) + " in · " + count(r.output[column]) + " out · " + count(r.cache_read[column]) + " cache read · " + count(r.cache_write[column]) + " cache write · " + money(r.cost[column]) + share + (round.stop_reason ? " · stop: " + round.stop_reason : "") }),
    );
    const markers = data.markers.filter((m) => m.round === column);
    if (markers.length) {
      article.append(el("ul", { class: "round-markers" }, ...markers.map((m) => el("li", { class: "mk-row mk-row-" + m.kind }, el("span", { class: "mk-kind", text: MARKER_WORDS[m.kind] || m.kind }), ": ", el("span", { text: m.text })))));
    }
    if (round.text) article.append(el("div", { class: "model-text", text: round.text }));
    if (round.calls.length) {
      const calls = el("ol", { class: "calls" });
      for (const call of round.calls) calls.append(el("li", {}, callDetails(call)));
      article.append(calls);
    }
    return article;
  }

  function callDetails(call) {
    const badge = el("span", { class: "badge " + (call.ok ? "ok" : "bad"), text: call.status });
    // A call a PreToolUse hook rewrote shows the input that ran, and says so.
    const rewritten = call.hook ? el("span", { class: "badge bad", text: "rewritten by a hook" }) : "";
    const summary = el("summary", {}, badge, " ", el("span", { class: "tool", text: call.name }), " ", el("span", { class: "muted", text: duration(call.duration_ms) }), " ", rewritten, " ", el("code", { class: "input-line", text: oneLine(call.input, 140) }));
    const details = el("details", { class: "call" }, summary);
    let filled = false;
    // The output enters the document when the call is opened, by a person or by #round-N.
    const fill = () => {
      if (filled || !details.open) return;
      filled = true;
      details.append(
        el("h4", { text: call.hook ? "input that ran (a PreToolUse hook, " + call.hook + ", rewrote it)" : "input" }),
        el("pre", { class: "io", text: JSON.stringify(call.input, null, 2) || "" }),
      );
      if (call.hook) details.append(el("h4", { text: "input the model asked" }), el("pre", { class: "io", text: JSON.stringify(call.asked, null, 2) || "" }));
      details.append(
        el("h4", { text: "output" + (call.output ? " (" + count(call.output.length) + " characters)" : "") }),
        el("pre", { class: "io" + (call.ok ? "" : " io-bad"), text: call.output || "(no output recorded)" }),
      );
      if (call.diff) details.append(el("h4", { text: "diff" }), el("pre", { class: "io diff", text: call.diff }));
    };
    details.addEventListener("toggle", fill);
    fillers.set(details, fill);
    return details;
  }

  function edgeTables(machines) {
    const wrap = el("div", { class: "edge-tables" });
    for (const [name, edges] of Object.entries(machines)) {
      const table = el("table", {}, el("caption", { text: name + " machine: edges this run took" }), el("thead", {}, el("tr", {}, el("th", { text: "from" }), el("th", { text: "trigger" }), el("th", { text: "guard / action" }), el("th", { text: "to" }), el("th", { class: "num", text: "times" }))));
      const body = el("tbody");
      // The guard is named where several edges share a trigger and ends; "?" where the trace
      // does not say which of them fired.
      for (const [src, trigger, dst, which, times] of edges) {
        const guard = which === "?" ? "one of its guards (not in the trace)" : which;
        body.append(el("tr", {}, el("td", { text: src }), el("td", { text: trigger }), el("td", { class: "muted", text: guard }), el("td", { text: dst }), el("td", { class: "num", text: count(times) })));
      }
      if (!edges.length) body.append(el("tr", {}, el("td", { colspan: 5, text: "none" })));
      table.append(body);
      wrap.append(table);
    }
    return wrap;
  }

  // --- a team: its board's log as lanes per item and per agent -----------------------------------

  function teamSection(team, redraw) {
    const body = [facts([["board", team.board], ["log entries", count(team.columns)]])];
    if (team.error) body.push(el("p", { class: "stop warn", text: team.error }));
    if (team.agents.length) {
      const table = el("table", {}, el("caption", { text: "agents" }), el("thead", {}, el("tr", {}, ...["agent", "status", "rounds", "cost", "page", "trace"].map((word) => el("th", { text: word })))));
      const rows = el("tbody");
      for (const agent of team.agents) {
        rows.append(el("tr", {},
          el("td", { text: agent.agent }),
          el("td", { text: agent.status }),
          el("td", { class: "num", text: count(agent.rounds) }),
          el("td", { class: "num", text: money(agent.cost) }),
          el("td", {}, agent.page_uri ? fileLink(agent.page_uri, agent.run_id + ".html") : el("span", { class: "muted", text: "not written" })),
          el("td", {}, fileLink(agent.trace_uri, agent.trace)),
        ));
      }
      table.append(rows);
      body.push(table);
    } else {
      body.push(el("p", { class: "muted", text: "No agent's trace on this board was found beside it or in the state directory." }));
    }
    if (team.columns) {
      const axis = (column) => (team.log[column] ? "log " + team.log[column].seq : "");
      const rows = [];
      for (const lane of team.agent_lanes) rows.push({ label: lane.label, title: "agent " + lane.label, segments: lane.segments, class: "lane-agent" });
      for (const lane of team.item_lanes) rows.push({ label: lane.label, title: lane.title, segments: lane.segments });
      const chart = laneChart({ columns: team.columns, rows: rows, axisLabel: axis, onPick: null, label: "the board's log: each agent's claims and each item's state" });
      redraw.push(chart.draw);
      body.push(chart.node, legend([...STATES.map((s) => ["st-" + s, stateWord(s)]), ["st-holding", STATE_SYMBOLS.holding + " an agent holds an item"]]));
      const log = el("details", { class: "marker-list" }, el("summary", { text: "The board's log (" + team.log.length + " entries)" }));
      const list = el("ol");
      for (const entry of team.log) {
        list.append(el("li", {}, el("code", { text: String(entry.seq) }), " ", el("span", { class: "muted", text: entry.ts || "" }), " ", el("span", { text: (entry.agent || "a person") + ": #" + entry.item + " " + (entry.src || "new") + " → " + entry.dst + " (" + entry.trigger + ")" })));
      }
      log.append(list);
      body.push(log);
    }
    return section("team", "The team", ...body);
  }

  function teamPage(data, root) {
    const redraw = [];
    root.prepend(
      el("header", { id: "summary" }, el("h1", {}, "Board ", el("code", { text: data.team.board })), el("p", { class: "stop ok", role: "status", text: data.team.note })),
      teamSection(data.team, redraw),
    );
    for (const draw of redraw) draw();
    redrawOnResize(redraw);
  }

  // Redraw the charts at the width the page has now: after a resize, and for printing.
  function redrawOnResize(redraw) {
    let pending = 0;
    const all = () => { for (const draw of redraw) draw(); };
    window.addEventListener("resize", () => {
      clearTimeout(pending);
      pending = setTimeout(all, 150);
    });
    window.addEventListener("beforeprint", all);
    window.addEventListener("afterprint", all);
  }

  // --- an eval report ---------------------------------------------------------------------------

  function percent(value) {
    return Math.round(value * 100) + "%";
  }

  function evalPage(data, root) {
    const summary = data.summary;
    const parts = [el("header", { id: "summary" }, el("h1", {}, "Eval ", el("code", { text: data.suite || "?" })), facts([["models", summary.models.join(", ")], ["runs", count(summary.runs)], ["results", fileLink(data.results_uri, data.results)]]))];
    if (summary.scripted) parts.push(el("p", { class: "stop warn", role: "alert", text: summary.warning }));
    const arms = el("table", {}, el("caption", { text: "success rate per arm (95% Wilson interval); rounds, tokens, cost, repeats, rejected and reminders are means per run" }));
    const head = ["arm", "runs", "success", "rate", "95% CI", "rounds", "in tok", "out tok", "cache rd", "cache wr", "cost $", "repeats", "rejected", "reminders"];
    arms.append(el("thead", {}, el("tr", {}, ...head.map((word) => el("th", { text: word })))));
    const armRows = el("tbody");
    for (const [arm, row] of Object.entries(summary.arms)) {
      const mean = row.mean_tokens;
      armRows.append(el("tr", {}, ...[
        arm, count(row.runs), count(row.successes), percent(row.success_rate), percent(row.ci_low) + "–" + percent(row.ci_high),
        row.mean_rounds.toFixed(1), count(Math.round(mean.input_tokens)), count(Math.round(mean.output_tokens)),
        count(Math.round(mean.cache_read_tokens)), count(Math.round(mean.cache_write_tokens)), row.mean_cost_usd.toFixed(4),
        row.mean_repeated_calls.toFixed(2), row.mean_rejected_updates.toFixed(2), row.mean_reminders.toFixed(2),
      ].map((text, index) => el("td", { class: index ? "num" : "", text: text }))));
    }
    arms.append(armRows);
    parts.push(section("arms", "Arms", arms));
    if (summary.differences.length) {
      const table = el("table", {}, el("caption", { text: "difference in success rate (Newcombe 95%)" }), el("thead", {}, el("tr", {}, ...["arm − baseline", "difference", "95% CI"].map((w) => el("th", { text: w })))));
      const rows = el("tbody");
      const signed = (v) => (v >= 0 ? "+" : "") + percent(v);
      for (const row of summary.differences) rows.append(el("tr", {}, el("td", { text: row.arm + " − " + row.baseline }), el("td", { class: "num", text: signed(row.difference) }), el("td", { class: "num", text: signed(row.ci_low) + " to " + signed(row.ci_high) })));
      table.append(rows);
      parts.push(section("differences", "Differences", table));
    }
    const armNames = Object.keys(summary.arms);
    const tasks = el("table", {}, el("caption", { text: "successes per task" }), el("thead", {}, el("tr", {}, el("th", { text: "task" }), ...armNames.map((arm) => el("th", { text: arm })))));
    const taskRows = el("tbody");
    for (const [task, perArm] of Object.entries(summary.tasks)) {
      taskRows.append(el("tr", {}, el("td", { text: task }), ...armNames.map((arm) => el("td", { class: "num", text: perArm[arm].successes + "/" + perArm[arm].runs }))));
    }
    tasks.append(taskRows);
    parts.push(section("tasks", "Tasks", tasks));
    if (typeof data.plot === "string" && data.plot.startsWith("data:image/png;base64,")) {
      parts.push(section("plot", "Plot", el("img", { src: data.plot, alt: "success rate per arm and task with 95% intervals, and mean tokens per run per arm", class: "plot" })));
    }
    root.prepend(...parts);
  }

  // The fills with a pattern (blocked, cancelled), defined once for every chart of the page.
  function patterns() {
    const holder = svg("svg", { width: 0, height: 0, class: "patterns", "aria-hidden": "true", focusable: "false" });
    const defs = svg("defs");
    for (const [state, angle] of [["blocked", -45], ["cancelled", 45]]) {
      const pattern = svg("pattern", { id: "pattern-" + state, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(" + angle + ")" });
      pattern.append(svg("rect", { width: 6, height: 6, class: "pattern-bg-" + state }), svg("rect", { width: 2.5, height: 6, class: "pattern-fg-" + state }));
      defs.append(pattern);
    }
    holder.append(defs);
    return holder;
  }

  const data = readJSON("picture-data");
  const root = document.getElementById("page");
  if (!data || !root) return;
  document.body.prepend(patterns());
  if (data.kind === "run") runPage(data, root);
  else if (data.kind === "team") teamPage(data, root);
  else if (data.kind === "eval") evalPage(data, root);
  document.documentElement.dataset.drawn = "yes";
})();
