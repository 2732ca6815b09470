#!/usr/bin/env python3
"""Turns bench/compare_hosts.sh's result folders into report.md: tutti / best peer across emulated hosts.

Usage: report_hosts.py RESULTS_DIR

Input: RESULTS_DIR/<HxR>-<link>/ (one folder per host layout and link), each holding env.txt and
<lib>_tcp_np<N>[.launchK].txt, the tables of ../shared/peers/bench_common.h (rank 0's lines), read
with bench/compare/report.py's parser: every size takes its fastest launch, for every library.
Output: RESULTS_DIR/report.md with, per folder, the targets of issue 27 (busbw >= 1.5x the best
peer at every size >= 1 MiB; 8 B time <= 1x the best peer's) and every size of every collective.

Ratio = best peer's time / tutti's time (= tutti's busbw / the best peer's busbw): above 1x tutti
is faster. The best peer is the fastest of Open MPI and of every Gloo algorithm at that size.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  (bench/compare/report.py: parse, load_launches, load, best, ...)

COLLS = ["allreduce", "allgather"]
BW_FROM = 1 << 20
BW_NEED = 1.5
LAT_SIZE = 8
LAT_NEED = 1.0


def launch_text(launches, lib, n, coll, size, column):
    vals = report.launch_values(launches, lib, "tcp", n, coll, size, column)
    return "/".join("-" if v is None else f"{v:.2f}" for v in vals)


def folder_report(path):
    """Markdown lines for one <HxR>-<link> folder."""
    launches = report.load_launches(path)
    data = report.load(launches)
    out = [f"## {os.path.basename(path)}\n"]
    env = os.path.join(path, "env.txt")
    if os.path.exists(env):
        out.append("```\n" + open(env).read().strip() + "\n```\n")
    keys = sorted(k for k in data if k[0] == "tcp")
    if not keys:
        out.append("(no results)\n")
        return out, []
    tr, n = keys[0]
    colls = data[(tr, n)]
    wrong = report.wrong_elements(colls)
    out.append(report.correctness_line(wrong))

    # Targets.
    rows = []
    for coll in COLLS:
        libs = colls.get(coll, {})
        if "tutti" not in libs:
            continue
        sizes = sorted({s for rows_ in libs["tutti"].values() for s in rows_})
        if LAT_SIZE in sizes and coll == "allreduce":
            r = report.ratio_at(data, tr, n, coll, LAT_SIZE)
            if r:
                ratio, t, p = r
                inv = 1 / ratio
                rows.append((f"{coll} 8 B time <= {LAT_NEED:g}x best peer",
                             f"{inv:.2f}x (tutti {t[0]:.2f} us vs {p[2]} {p[0]:.2f} us; launches: "
                             f"tutti {launch_text(launches, 'tutti', n, coll, LAT_SIZE, 0)}, "
                             f"{report.LIBS[p[3]]} {launch_text(launches, p[3], n, coll, LAT_SIZE, 0)} us)",
                             "met" if inv <= LAT_NEED else "MISSED"))
        big = [s for s in sizes if s >= BW_FROM]
        ratios = [(s, report.ratio_at(data, tr, n, coll, s)) for s in big]
        ratios = [(s, r) for s, r in ratios if r]
        if ratios:
            worst = min(ratios, key=lambda x: x[1][0])
            bestr = max(ratios, key=lambda x: x[1][0])
            met = sum(1 for _, r in ratios if r[0] >= BW_NEED)
            s, (ratio, t, p) = worst
            rows.append((f"{coll} busbw >= {BW_NEED:g}x best peer at {report.human(BW_FROM)}"
                         f"-{report.human(big[-1])}",
                         f"{met} of {len(ratios)} sizes; lowest {ratio:.2f}x at {report.human(s)} "
                         f"(tutti {t[1]:.2f} vs {p[2]} {p[1]:.2f} GB/s), highest {bestr[1][0]:.2f}x "
                         f"at {report.human(bestr[0])}",
                         "met" if met == len(ratios) else "MISSED"))
    out.append("| target | measured | status |\n|---|---|---|")
    out.extend(f"| {d} | {m} | {s} |" for d, m, s in rows)
    out.append("")

    for coll in COLLS:
        libs = colls.get(coll, {})
        if not libs:
            continue
        names = [l for l in ("tutti", "ompi", "gloo") if l in libs]
        out.append(f"### {coll}, {n} ranks: time in us (busbw GB/s), each size's fastest launch\n")
        out.append("| size | " + " | ".join(report.LIBS[l] for l in names)
                   + " | tutti / best peer |")
        out.append("|---:|" + "---:|" * (len(names) + 1))
        sizes = sorted({s for l in names for rows_ in libs[l].values() for s in rows_})
        for s in sizes:
            cells = []
            for l in names:
                b = report.best(libs[l], s)
                if not b:
                    cells.append("-")
                    continue
                var = f" {b[2]}" if l == "gloo" and len(libs[l]) > 1 else ""
                cells.append(f"{b[0]:.2f} ({b[1]:.3f}){var}")
            r = report.ratio_at(data, tr, n, coll, s)
            cells.append(f"**{r[0]:.2f}x** ({r[2][2]})" if r else "-")
            out.append(f"| {report.human(s)} | " + " | ".join(cells) + " |")
        out.append("")
    return out, rows


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: report_hosts.py RESULTS_DIR")
    results = sys.argv[1]
    folders = sorted(os.path.join(results, d) for d in os.listdir(results)
                     if os.path.isdir(os.path.join(results, d))
                     and os.path.exists(os.path.join(results, d, "env.txt")))
    out = ["# tutti vs Open MPI and Gloo across emulated hosts (bench/compare_hosts.sh)\n",
           "Ratio = best peer time / tutti time (= tutti busbw / best peer busbw): above 1x tutti "
           "is faster. Best peer = the fastest of Open MPI and every Gloo algorithm at that size. "
           "Every size keeps its fastest launch, for every library.\n"]
    summary = []
    for f in folders:
        lines, rows = folder_report(f)
        out.extend(lines)
        summary.extend((os.path.basename(f), d, m, s) for d, m, s in rows)
    out.insert(2, "## Targets\n\n| hosts, link | target | measured | status |\n|---|---|---|---|\n"
               + "\n".join(f"| {c} | {d} | {m} | {s} |" for c, d, m, s in summary) + "\n")
    with open(os.path.join(results, "report.md"), "w") as fh:
        fh.write("\n".join(out) + "\n")
    print(f"report: {os.path.join(results, 'report.md')}")


if __name__ == "__main__":
    main()
