#!/usr/bin/env python3
"""Joins the JSON files of selector_vs_forced.sh into one markdown table per rank count:
out-of-place us per forced algorithm, the automatic run's time, algorithm and prediction, and
auto / best forced ("ok" when <= 1.15), and the range of the cross-CPU probe taken before each
and after each run (tutti-xcore-probe). Usage: selector_table.py OUTDIR NRANKS..."""
import glob
import json
import os
import re
import sys

out, nranks = sys.argv[1], sys.argv[2:]
for n in nranks:
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, f"np{n}_*_*.json"))):
        algo = os.path.basename(path)[len(f"np{n}_"):].rsplit("_", 1)[0]
        for row in json.load(open(path)):
            runs.setdefault(algo, {})[row["size"]] = row
    if "auto" not in runs:
        continue
    forced = sorted(a for a in runs if a != "auto")
    print(f"\n### allreduce, {n} ranks (out-of-place us)\n")
    print("| bytes | " + " | ".join(forced) + " | auto | auto algorithm | predicted us | auto/best | |")
    print("|---:|" + "---:|" * len(forced) + "---:|---|---:|---:|---|")
    worst = 0.0
    for size in sorted(runs["auto"]):
        auto = runs["auto"][size]
        times = {a: runs[a][size]["out_of_place"]["time_us"] for a in forced if size in runs[a]}
        best = min(times, key=times.get)
        ratio = auto["out_of_place"]["time_us"] / times[best]
        worst = max(worst, ratio)
        cells = [f"**{times[a]:.2f}**" if a == best else f"{times[a]:.2f}" for a in forced]
        pred = auto.get("predicted_us")
        print(f"| {size} | " + " | ".join(cells) +
              f" | {auto['out_of_place']['time_us']:.2f} | {auto.get('algorithm') or '-'} | "
              f"{pred if pred is None else f'{pred:.2f}'} | {ratio:.2f} | "
              f"{'ok' if ratio <= 1.15 else 'over 15%'} |")
    print(f"\nworst auto/best: {worst:.2f}")
    probes = []
    for path in sorted(glob.glob(os.path.join(out, f"np{n}_*.xcore"))):
        m = re.search(r"round_trip_ns=(\d+) handoff_gbps=([\d.]+)", open(path).read())
        if m:
            probes.append((int(m.group(1)), float(m.group(2))))
    if probes:
        print(f"\ncross-CPU probe before and after the runs ({len(probes)} readings): round trip "
              f"{min(p[0] for p in probes)}-{max(p[0] for p in probes)} ns, 512 KiB handoff "
              f"{min(p[1] for p in probes):.2f}-{max(p[1] for p in probes):.2f} GB/s")
