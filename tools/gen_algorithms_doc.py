#!/usr/bin/env python3
"""Writes docs/ALGORITHMS.md from the opening comment of every algorithms/<coll>_<name>.cc and
`tutti-sched predict` tables. Usage: tools/gen_algorithms_doc.py [build-dir] (default build)."""
import glob
import subprocess
import sys

ORDER = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "gather",
         "scatter", "barrier"]
# Example machines (topology/examples/) for the crossover section, and the collectives shown.
MACHINES = [("cpu-2socket", "one host, 2 sockets x 32 cores, 16 ranks (8 per socket), shm"),
            ("tcp-4host", "4 hosts x 4 ranks over 25 Gbit/s Ethernet (tcp 25 us), shm inside"),
            ("dgx-h100-8gpu", "one DGX H100-like host, 8 GPUs on NVSwitch, one rank per GPU"),
            ("ib-2host-8gpu", "2 DGX H100-like hosts over 8 x 400 Gbit/s InfiniBand, 16 ranks")]
CROSSOVER_COLLS = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall"]
PREDICT = [("allreduce", "8,1K,64K,1M,16M,256M"), ("allgather", "64K,1M,16M"),
           ("reducescatter", "64K,1M,16M"), ("broadcast", "8,64K,1M,16M"),
           ("reduce", "8,64K,1M,16M"), ("alltoall", "64K,1M,16M")]


def opening_comment(path):
    lines = open(path).read().split("\n")[1:]  # skip the "// File:" line
    text = []
    for line in lines:
        if not line.startswith("//"):
            break
        text.append(line[2:].strip())
    return " ".join(text)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    entries = {}
    for path in sorted(glob.glob("algorithms/*.cc")):
        stem = path.split("/")[-1][:-3]
        coll = stem.split("_")[0]
        if coll in ORDER:
            entries.setdefault(coll, []).append((stem[len(coll) + 1:], opening_comment(path)))
    out = open("docs/ALGORITHMS.md.in").read().rstrip("\n").split("\n")
    out.append("")
    for coll in ORDER:
        out += [f"## {coll}", ""]
        out += [f"- **{name}**: {text}" for name, text in entries.get(coll, [])]
        out.append("")
    out += ["## When each one wins (predicted)", "",
            "`tutti-sched predict` with the default single-host model: shm links with 0.5 µs",
            "latency and 5 GB/s, reductions at 10 GB/s, 8 ranks, float32. Times in µs; the lowest",
            "in each row wins. These are predictions, not measurements.", ""]
    for coll, sizes in PREDICT:
        r = subprocess.run([f"{build}/bin/tutti-sched", "predict", "--coll", coll, "--nranks", "8",
                            "--sizes", sizes], capture_output=True, text=True, check=True)
        out += ["```", r.stdout.strip(), "```", ""]
    out += ["## Crossovers on example machines (predicted)", "",
            "Where the selector's choice changes, 8 B to 256 MiB (doubling), float32 sum, on the",
            "example topologies of `topology/examples/` ([TOPOLOGY.md](TOPOLOGY.md)): each machine",
            "costed as the library costs it there, hierarchical algorithms included. Made with",
            "`build/bin/tutti-sched predict --coll C --topo topology/examples/<machine>.json`,",
            "which also prints every algorithm's predicted time per size; `--link-file F` applies",
            "a link-model file (a calibration of a real machine, say) on top. Predictions, not",
            "measurements: the model's accuracy on this development VM is in",
            "[TOPOLOGY.md](TOPOLOGY.md#checking-the-model-on-your-machine-tutti-perf---validate).", ""]
    for machine, text in MACHINES:
        out += [f"**{machine}**: {text}", ""]
        for coll in CROSSOVER_COLLS:
            r = subprocess.run([f"{build}/bin/tutti-sched", "predict", "--coll", coll, "--topo",
                                f"topology/examples/{machine}.json"],
                               capture_output=True, text=True, check=True)
            line = [l for l in r.stdout.split("\n") if l.startswith("# selector: ")][0]
            out.append(f"- {coll}: {line[len('# selector: '):]}")
        out.append("")
    out += open("docs/ALGORITHMS.tail.md").read().rstrip("\n").split("\n")
    open("docs/ALGORITHMS.md", "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
