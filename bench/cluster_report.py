#!/usr/bin/env python3
"""Table and plot of a cluster benchmark run: reads OUT/cluster.csv and OUT/summary.jsonl (written
by bench/cluster.sh), writes OUT/cluster.md and, with gnuplot, OUT/cluster.png: one panel per
model and link, validation accuracy against training seconds, 1 host and N hosts, both trainers.
usage: bench/cluster_report.py OUT TARGET CPU"""
import csv, json, os, shutil, subprocess, sys

out, target, cpu = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = list(csv.DictReader(open(os.path.join(out, "cluster.csv"))))
summary = [json.loads(l) for l in open(os.path.join(out, "summary.jsonl")) if l.strip()]
key = lambda r: (r["trainer"], r["model"], r["profile"], int(r["hosts"]))


def curve(k):
    return [r for r in rows if key(r) == k]


def to_target(c):
    return next((float(r["train_seconds"]) for r in c if float(r["val_accuracy"]) >= target), None)


lines = [f"target validation accuracy {target}; {cpu} core a host; times are training seconds "
         "(validation excluded); no latency added to the links", "",
         "| trainer | model | link | hosts | time to target s | vs 1 host | ms/step | images/s | MPI share | final val acc |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for s in summary:
    k = key(s)
    c, t = curve(k), to_target(curve(k))
    t1 = to_target(curve(k[:3] + (1,)))
    ratio = f"{t / t1:.2f}x" if t is not None and t1 else "-"
    share = f"{100 * s['mpi_share']:.0f}%" if s["mpi_share"] is not None else "-"
    num = lambda v, f: f.format(v) if v == v else "-"  # NaN: no epoch finished in time
    lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {f'{t:.0f}' if t is not None else 'not reached'} | "
                 f"{ratio} | {num(s['ms_per_step'], '{:.1f}')} | {num(s['images_per_second'], '{:.0f}')} | {share} | "
                 f"{float(c[-1]['val_accuracy']) if c else float('nan'):.4f} |")
open(os.path.join(out, "cluster.md"), "w").write("\n".join(lines) + "\n")

panels = sorted({(r["model"], r["profile"]) for r in rows})
if not shutil.which("gnuplot") or not panels:
    sys.exit(0)
gp = ["set terminal pngcairo size 1500,900 font ',9'", f"set output '{os.path.join(out, 'cluster.png')}'",
      f"set multiplot layout {2 if len(panels) > 3 else 1},{(len(panels) + 1) // 2 if len(panels) > 3 else len(panels)}",
      "set logscale x; set grid; set key right bottom", "set xlabel 'training seconds'; set ylabel 'validation accuracy'",
      f"set yrange [0.6:0.9]"]
for i, (model, profile) in enumerate(panels):
    plots = []
    for j, k in enumerate(sorted({key(r) for r in rows if (r["model"], r["profile"]) == (model, profile)})):
        data = os.path.join(out, f"curve{i}_{j}.dat")
        with open(data, "w") as f:
            f.writelines(f"{r['train_seconds']} {r['val_accuracy']}\n" for r in curve(k))
        color = {("pitrain", True): "#1f77b4", ("pitrain", False): "#ff7f0e", ("peer", True): "#9467bd",
                 ("peer", False): "#2ca02c"}[(k[0], k[3] == 1)]
        plots.append(f"'{data}' using 1:2 with linespoints lc rgb '{color}' dt {1 if k[0] == 'pitrain' else 2} "
                     f"lw 2 title '{k[0]}, {k[3]} host{'s' if k[3] > 1 else ''}'")
    gp += [f"set title '{model}, {profile}'", f"set arrow 1 from graph 0, first {target} to graph 1, first {target} nohead dt 3",
           "plot " + ", ".join(plots)]
gp.append("unset multiplot")
subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True)
for name in os.listdir(out):
    if name.startswith("curve") and name.endswith(".dat"):
        os.remove(os.path.join(out, name))
