#!/usr/bin/env python3
"""Table and plot of a cluster benchmark run: reads OUT/cluster.csv and OUT/summary.jsonl (written
by bench/cluster.sh), writes OUT/cluster.md (medians over the repeated runs of each configuration)
and, with gnuplot, OUT/cluster.png: one panel per model and link, validation accuracy against
the job's seconds, 1 host and N hosts, both trainers, every run.
usage: bench/cluster_report.py OUT TARGET HOSTS_TEXT LATENCY_US DATA CLASSES"""
import csv, json, os, shutil, subprocess, sys
from statistics import median

from time_to_target import time_to_target

out, target, hosts_text, latency_us, data = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
chance = 1 / int(sys.argv[6])
latency = f"{latency_us / 1000:g} ms added to every frame a host sends" if latency_us else "no latency added to the links"
rows = list(csv.DictReader(open(os.path.join(out, "cluster.csv"))))
summary = [json.loads(l) for l in open(os.path.join(out, "summary.jsonl")) if l.strip()]
key = lambda r: (r["trainer"], r["model"], r["profile"], int(r["hosts"]))
run_of = lambda r: int(r["run"])


def curve(k, run):
    return [r for r in rows if key(r) == k and run_of(r) == run]


def to_target(c):
    if not c:
        return float("inf")
    points = [(float(r["seconds"]), float(r["val_accuracy"])) for r in c]
    return time_to_target(points, target, float(c[0]["start_seconds"]), chance)


# Medians over the runs of configuration k. A run that finished no epoch in time (NaN ms/step)
# counts as not reaching the target, and is left out of the other medians; a failed run (not
# stopped by the time limit) is left out of all of them.
def summarise(k):
    every = [s for s in summary if key(s) == k]
    runs = [s for s in every if not s.get("failed")]
    done = [s for s in runs if s["ms_per_step"] == s["ms_per_step"]]  # NaN: no epoch finished in time
    final = [float(c[-1]["val_accuracy"]) for c in (curve(k, run_of(s)) for s in runs) if c]
    pick = lambda name: median(s[name] for s in done) if done and all(s[name] is not None for s in done) else None
    return {"runs": len(runs), "failed": len(every) - len(runs), "empty": len(runs) - len(done),
            "t": median(to_target(curve(k, run_of(s))) for s in runs) if runs else float("inf"),
            "ms": pick("ms_per_step"), "ips": pick("images_per_second"), "mpi": pick("mpi_share"),
            "acc": median(final) if final else float("nan")}


configs = list(dict.fromkeys(key(s) for s in summary))
stats = {k: summarise(k) for k in configs}
runs = max(s["runs"] for s in stats.values())
lines = [f"data: {data}; target validation accuracy {target}; {hosts_text}; times are the job's seconds to the "
         f"target, interpolated between validations (pitrain's start-up included, validation excluded; the "
         f"peer's start-up not counted); {'medians of ' + str(runs) + ' runs; ' if runs > 1 else ''}{latency}", "",
         "| trainer | model | link | hosts | time to target s | vs 1 host | ms/step | images/s | MPI share | final val acc |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for k in configs:
    s, one = stats[k], stats.get(k[:3] + (1,))
    reached = s["t"] != float("inf")
    ratio = f"{s['t'] / one['t']:.2f}x" if reached and one and one["t"] != float("inf") else "-"
    num = lambda v, f: f.format(v) if v is not None and v == v else "-"  # NaN: no epoch finished in time
    share = num(None if s["mpi"] is None else 100 * s["mpi"], "{:.0f}%")
    time = f"{s['t']:.1f}" if reached else "not reached" if s["runs"] else "failed"
    lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {time} | "
                 f"{ratio} | {num(s['ms'], '{:.1f}')} | {num(s['ips'], '{:.0f}')} | {share} | {s['acc']:.4f} |")
label = lambda k: f"{k[0]} {k[1]} {k[2]} {k[3]} host{'s' if k[3] > 1 else ''}"
empty = [f"{label(k)}: {s['empty']} of {s['runs']}"
         for k, s in stats.items() if s["empty"] and s["empty"] < s["runs"]]
if empty:
    lines += ["", "Runs that finished no epoch in time (left out of the other medians): " + "; ".join(empty)]
failed = [f"{label(k)}: {s['failed']} of {s['runs'] + s['failed']}"
          for k, s in stats.items() if s["failed"]]
if failed:
    lines += ["", "Failed runs (an error, not the time limit; left out of every median, logs in logs/): " + "; ".join(failed)]
open(os.path.join(out, "cluster.md"), "w").write("\n".join(lines) + "\n")

panels = sorted({(r["model"], r["profile"]) for r in rows})
if not shutil.which("gnuplot") or not panels:
    sys.exit(0)
gp = ["set terminal pngcairo size 1500,900 font ',9'", f"set output '{os.path.join(out, 'cluster.png')}'",
      f"set multiplot layout {2 if len(panels) > 3 else 1},{(len(panels) + 1) // 2 if len(panels) > 3 else len(panels)}",
      "set logscale x; set grid; set key right bottom", "set xlabel 'job seconds (validation excluded)'; set ylabel 'validation accuracy'",
      f"set yrange [0.6:0.9]"]
for i, (model, profile) in enumerate(panels):
    plots = []
    for j, (k, run) in enumerate(sorted({(key(r), run_of(r)) for r in rows if (r["model"], r["profile"]) == (model, profile)})):
        data = os.path.join(out, f"curve{i}_{j}.dat")
        with open(data, "w") as f:
            f.writelines(f"{r['seconds']} {r['val_accuracy']}\n" for r in curve(k, run))
        color = {("pitrain", True): "#1f77b4", ("pitrain", False): "#ff7f0e", ("peer", True): "#9467bd",
                 ("peer", False): "#2ca02c"}[(k[0], k[3] == 1)]
        plots.append(f"'{data}' using 1:2 with linespoints lc rgb '{color}' dt {1 if k[0] == 'pitrain' else 2} "
                     + (f"lw 2 title '{k[0]}, {k[3]} host{'s' if k[3] > 1 else ''}'" if run == 1 else "lw 2 notitle"))
    gp += [f"set title '{model}, {profile}'", f"set arrow 1 from graph 0, first {target} to graph 1, first {target} nohead dt 3",
           "plot " + ", ".join(plots)]
gp.append("unset multiplot")
subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True)
for name in os.listdir(out):
    if name.startswith("curve") and name.endswith(".dat"):
        os.remove(os.path.join(out, name))
