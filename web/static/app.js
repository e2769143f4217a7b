// fixpoint dashboard: draws the charts from their data-chart attribute
// (JSON the server wrote; nothing here evaluates text from the page).
(function () {
  "use strict";

  function funnel(el) {
    var d = data(el);
    if (!d || !window.uPlot) { return; }
    var labels = (d.labels || []).concat(["never"]);
    var xs = labels.map(function (_, i) { return i; });
    var model = (d.model || []).concat([null]);
    var local = (d.local || []).concat([null]);
    var never = labels.map(function (_, i) { return i === labels.length - 1 ? d.never : null; });
    var bars = uPlot.paths.bars({ size: [0.6, 80], align: 0 });
    var opts = {
      width: Math.max(el.clientWidth - 2, 240), height: 180,
      legend: { show: true, live: false },
      scales: { x: { time: false, range: [-0.6, labels.length - 0.4] } },
      axes: [
        { values: function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) && labels[v] !== undefined ? labels[v] : ""; }); },
          splits: function () { return xs; } },
        {}
      ],
      series: [
        { label: "attempt" },
        { label: "valid (model)", fill: "#8fd0a2", stroke: "#1f7a3d", paths: bars, points: { show: false } },
        { label: "valid (local repair)", fill: "#c6b0ec", stroke: "#5b2aa0", paths: uPlot.paths.bars({ size: [0.6, 80], align: 1 }), points: { show: false } },
        { label: "never", fill: "#f0a69d", stroke: "#a3261b", paths: bars, points: { show: false } }
      ]
    };
    el.textContent = "";
    new uPlot(opts, [xs, model, local, never], el);
  }

  function data(el) {
    try { return JSON.parse(el.getAttribute("data-chart")); } catch (e) { return null; }
  }

  // progress: finished jobs by status over time, summed (a line each).
  function progress(el) {
    var d = data(el);
    if (!d || !d.t || !window.uPlot) { return; }
    var line = function (label, stroke) { return { label: label, stroke: stroke, width: 2, points: { show: false } }; };
    var opts = {
      width: Math.max(el.clientWidth - 2, 240), height: 180,
      legend: { show: true, live: false },
      series: [{}, line("valid", "#1f7a3d"), line("invalid", "#b7791f"), line("failed", "#a3261b"), line("other", "#666")]
    };
    el.textContent = "";
    new uPlot(opts, [d.t, d.valid, d.invalid, d.failed, d.other], el);
  }

  // latency: realtime calls by latency bucket (bars).
  function latency(el) {
    var d = data(el);
    if (!d || !d.labels || !window.uPlot) { return; }
    var labels = d.labels;
    var xs = labels.map(function (_, i) { return i; });
    var opts = {
      width: Math.max(el.clientWidth - 2, 240), height: 180,
      legend: { show: true, live: false },
      scales: { x: { time: false, range: [-0.6, labels.length - 0.4] }, y: { range: function (u, lo, hi) { return [0, Math.max(hi, 1) * 1.1]; } } },
      axes: [
        { values: function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) && labels[v] !== undefined ? labels[v] : ""; }); },
          splits: function () { return xs; } },
        {}
      ],
      series: [
        { label: "latency" },
        { label: "calls", fill: "#9cc3e6", stroke: "#245d8f", paths: uPlot.paths.bars({ size: [0.8, 60] }), points: { show: false } }
      ]
    };
    el.textContent = "";
    new uPlot(opts, [xs, d.calls], el);
  }

  // costs: cost per step stacked by batch. Each series draws the sum of
  // itself and the ones before it, the largest first so that each shows
  // above the next; the legend and the cursor give each its own cost.
  var palette = ["#245d8f", "#1f7a3d", "#b7791f", "#a3261b", "#5b2aa0", "#0f7c80", "#8a5a00", "#c2185b", "#8c95a6"];
  function costs(el) {
    var d = data(el);
    if (!d || !d.t || !window.uPlot) { return; }
    var order = d.labels.map(function (_, i) { return i; }).reverse();
    var series = [{}], cols = [d.t];
    order.forEach(function (i) {
      var color = d.labels[i] === "other batches" ? palette[palette.length - 1] : palette[i % (palette.length - 1)];
      series.push({ label: d.labels[i], fill: color, stroke: color, width: 0, points: { show: false },
        paths: uPlot.paths.bars({ size: [0.85, 60] }),
        value: function (u, v, si, idx) { return idx == null ? "" : "$" + d.own[i][idx].toFixed(4); } });
      cols.push(d.sum[i]);
    });
    var opts = {
      width: Math.max(el.clientWidth - 2, 240), height: 240,
      legend: { show: true, live: true },
      scales: { y: { range: function (u, lo, hi) { return [0, Math.max(hi, 1e-6) * 1.1]; } } },
      axes: [{}, { values: function (u, vals) { return vals.map(function (v) { return "$" + v; }); }, size: 70 }],
      series: series
    };
    el.textContent = "";
    new uPlot(opts, cols, el);
  }

  var charts = { "funnel-chart": funnel, "progress-chart": progress, "latency-chart": latency, "costs-chart": costs };

  function draw(root) {
    var els = (root || document).querySelectorAll("[data-chart]");
    for (var i = 0; i < els.length; i++) {
      var f = charts[els[i].id];
      if (f && !els[i].getAttribute("data-drawn")) { els[i].setAttribute("data-drawn", "1"); f(els[i]); }
    }
  }

  // The job list's "select all" box ticks every job of the page.
  document.addEventListener("change", function (e) {
    var box = e.target;
    if (!box.classList || !box.classList.contains("select-all") || !box.form) { return; }
    var jobs = box.form.querySelectorAll("input[name=job]");
    for (var i = 0; i < jobs.length; i++) { jobs[i].checked = box.checked; }
  });

  // A link to a card folded in a document job's step group (its table's
  // rows) unfolds the group first, so that the card shows.
  function unfoldTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (!el) { return; }
    var opened = false;
    for (var d = el.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) {
      if (!d.open) { d.open = true; opened = true; }
    }
    if (opened) { el.scrollIntoView(); }
  }
  window.addEventListener("hashchange", unfoldTarget);

  document.addEventListener("DOMContentLoaded", function () { draw(document); unfoldTarget(); });
  // Parts of a page (the plots over time) arrive after it, by htmx.
  document.addEventListener("htmx:afterSettle", function (e) { draw(e.target); });
})();
