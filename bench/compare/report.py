#!/usr/bin/env python3
"""Turns bench/compare_peers.sh's result files into report.md (ratio tables, targets) and PNG plots.

Usage: report.py RESULTS_DIR

Input: RESULTS_DIR/<lib>_<transport>_np<N>.txt, each holding one or more nccl-tests-style tables
printed by ../shared/peers/bench_common.h (mpi_coll_perf, gloo_perf, tutti_coll_perf), plus
ceilings.txt and env.txt. With several launches (compare_peers.sh LAUNCHES=N, files
<lib>_<transport>_np<N>.launch<K>.txt) every size takes its fastest launch, for every library,
and each target's text also lists every launch's value of tutti and of the best peer's library.
Output in RESULTS_DIR: report.md, plot_<coll>.png (gnuplot, when installed) and the data files
the plots are drawn from (plots/).

Ratio = best peer's time / tutti's time at the same size, rank count and transport, which equals
tutti's busbw / the best peer's busbw. Above 1 means tutti is faster. The best peer is the fastest
of every peer library and every variant it ran (Gloo's algorithms count separately).
"""
import os
import re
import shutil
import subprocess
import sys

LIBS = {"ompi": "Open MPI", "mpich": "MPICH", "gloo": "Gloo", "tutti": "tutti"}
COLLS = ["allreduce", "allgather", "reduce_scatter", "bcast", "alltoall"]
CONFIGS = [("shm", 2), ("shm", 4), ("tcp", 2), ("tcp", 4)]
KEY_SIZES = [8, 1024, 8192, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]


def canonical(name):
    """Gloo prints its variants (allreduce_ring, broadcast_one_to_all, ...): map to one collective."""
    for c in ("allreduce", "allgather", "alltoall"):
        if name.startswith(c):
            return c
    if name.startswith("broadcast") or name == "bcast":
        return "bcast"
    if name.startswith("reduce_scatter"):
        return "reduce_scatter"
    return name


def parse(path):
    """{variant: {size: (us, busbw, wrong)}} for one result file."""
    tables, cur = {}, None
    with open(path, errors="replace") as f:
        for line in f:
            m = re.match(r"# Collective: (\S+)\s+nranks", line)
            if m:
                cur = tables.setdefault(m.group(1), {})
                continue
            if cur is None or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) >= 9 and fields[0].isdigit():
                try:
                    cur[int(fields[0])] = (float(fields[5]), float(fields[7]), int(fields[8]))
                except ValueError:
                    pass
    return tables


def load_launches(results):
    """{(lib, transport, np): [parse() of launch 1, of launch 2, ...]}: <file>.txt first, then
    <file>.launchK.txt by K. Every result file is read once, here."""
    found = {}
    for fn in os.listdir(results):
        m = re.match(r"(ompi|mpich|gloo|tutti)_(shm|tcp)_np(\d+)(?:\.launch(\d+))?\.txt$", fn)
        if m:
            key = (m.group(1), m.group(2), int(m.group(3)))
            found.setdefault(key, []).append((int(m.group(4) or 1), fn))
    return {key: [parse(os.path.join(results, fn)) for _, fn in sorted(files)]
            for key, files in found.items()}


def load(launches):
    """data[(transport, np)][coll][lib][variant] = {size: (us, busbw, wrong)} from load_launches();
    over several launches of one library, each size's fastest, with the largest #wrong of any
    launch."""
    data = {}
    for (lib, tr, n), runs in sorted(launches.items()):
        for tables in runs:
            for variant, rows in tables.items():
                coll = canonical(variant)
                have = data.setdefault((tr, n), {}).setdefault(coll, {}).setdefault(lib, {})
                merged = have.setdefault(variant, {})
                for size, row in rows.items():
                    old = merged.get(size)
                    if old is None:
                        merged[size] = row
                    else:
                        fast = min(old, row)
                        merged[size] = (fast[0], fast[1], max(old[2], row[2]))
    return data


def best(variants, size):
    """(us, busbw, variant) of the fastest variant at `size`, or None."""
    cands = [(rows[size][0], rows[size][1], v) for v, rows in variants.items() if size in rows]
    return min(cands) if cands else None


