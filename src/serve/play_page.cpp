// The play page. Strokes are kept as points and rendered to 28x28 the way Quick Draw's
// numpy_bitmap files were made from its simplified drawings: the drawing scaled (aspect kept)
// so its longer side spans 255 units and centred in a 256-unit square, with 16 units of padding
// a side, drawn with round 16-unit lines, light on black, and the whole 304-unit square scaled
// to 28 pixels (a stroke of 1.5 pixels).
#include "pitrain/serve.h"

namespace pitrain {

const char* const kPlayPage = R"page(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pitrain: draw, the model guesses</title>
<style>
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 880px; padding: 12px; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 8px; }
a { color: #06c; }
#main { display: flex; flex-wrap: wrap; gap: 16px; }
#board { position: relative; width: min(92vw, 420px); }
#pad { width: 100%; aspect-ratio: 1; border: 2px solid #444; border-radius: 6px; background: #fff;
       touch-action: none; cursor: crosshair; display: block; }
#seen { position: absolute; right: 6px; top: 6px; width: 84px; height: 84px; image-rendering: pixelated;
        border: 1px solid #888; background: #000; }
#side { flex: 1; min-width: 240px; }
button { font-size: 1em; padding: 6px 14px; margin: 6px 6px 0 0; }
.guess { margin: 6px 0; }
.bar { height: 14px; background: #eee; border-radius: 3px; }
.bar div { height: 100%; background: #3a7; border-radius: 3px; }
#word { font-size: 1.2em; min-height: 1.5em; margin: 8px 0; }
#classes span { display: inline-block; background: #eef; border-radius: 3px; padding: 1px 6px; margin: 2px; font-size: .9em; }
</style></head>
<body>
<h1>Draw something: the network guesses &middot; <a href="/runs">training curves</a></h1>
<div id="main">
  <div id="board">
    <canvas id="pad" width="560" height="560"></canvas>
    <canvas id="seen" width="28" height="28" title="the 28x28 image the model sees"></canvas>
    <button id="clear">clear</button><button id="newword">new word</button>
  </div>
  <div id="side">
    <div id="word"></div>
    <div id="guesses"><i>draw in the box</i></div>
    <p>The model knows: <span id="classes"></span></p>
  </div>
</div>
<script>
"use strict";
const pad = document.getElementById("pad"), ink = pad.getContext("2d");
const seen = document.getElementById("seen"), seenCtx = seen.getContext("2d");
const side = 28, unit = 256, lineWidth = 16, padding = 16;
let strokes = [], drawing = null, classes = [];
let lastSent = 0, inFlight = false, again = false, timer = null;
let game = null;  // {word, end} while a "new word" round runs
// For scripts and the browser test: the last pixels sent and the answer shown.
window.pitrain = { pixels: null, top: null, requests: 0, busy: false };

function point(e) {
  const r = pad.getBoundingClientRect();
  return [(e.clientX - r.left) * pad.width / r.width, (e.clientY - r.top) * pad.height / r.height];
}
let pointer = null;  // the finger or mouse drawing; a second finger is ignored
pad.addEventListener("pointerdown", e => {
  if (drawing) return;
  pad.setPointerCapture(e.pointerId);
  pointer = e.pointerId;
  drawing = [point(e)];
  strokes.push(drawing);
  paint();
});
pad.addEventListener("pointermove", e => {
  if (!drawing || e.pointerId !== pointer) return;
  drawing.push(point(e));
  paint();
  if (performance.now() - lastSent >= 200) guess();  // at most every 200 ms while drawing
});
function endStroke(e) { if (drawing && e.pointerId === pointer) { drawing = null; guess(); } }
pad.addEventListener("pointerup", endStroke);
pad.addEventListener("pointercancel", endStroke);

function trace(ctx, stroke) {
  ctx.beginPath();
  ctx.moveTo(stroke[0][0], stroke[0][1]);
  if (stroke.length === 1) ctx.lineTo(stroke[0][0] + 0.01, stroke[0][1]);  // a dot
  for (const [x, y] of stroke.slice(1)) ctx.lineTo(x, y);
  ctx.stroke();
}
function paint() {
  ink.fillStyle = "#fff"; ink.fillRect(0, 0, pad.width, pad.height);
  ink.strokeStyle = "#111"; ink.lineWidth = 10; ink.lineCap = ink.lineJoin = "round";
  strokes.forEach(s => trace(ink, s));
}

// The 784 pixels (0-255, light on black) that the model sees.
function bitmap() {
  const xs = strokes.flat().map(p => p[0]), ys = strokes.flat().map(p => p[1]);
  const minX = Math.min(...xs), minY = Math.min(...ys);
  const scale = (unit - 1) / Math.max(Math.max(...xs) - minX, Math.max(...ys) - minY, 1);
  const offX = (unit - (Math.max(...xs) - minX) * scale) / 2, offY = (unit - (Math.max(...ys) - minY) * scale) / 2;
  const small = document.createElement("canvas");
  small.width = small.height = side;
  const ctx = small.getContext("2d");
  ctx.fillStyle = "#000"; ctx.fillRect(0, 0, side, side);
  const total = 2 * padding + lineWidth;
  ctx.scale(side / (unit + total), side / (unit + total));
  ctx.translate(total / 2, total / 2);
  ctx.strokeStyle = "#fff"; ctx.lineWidth = lineWidth; ctx.lineCap = ctx.lineJoin = "round";
  strokes.forEach(s => trace(ctx, s.map(([x, y]) => [(x - minX) * scale + offX, (y - minY) * scale + offY])));
  const rgba = ctx.getImageData(0, 0, side, side).data;
  const pixels = [];
  for (let i = 0; i < rgba.length; i += 4) pixels.push(rgba[i]);
  return pixels;
}
function showSeen(pixels) {
  const img = seenCtx.createImageData(side, side);
  pixels.forEach((v, i) => { img.data.set([v, v, v, 255], 4 * i); });
  seenCtx.putImageData(img, 0, 0);
}

async function guess() {
  if (!strokes.length) return;
  if (inFlight) { again = true; return; }
  inFlight = window.pitrain.busy = true; lastSent = performance.now();
  const pixels = bitmap();
  showSeen(pixels);
  try {
    const res = await fetch("/api/predict", { method: "POST", headers: { "Content-Type": "application/json" },
                                              body: JSON.stringify({ pixels }) });
    const answer = await res.json();
    if (!res.ok) throw new Error(answer.error);
    if (strokes.length) show(answer.top, pixels);
  } catch (err) {
    document.getElementById("guesses").textContent = "no answer: " + err.message;
  }
  inFlight = false;
  if (again) { again = false; guess(); } else window.pitrain.busy = false;
}
function show(top, pixels) {
  window.pitrain.pixels = pixels; window.pitrain.top = top; window.pitrain.requests++;
  const box = document.getElementById("guesses");
  box.innerHTML = "";
  for (const g of top) {
    const row = document.createElement("div");
    row.className = "guess";
    row.innerHTML = '<span class="name"></span> <span class="p"></span><div class="bar"><div></div></div>';
    row.querySelector(".name").textContent = g.class;
    row.querySelector(".p").textContent = (100 * g.p).toFixed(1) + " %";
    row.querySelector(".bar div").style.width = (100 * g.p).toFixed(1) + "%";
    box.appendChild(row);
  }
  if (game && top[0].class === game.word) {
    say("Recognised: " + game.word + " after " + ((performance.now() - game.start) / 1000).toFixed(1) + " s!");
    stopGame();
  }
}

function clearPad() {
  strokes = []; drawing = null; paint();
  seenCtx.fillStyle = "#000"; seenCtx.fillRect(0, 0, side, side);
  document.getElementById("guesses").innerHTML = "<i>draw in the box</i>";
  window.pitrain.top = null; window.pitrain.pixels = null;
}
function say(text) { document.getElementById("word").textContent = text; }
function stopGame() { clearInterval(timer); game = null; }
function newWord() {
  stopGame(); clearPad();
  game = { word: classes[Math.floor(Math.random() * classes.length)], start: performance.now() };
  const tick = () => {
    const left = 20 - (performance.now() - game.start) / 1000;
    if (left > 0) return say("Draw: " + game.word + " (" + Math.ceil(left) + " s)");
    const top = window.pitrain.top;
    say("Time's up: it was " + game.word + (top ? "; the model saw " + top[0].class : ""));
    stopGame();
  };
  tick();
  timer = setInterval(tick, 250);
}
document.getElementById("clear").onclick = clearPad;  // a running round goes on
document.getElementById("newword").onclick = newWord;

fetch("/api/classes").then(r => r.json()).then(j => {
  classes = j.classes;
  const list = document.getElementById("classes");
  for (const c of classes) { const s = document.createElement("span"); s.textContent = c; list.appendChild(s); }
});
clearPad();
</script>
</body></html>
)page";

}  // namespace pitrain
