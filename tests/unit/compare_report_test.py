#!/usr/bin/env python3
"""bench/compare/report.py on a made-up results folder: every size takes each library's fastest
launch, a target's status follows those, and the target text lists every launch's value of tutti
and of the best peer's library, in launch order.

Usage: compare_report_test.py PATH/TO/report.py   (exit 0 when every check holds, 1 otherwise)
"""
import os
import subprocess
import sys
import tempfile

HEADER = "# Collective: allreduce  nranks: 2  label: test\n"


def table(rows):
    """rows: {size: (time_us, busbw)} -> the harness's table (size count type op root time algbw
    busbw #wrong ...)."""
    lines = [HEADER]
    for size, (us, bw) in sorted(rows.items()):
        lines.append(f"  {size:10d}  {size // 4:12d}  float  sum  -1  {us:9.2f}  {bw:7.2f}  "
                     f"{bw:7.2f}  0  100  0.0\n")
    return "".join(lines)


def main():
    report = sys.argv[1]
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        files = {
            # 8 B latency: tutti 0.40 / 0.17, Open MPI 0.21 / 0.25 -> 0.17 vs 0.21 = 0.81x, missed.
            # 16 MiB: tutti 6.0 / 9.0 GB/s, Open MPI 4.0 / 3.0 -> 9.0 vs 4.0 = 2.25x, met.
            "tutti_shm_np2.txt": {8: (0.40, 0.02), 16 << 20: (2796.20, 6.0)},
            "tutti_shm_np2.launch2.txt": {8: (0.17, 0.05), 16 << 20: (1864.14, 9.0)},
            "ompi_shm_np2.txt": {8: (0.21, 0.04), 16 << 20: (4194.30, 4.0)},
            "ompi_shm_np2.launch2.txt": {8: (0.25, 0.03), 16 << 20: (5592.41, 3.0)},
        }
        for name, rows in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(table(rows))
        r = subprocess.run([sys.executable, report, d], capture_output=True, text=True)
        check(r.returncode == 0, f"report.py exited {r.returncode}: {r.stderr}")
        text = open(os.path.join(d, "report.md")).read() if r.returncode == 0 else ""
        rows = {line.split("|")[1].strip(): line for line in text.splitlines()
                if line.startswith("| allreduce shm np2")}
        lat = rows.get("allreduce shm np2 8 B time <= 0.8x best peer", "")
        check("0.81x (tutti 0.17 us vs Open MPI 0.21 us)" in lat, f"8 B ratio: {lat!r}")
        check("launches: tutti 0.40/0.17 us, Open MPI 0.21/0.25 us" in lat, f"8 B launches: {lat!r}")
        check(lat.rstrip().endswith("| MISSED |"), f"8 B status: {lat!r}")
        bw = rows.get("allreduce shm np2 busbw >= 2x at 16 MiB", "")
        check("2.25x (tutti 9.00 GB/s vs Open MPI 4.00 GB/s)" in bw, f"16 MiB ratio: {bw!r}")
        check("launches: tutti 6.00/9.00 GB/s, Open MPI 4.00/3.00 GB/s" in bw,
              f"16 MiB launches: {bw!r}")
        check(bw.rstrip().endswith("| met |"), f"16 MiB status: {bw!r}")
        # A size no launch measured is not measured, with no launch list.
        none = rows.get("allreduce shm np2 busbw >= 1.3x at 64 KiB", "")
        check("not measured" in none and "launches" not in none, f"64 KiB: {none!r}")

    for f in failures:
        print("FAILED:", f)
    print("ok" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
