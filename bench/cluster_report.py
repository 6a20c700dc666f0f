#!/usr/bin/env python3
"""Table and plot of a cluster benchmark run: reads OUT/cluster.csv and OUT/summary.jsonl (written
by bench/cluster.sh), writes OUT/cluster.md (medians over the repeated runs of each configuration)
and, with gnuplot, OUT/cluster.png: one panel per model and link, validation accuracy against
the job's seconds, 1 host and N hosts, both trainers, every run.
usage: bench/cluster_report.py OUT TARGET HOSTS_TEXT LATENCY_US DATA CLASSES
  TARGET   a validation accuracy (0.8), or share:F: F times the final validation accuracy of
           pitrain's 1-host run of the same model and link (the median over the runs)
  CLASSES  the data's number of classes (chance accuracy before the first step); empty: the
           number the runs' banners give"""
import csv, json, math, os, shutil, subprocess, sys
from statistics import median

from time_to_target import first_at_target, time_to_target

out, target_arg, hosts_text, latency_us, data = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
latency = f"{latency_us / 1000:g} ms added to every frame a host sends" if latency_us else "no latency added to the links"
rows = list(csv.DictReader(open(os.path.join(out, "cluster.csv"))))
summary = [json.loads(l) for l in open(os.path.join(out, "summary.jsonl")) if l.strip()]
classes = int(sys.argv[6]) if sys.argv[6] else max((s.get("classes") or 0 for s in summary), default=0) or 10
chance = 1 / classes
# A configuration: trainer, model, link, hosts, sync ("" on one host).
key = lambda r: (r["trainer"], r["model"], r["profile"], int(r["hosts"]), r.get("sync", ""))
run_of = lambda r: int(r["run"])
inf = float("inf")


def curve(k, run):
    return [r for r in rows if key(r) == k and run_of(r) == run]


def points(c):
    return [(float(r["seconds"]), float(r["val_accuracy"])) for r in c]


def good_runs(k):  # not failed (a run stopped by the time limit counts)
    return [s for s in summary if key(s) == k and not s.get("failed")]


def final_accuracies(k):
    return [float(c[-1]["val_accuracy"]) for c in (curve(k, run_of(s)) for s in good_runs(k)) if c]


# The target of a model and link: the accuracy given, or the share of pitrain's 1-host final one
# (NaN where that run has no curve).
share = float(target_arg[len("share:"):]) if target_arg.startswith("share:") else None


def target_of(model, profile):
    if share is None:
        return float(target_arg)
    finals = final_accuracies(("pitrain", model, profile, 1, ""))
    return share * median(finals) if finals else float("nan")


def to_target(c, target):
    if not c or target != target:
        return inf
    return time_to_target(points(c), target, float(c[0]["start_seconds"]), chance)


# Medians over the runs of configuration k. A run that finished no epoch in time (NaN ms/step)
# counts as not reaching the target, and is left out of the other medians; a failed run (not
# stopped by the time limit) is left out of all of them.
def summarise(k):
    every = [s for s in summary if key(s) == k]
    runs = good_runs(k)
    done = [s for s in runs if s["ms_per_step"] == s["ms_per_step"]]  # NaN: no epoch finished in time
    final = final_accuracies(k)
    target = target_of(k[1], k[2])
    curves = [curve(k, run_of(s)) for s in runs]
    pick = lambda name: median(s[name] for s in done) if done and all(s[name] is not None for s in done) else None
    return {"runs": len(runs), "failed": len(every) - len(runs), "empty": len(runs) - len(done),
            "t": median(to_target(c, target) for c in curves) if runs else inf,
            "first": median(first_at_target(points(c), target) for c in curves) if runs else inf,
            "job": median(s["job_seconds"] for s in runs) if runs else None,
            "lost": [x for s in every for x in s.get("lost_launches", [])],
            "ms": pick("ms_per_step"), "ips": pick("images_per_second"), "mpi": pick("mpi_share"),
            "acc": median(final) if final else float("nan")}


configs = list(dict.fromkeys(key(s) for s in summary))
stats = {k: summarise(k) for k in configs}
runs = max(s["runs"] for s in stats.values())
panels = sorted({(k[1], k[2]) for k in configs})
if share is None:
    target_text = f"target validation accuracy {target_arg}"
else:
    target_text = (f"target: {share:g} of pitrain's 1-host final validation accuracy ("
                   + ", ".join(f"{m} {p}: {target_of(m, p):.4f}" for m, p in panels) + ")")