def best_peer(libs, size, only=None):
    """(us, busbw, label, lib) of the fastest peer library and variant at `size`, or None."""
    cands = []
    for lib, variants in libs.items():
        if lib == "tutti" or (only and lib != only):
            continue
        b = best(variants, size)
        if b:
            label = LIBS[lib] if len(variants) == 1 else f"{LIBS[lib]} {b[2]}"
            cands.append((b[0], b[1], label, lib))
    return min(cands) if cands else None


def launch_values(launches, lib, tr, n, coll, size, column):
    """One value per launch of `lib` (load_launches() order): the fastest variant of `coll` at
    `size`, as time in us (column 0) or busbw in GB/s (column 1); None for a launch that lacks
    the size."""
    out = []
    for tables in (launches or {}).get((lib, tr, n), []):
        b = best({v: rows for v, rows in tables.items() if canonical(v) == coll}, size)
        out.append(None if b is None else b[column])
    return out


def spread(launches, tr, n, coll, size, peer_lib, column, unit):
    """'; launches: tutti a/b/c <unit>, <peer> x/y/z' when either side ran more than once."""
    t = launch_values(launches, "tutti", tr, n, coll, size, column)
    p = launch_values(launches, peer_lib, tr, n, coll, size, column)
    if len(t) < 2 and len(p) < 2:
        return ""
    def fmt(values):
        return "/".join("-" if v is None else f"{v:.2f}" for v in values)
    return f"; launches: tutti {fmt(t)} {unit}, {LIBS[peer_lib]} {fmt(p)} {unit}"


def wrong_elements(colls, where=""):
    """'lib variant<where>: N wrong elements' for every run of colls (coll -> lib -> variant ->
    rows) whose check found wrong elements."""
    wrong = []
    for coll, libs in colls.items():
        for lib, variants in libs.items():
            for v, rows in variants.items():
                bad = sum(r[2] for r in rows.values())
                if bad:
                    wrong.append(f"{lib} {v}{where}: {bad} wrong elements")
    return wrong


def correctness_line(wrong):
    return "**Correctness:** " + ("every size of every run passed its check (#wrong = 0)."
                                  if not wrong else "FAILURES: " + "; ".join(wrong)) + "\n"


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def ratio_at(data, tr, n, coll, size, only=None):
    """(ratio, tutti (us, busbw), peer (us, busbw, name)) or None when either side is missing."""
    libs = data.get((tr, n), {}).get(coll, {})
    t = best(libs.get("tutti", {}), size)
    p = best_peer(libs, size, only)
    if not t or not p:
        return None
    return (p[0] / t[0] if t[0] > 0 else float("inf")), t, p


