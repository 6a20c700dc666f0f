// The runs page: each --log file a coloured curve, on four plots (validation accuracy and loss,
// against the job's seconds and against images trained on), redrawn every 2 s from /api/runs.
#include "pitrain/serve.h"

namespace pitrain {

const char* const kRunsPage = R"page(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pitrain: training runs</title>
<style>
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 980px; padding: 12px; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 8px; }
a { color: #06c; }
#plots { display: flex; flex-wrap: wrap; gap: 12px; }
canvas { width: min(92vw, 460px); aspect-ratio: 460 / 300; border: 1px solid #ccc; }
#legend span { margin-right: 16px; }
.err { color: #a00; }
</style></head>
<body>
<h1>Training runs &middot; <a href="/">play</a></h1>
<div id="legend"></div>
<div id="plots"></div>
<script>
"use strict";
const colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
const plots = [
  { y: "val_accuracy", x: "wall_seconds", title: "validation accuracy vs job seconds" },
  { y: "val_accuracy", x: "images", title: "validation accuracy vs images" },
  { y: "val_loss", x: "wall_seconds", title: "validation loss vs job seconds" },
  { y: "val_loss", x: "images", title: "validation loss vs images" },
];
for (const p of plots) {
  p.canvas = document.createElement("canvas");
  p.canvas.width = 460; p.canvas.height = 300;
  document.getElementById("plots").appendChild(p.canvas);
}
const cumulative = v => { let s = 0; return v.map(x => (s += x)); };
function tickStep(span) {
  const raw = span / 5, p = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map(m => m * p).find(s => s >= raw);
}
const label = v => Math.abs(v) >= 1e6 ? (v / 1e6) + "M" : Math.abs(v) >= 1e3 ? (v / 1e3) + "k" : +v.toPrecision(4) + "";

function draw(p, series) {
  const c = p.canvas.getContext("2d"), W = p.canvas.width, H = p.canvas.height;
  const L = 56, R = 12, T = 24, B = 34;
  c.clearRect(0, 0, W, H);
  c.font = "12px system-ui, sans-serif"; c.fillStyle = "#222";
  c.fillText(p.title, L, 15);
  const pts = series.flatMap(s => s.xs.map((x, i) => [x, s.ys[i]]));
  if (!pts.length) { c.fillText("no epochs yet", L, H / 2); return; }
  let x0 = 0, x1 = Math.max(...pts.map(q => q[0])), y0 = Math.min(...pts.map(q => q[1])), y1 = Math.max(...pts.map(q => q[1]));
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 - y0 < 1e-9) { y0 -= 0.5; y1 += 0.5; }
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R), sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  c.strokeStyle = "#ddd"; c.lineWidth = 1;
  const xs = tickStep(x1 - x0), ys = tickStep(y1 - y0);
  for (let v = Math.ceil(x0 / xs) * xs; v <= x1; v += xs) {
    c.beginPath(); c.moveTo(sx(v), T); c.lineTo(sx(v), H - B); c.stroke();
    c.fillText(label(v), sx(v) - 10, H - B + 14);
  }
  for (let v = Math.ceil(y0 / ys) * ys; v <= y1; v += ys) {
    c.beginPath(); c.moveTo(L, sy(v)); c.lineTo(W - R, sy(v)); c.stroke();
    c.fillText(label(v), 4, sy(v) + 4);
  }
  c.fillText(p.x === "images" ? "images" : "job seconds (validation excluded)", W / 2 - 60, H - 4);
  for (const s of series) {
    c.strokeStyle = c.fillStyle = s.color; c.lineWidth = 2;
    c.beginPath();
    s.xs.forEach((x, i) => (i ? c.lineTo(sx(x), sy(s.ys[i])) : c.moveTo(sx(x), sy(s.ys[i]))));
    c.stroke();
    s.xs.forEach((x, i) => { c.beginPath(); c.arc(sx(x), sy(s.ys[i]), 3, 0, 7); c.fill(); });
  }
}

async function refresh() {
  try {
    const { runs } = await (await fetch("/api/runs")).json();
    const legend = document.getElementById("legend");
    legend.innerHTML = runs.length ? "" : "No runs: start <code>pitrain serve</code> with <code>--log run.csv</code> files.";
    runs.forEach((run, i) => {
      const item = document.createElement("span");
      item.style.color = colors[i % colors.length];
      const n = run.columns ? run.columns.epoch.length : 0;
      item.textContent = "\u25A0 " + run.name + (run.error ? ": " + run.error : " (" + n + " epochs)");
      if (run.error) item.className = "err";
      legend.appendChild(item);
    });
    for (const p of plots) {
      const series = runs.filter(r => r.columns && r.columns[p.x]).map((r, i) => ({
        color: colors[runs.indexOf(r) % colors.length],
        // wall_seconds runs on from row to row; images are each epoch's
        xs: p.x === "images" ? cumulative(r.columns.images) : r.columns[p.x],
        ys: r.columns[p.y],
      }));
      draw(p, series);
    }
  } catch (err) {
    document.getElementById("legend").textContent = "server not answering: " + err.message;
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body></html>
)page";

}  // namespace pitrain
