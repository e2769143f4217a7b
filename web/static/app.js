// fixpoint dashboard: draws the charts from their data-chart attribute
// (JSON the server wrote; nothing here evaluates text from the page).
(function () {
  "use strict";

  function funnel(el) {
    var d;
    try { d = JSON.parse(el.getAttribute("data-chart")); } catch (e) { return; }
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

  function draw(root) {
    var els = (root || document).querySelectorAll("[data-chart]");
    for (var i = 0; i < els.length; i++) {
      if (els[i].id === "funnel-chart") { funnel(els[i]); }
    }
  }

  document.addEventListener("DOMContentLoaded", function () { draw(document); });
})();