lines = [f"data: {data}; {target_text}; {hosts_text}; times are the job's seconds from mpirun's start to the "
         f"target (pitrain: start-up included, validation excluded; the peer: its epochs only), interpolated "
         f"between validations, and at the first validation at or above it; job: mpirun's start to its exit, "
         f"timed from outside; {'medians of ' + str(runs) + ' runs; ' if runs > 1 else ''}{latency}", "",
         "| trainer | model | link | hosts | sync | time to target s | first validation at target s | vs 1 host "
         "| job s | ms/step | images/s | MPI share | final val acc |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
num = lambda v, f: f.format(v) if v is not None and v == v else "-"  # NaN: no epoch finished in time
for k in configs:
    s, one = stats[k], stats.get(k[:3] + (1, ""))
    clock = " (start-up not counted)" if k[0] == "peer" else ""
    seconds = lambda t: (f"{t:.1f}{clock}" if t != inf else "not reached") if s["runs"] else "failed"
    ratio = f"{s['t'] / one['t']:.2f}x" if s["t"] != inf and one and one["t"] not in (inf, 0) else "-"
    job = num(s["job"], "{:.1f}")
    if k[3] > 1 and s["job"] and one and one["job"]:
        job += f" ({s['job'] / one['job']:.2f}x)"
    share_text = num(None if s["mpi"] is None else 100 * s["mpi"], "{:.0f}%")
    lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4] or '-'} | {seconds(s['t'])} | {seconds(s['first'])} | "
                 f"{ratio} | {job} | {num(s['ms'], '{:.1f}')} | {num(s['ips'], '{:.0f}')} | {share_text} | "
                 f"{num(s['acc'], '{:.4f}')} |")
label = lambda k: f"{k[0]} {k[1]} {k[2]} {k[3]} host{'s' if k[3] > 1 else ''}{', ' + k[4] if k[4] else ''}"
empty = [f"{label(k)}: {s['empty']} of {s['runs']}"
         for k, s in stats.items() if s["empty"] and s["empty"] < s["runs"]]
if empty:
    lines += ["", "Runs that finished no epoch in time (left out of the other medians): " + "; ".join(empty)]
failed = [f"{label(k)}: {s['failed']} of {s['runs'] + s['failed']}"
          for k, s in stats.items() if s["failed"]]
if failed:
    lines += ["", "Failed runs (an error, not the time limit; left out of every median, logs in logs/): " + "; ".join(failed)]
lost = [f"{label(k)}: {len(s['lost'])} ({', '.join(f'{x:.1f} s' for x in s['lost'])})"
        for k, s in stats.items() if s["lost"]]
if lost:
    lines += ["", "Launches that never reached training, started again (their seconds are not in the times above; "
              "logs in logs/*.launchN.log): " + "; ".join(lost)]
lines += ["", "Hosts: hosts.md. Each run's output and pitrain's --log: logs/."]
open(os.path.join(out, "cluster.md"), "w").write("\n".join(lines) + "\n")

panels = sorted({(r["model"], r["profile"]) for r in rows})  # those with a curve to plot
if not panels:
    sys.exit(0)
if not shutil.which("gnuplot"):
    print("cluster_report.py: no gnuplot, so no cluster.png: apt-get install gnuplot-nox", file=sys.stderr)
    sys.exit(0)
accuracies = [float(r["val_accuracy"]) for r in rows] or [chance, 1.0]
low, high = max(0.0, math.floor(20 * min(accuracies) - 0.5) / 20), min(1.0, math.ceil(20 * max(accuracies) + 0.5) / 20)
gp = ["set terminal pngcairo size 1500,900 font ',9'", f"set output '{os.path.join(out, 'cluster.png')}'",
      f"set multiplot layout {2 if len(panels) > 3 else 1},{(len(panels) + 1) // 2 if len(panels) > 3 else len(panels)}",
      "set logscale x; set grid; set key right bottom",
      "set xlabel \"job seconds from mpirun's start (validation excluded)\"; set ylabel 'validation accuracy'",
      f"set yrange [{low}:{high}]"]
colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
for i, (model, profile) in enumerate(panels):
    plots = []
    panel = [k for k in configs if (k[1], k[2]) == (model, profile)]
    for j, (k, run) in enumerate(sorted({(key(r), run_of(r)) for r in rows if (r["model"], r["profile"]) == (model, profile)})):
        name = os.path.join(out, f"curve{i}_{j}.dat")
        with open(name, "w") as f:
            f.writelines(f"{r['seconds']} {r['val_accuracy']}\n" for r in curve(k, run))
        title = f"{k[0]}, {k[3]} host{'s' if k[3] > 1 else ''}{', ' + k[4] if k[4] else ''}"
        plots.append(f"'{name}' using 1:2 with linespoints lc rgb '{colors[panel.index(k) % len(colors)]}' "
                     f"dt {1 if k[0] == 'pitrain' else 2} lw 2 " + (f"title '{title}'" if run == 1 else "notitle"))
    target = target_of(model, profile)
    gp += [f"set title '{model}, {profile}'",
           f"set arrow 1 from graph 0, first {target} to graph 1, first {target} nohead dt 3" if target == target
           else "unset arrow 1", "plot " + ", ".join(plots)]
gp.append("unset multiplot")
subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True)
for name in os.listdir(out):
    if name.startswith("curve") and name.endswith(".dat"):
        os.remove(os.path.join(out, name))