def ceilings(results):
    out = {}
    path = os.path.join(results, "ceilings.txt")
    if not os.path.exists(path):
        return out
    for line in open(path):
        m = re.match(r"tcp_bidir .*A<-B\s+([\d.]+) GB/s\s+B<-A\s+([\d.]+) GB/s\s+sum\s+([\d.]+)", line)
        if m:
            out["tcp_bidir_each"] = float(m.group(3)) / 2
        m = re.match(r"tcp_bw .*?([\d.]+) GB/s", line)
        if m:
            out["tcp_bw"] = float(m.group(1))
        m = re.match(r"shm_lat .*median\s+([\d.]+) us", line)
        if m:
            out["shm_lat"] = float(m.group(1))
        m = re.match(r"tcp_lat .*median\s+([\d.]+) us", line)
        if m:
            out["tcp_lat"] = float(m.group(1))
        m = re.match(r"(memcpy|add2|cma)\s.*best\s+([\d.]+) GB/s", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def floors(results):
    """Library-free bounds measured in this run: 'exchange_us' (the smallest 2-rank 8-byte exchange
    through shared memory, tutti-xcore-probe's exchange_ns, over every reading of the run) and
    'tcp_bound' {bytes: GB/s} (tutti-tcp-ceiling: S / the fastest exchange of S bytes each way)."""
    out = {"tcp_bound": {}}
    xcore = os.path.join(results, "xcore.txt")
    if os.path.exists(xcore):
        ex = [float(m.group(1)) for m in re.finditer(r"exchange_ns=([\d.]+)", open(xcore).read())]
        if ex:
            out["exchange_us"] = min(ex) / 1000
    tc = os.path.join(results, "tcp_ceiling.txt")
    if os.path.exists(tc):
        out["tcp_lines"] = [l for l in open(tc).read().splitlines() if l.startswith("tcp_exchange ")]
        for l in out["tcp_lines"]:
            m = re.match(r"tcp_exchange bytes=(\d+) best_us=[\d.]+ busbw_bound_gbps=([\d.]+)", l)
            if m:
                out["tcp_bound"][int(m.group(1))] = float(m.group(2))
    return out


def targets(data, ceil, fl=None, launches=None):
    """The issue's targets: (description, measured text, status). status: 'met', 'MISSED',
    'not measured', or 'unreachable' when a library-free bound measured in the same run shows
    that no library could meet it (the reason is added to the measured text). With `launches`
    (load_launches()) holding several launches, the text ends with every launch's value of tutti and of
    the best peer's library, so that a target met or missed by one launch shows it."""
    rows = []
    fl = fl or {"tcp_bound": {}}

    def bw(desc, tr, n, coll, size, need):
        r = ratio_at(data, tr, n, coll, size)
        if not r:
            rows.append((desc, "-", "not measured"))
            return
        ratio, t, p = r
        text = f"{ratio:.2f}x (tutti {t[1]:.2f} GB/s vs {p[2]} {p[1]:.2f} GB/s)"
        text += spread(launches, tr, n, coll, size, p[3], 1, "GB/s")
        status = "met" if ratio >= need else "MISSED"
        bound = fl["tcp_bound"].get(size) if tr == "tcp" and n == 2 and coll == "allreduce" else None
        if status == "MISSED" and bound and bound < t[1]:
            # tutti itself went faster than the "bound": it was measured in a slow spell.
            text += (f"; the bare TCP exchange measured {bound:.2f} GB/s in this run, below "
                     "tutti's own figure, so it is no bound")
        elif status == "MISSED" and bound and need * p[1] > bound:
            status = "unreachable"
            text += (f"; {need:g}x would be {need * p[1]:.2f} GB/s, above the {bound:.2f} GB/s "
                     f"that a bare TCP exchange of {human(size)} each way reaches (tutti-tcp-ceiling)")
        rows.append((desc, text, status))

    def lat(desc, tr, n, need, only=None):
        r = ratio_at(data, tr, n, "allreduce", 8, only)
        if not r:
            rows.append((desc, "-", "not measured"))
            return
        ratio, t, p = r
        inv = 1 / ratio
        text = f"{inv:.2f}x (tutti {t[0]:.2f} us vs {p[2]} {p[0]:.2f} us)"
        text += spread(launches, tr, n, "allreduce", 8, p[3], 0, "us")
        status = "met" if inv <= need else "MISSED"
        floor = fl.get("exchange_us") if tr == "shm" and n == 2 else None
        if status == "MISSED" and floor and need * p[0] < floor:
            status = "unreachable"
            text += (f"; {need:g}x would be {need * p[0]:.3f} us, below the {floor:.3f} us of a "
                     "bare 8-byte exchange between the two CPUs (tutti-xcore-probe exchange_ns)")
        rows.append((desc, text, status))

    for s in (65536, 1 << 20):
        bw(f"allreduce shm np2 busbw >= 1.3x at {human(s)}", "shm", 2, "allreduce", s, 1.3)
    for s in (16 << 20, 256 << 20):
        bw(f"allreduce shm np2 busbw >= 2x at {human(s)}", "shm", 2, "allreduce", s, 2.0)
    lat("allreduce shm np2 8 B time <= 0.8x best peer", "shm", 2, 0.8)
    for s in (1 << 20, 16 << 20, 256 << 20):
        bw(f"allreduce tcp np2 busbw >= 1.5x at {human(s)}", "tcp", 2, "allreduce", s, 1.5)
    t = best(data.get(("tcp", 2), {}).get("allreduce", {}).get("tutti", {}), 256 << 20)
    each = ceil.get("tcp_bidir_each")
    if t and each:
        rows.append(("allreduce tcp np2 busbw at 256 MiB >= 70% of the two-way TCP ceiling",
                     f"{t[1] / each * 100:.0f}% ({t[1]:.2f} GB/s vs {each:.2f} GB/s each way)",
                     "met" if t[1] >= 0.7 * each else "MISSED"))
    else:
        rows.append(("allreduce tcp np2 busbw at 256 MiB >= 70% of the two-way TCP ceiling", "-",
                     "not measured"))
    lat("allreduce tcp np2 8 B time <= 1x Open MPI tcp", "tcp", 2, 1.0, only="ompi")
    for s in (1 << 20, 16 << 20):
        bw(f"allreduce shm np4 (2 cores) busbw >= 2x at {human(s)}", "shm", 4, "allreduce", s, 2.0)
    lat("allreduce shm np4 (2 cores) 8 B time <= 1x best peer", "shm", 4, 1.0)
    for coll in ("allgather", "reduce_scatter", "bcast", "alltoall"):
        for s in (1 << 20, 64 << 20):
            bw(f"{coll} shm np2 busbw >= 1x at {human(s)}", "shm", 2, coll, s, 1.0)
    return rows


def write_plots(data, results):
    gp = shutil.which("gnuplot")
    pdir = os.path.join(results, "plots")
    os.makedirs(pdir, exist_ok=True)
    made = []
    for coll in COLLS:
        panels = []
        for tr, n in CONFIGS:
            libs = data.get((tr, n), {}).get(coll, {})
            lines = []
            for lib in ("tutti", "ompi", "mpich", "gloo"):
                if lib not in libs:
                    continue
                sizes = sorted({s for rows in libs[lib].values() for s in rows})
                fn = os.path.join(pdir, f"{coll}_{tr}_np{n}_{lib}.dat")
                with open(fn, "w") as f:
                    for s in sizes:
                        b = best(libs[lib], s)
                        if b:
                            f.write(f"{s} {b[1]} {b[0]}\n")
                title = LIBS[lib] + (" (best variant)" if len(libs[lib]) > 1 else "")
                lines.append((fn, title))
            if lines:
                panels.append((f"{coll}, {tr}, {n} ranks", lines))
        if not panels or not gp:
            continue
        png = os.path.join(results, f"plot_{coll}.png")
        script = [
            "set terminal pngcairo size 1400,1000 font ',10'",
            f"set output '{png}'",
            "set multiplot layout 2,2",
            "set logscale x 2", "set format x '%.0b%B'", "set grid",
            "set xlabel 'size (bytes, float32)'", "set ylabel 'busbw (GB/s)'",
            "set key top left", "set style data linespoints",
        ]
        for title, lines in panels:
            script.append(f"set title '{title}'")
            script.append("plot " + ", ".join(f"'{fn}' using 1:2 title '{t}' lw 2" for fn, t in lines))
        script.append("unset multiplot")
        with open(os.path.join(pdir, f"{coll}.gp"), "w") as f:
            f.write("\n".join(script) + "\n")
        r = subprocess.run([gp, os.path.join(pdir, f"{coll}.gp")], capture_output=True, text=True)
        if r.returncode == 0:
            made.append(os.path.basename(png))
        else:
            sys.stderr.write(f"gnuplot failed for {coll}: {r.stderr}\n")
    return made, gp is not None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: report.py RESULTS_DIR")
    results = sys.argv[1]
    launches = load_launches(results)
    data = load(launches)
    ceil = ceilings(results)
    out = []
    env = open(os.path.join(results, "env.txt")).read() if os.path.exists(
        os.path.join(results, "env.txt")) else ""
    out.append("# tutti vs Open MPI, MPICH, Gloo (bench/compare_peers.sh)\n")
    out.append("```\n" + env.strip() + "\n```\n")
    if ceil:
        out.append("Ceilings (../shared/peers ceilings tool, this run): " + ", ".join(
            f"{k} {v:.2f}" + (" us" if k.endswith("lat") else " GB/s") for k, v in sorted(ceil.items())) + "\n")
    xcore = os.path.join(results, "xcore.txt")
    if os.path.exists(xcore):
        out.append("Cross-CPU probe (tutti-xcore-probe) before and after each run; on a VM it drifts "
                   "between fast and slow vCPU placements, and shm numbers follow it. With WAIT_FAST=1 "
                   "(default) a run waits for the fast placement and is repeated (RETRY_SLOW times) "
                   "when the probe after it reads slow; the last attempt is the one reported"
                   + (". Every library was launched several times (LAUNCHES; labels <run>.launchK) "
                      "and each size takes its fastest launch" if any(
                          ".launch" in f for f in os.listdir(results)) else "") + ":\n")
        out.append("```\n" + open(xcore).read().strip() + "\n```\n")
    fl = floors(results)
    if fl.get("tcp_lines"):
        out.append("TCP loopback bound (tutti-tcp-ceiling, this run): the fastest exchange of S bytes "
                   "each way between two pinned processes, over 1, 2 or 4 sockets, several write "
                   "sizes and two send-buffer sizes; S / that time bounds a 2-rank allreduce's "
                   "busbw over TCP from above:\n")
        out.append("```\n" + "\n".join(fl["tcp_lines"]) + "\n```\n")
    out.append("Ratio = best peer time / tutti time (= tutti busbw / best peer busbw): above 1x tutti "
               "is faster. Best peer = fastest library (and variant) at that size, rank count and "
               "transport. Every run checks its results first (#wrong must be 0).\n")
    wrong = []
    for (tr, n), colls in sorted(data.items()):
        wrong += wrong_elements(colls, f" {tr} np{n}")
    out.append(correctness_line(wrong))

    out.append("## Targets\n")
    out.append("| target | measured | status |\n|---|---|---|")
    for d, m, s in targets(data, ceil, fl, launches):
        out.append(f"| {d} | {m} | {s} |")
    out.append("")

    out.append("## Ratios at key sizes (tutti / best peer)\n")
    for coll in COLLS:
        cfgs = [c for c in CONFIGS if coll in data.get(c, {})]
        if not cfgs:
            continue
        out.append(f"### {coll}\n")
        out.append("| size | " + " | ".join(f"{tr} np{n}" for tr, n in cfgs) + " |")
        out.append("|---:|" + "---|" * len(cfgs))
        for s in KEY_SIZES:
            cells, any_ = [], False
            for tr, n in cfgs:
                r = ratio_at(data, tr, n, coll, s)
                if r:
                    any_ = True
                    ratio, t, p = r
                    unit = (f"{t[0]:.2f} vs {p[0]:.2f} us" if s < 65536
                            else f"{t[1]:.2f} vs {p[1]:.2f} GB/s")
                    cells.append(f"**{ratio:.2f}x** ({unit}, {p[2]})")
                else:
                    cells.append("-")
            if any_:
                out.append(f"| {human(s)} | " + " | ".join(cells) + " |")
        out.append("")

    out.append("## Every size\n")
    for coll in COLLS:
        for tr, n in CONFIGS:
            libs = data.get((tr, n), {}).get(coll, {})
            if not libs:
                continue
            names = [l for l in ("tutti", "ompi", "mpich", "gloo") if l in libs]
            out.append(f"### {coll}, {tr}, {n} ranks: time in us (busbw GB/s)\n")
            out.append("| size | " + " | ".join(LIBS[l] for l in names) + " | ratio |")
            out.append("|---:|" + "---:|" * (len(names) + 1))
            sizes = sorted({s for l in names for rows in libs[l].values() for s in rows})
            for s in sizes:
                cells = []
                for l in names:
                    b = best(libs[l], s)
                    cells.append(f"{b[0]:.2f} ({b[1]:.2f})" if b else "-")
                r = ratio_at(data, tr, n, coll, s)
                cells.append(f"{r[0]:.2f}x" if r else "-")
                out.append(f"| {s} | " + " | ".join(cells) + " |")
            out.append("")

    made, have_gp = write_plots(data, results)
    out.append("## Plots\n")
    if made:
        out.extend(f"![{m}]({m})" for m in made)
    else:
        out.append("(no plots: " + ("gnuplot produced none" if have_gp else "gnuplot not installed") + ")")
    with open(os.path.join(results, "report.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"report: {os.path.join(results, 'report.md')}; plots: {', '.join(made) or 'none'}")


if __name__ == "__main__":
    main()
