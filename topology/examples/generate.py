#!/usr/bin/env python3
"""Writes the example topologies (docs/TOPOLOGY.md). Run from this folder, then canonicalise:
for f in *.json; do ../../build/bin/tutti-topo --file $f --json > $f.tmp && mv $f.tmp $f; done
Values are typical of the machines named, not measured on one."""
import json

def caches(cores, packages, l2, l3):
    return [
        {"level": 1, "type": "data", "size_bytes": 48 << 10, "count": cores},
        {"level": 1, "type": "instruction", "size_bytes": 32 << 10, "count": cores},
        {"level": 2, "type": "unified", "size_bytes": l2, "count": cores},
        {"level": 3, "type": "unified", "size_bytes": l3, "count": packages},
    ]

def cpu_host(name, sockets, cores_per_socket, smt, mem_per_socket, l3, nics, gpus=(), pci_extra=()):
    cores = sockets * cores_per_socket
    pus = cores * smt
    numa = []
    for s in range(sockets):
        cpus = list(range(s * cores_per_socket, (s + 1) * cores_per_socket))
        if smt == 2:
            cpus += [c + cores for c in cpus]
        numa.append({"os_index": s, "package": s, "memory_bytes": mem_per_socket, "cpus": sorted(cpus)})
    pci = []
    for g in gpus:
        pci.append({"bus_id": g["bus_id"], "class": "3D", "vendor_id": 0x10de, "device_id": 0x2330,
                    "numa_node": g["numa_node"]})
    for n in nics:
        if n["bus_id"]:
            pci.append({"bus_id": n["bus_id"], "class": "InfiniBand" if n["type"] == "infiniband" else "Ethernet",
                        "vendor_id": 0x15b3 if n["type"] == "infiniband" else 0x8086,
                        "device_id": 0x1021 if n["type"] == "infiniband" else 0x159b, "numa_node": n["numa_node"]})
    pci += list(pci_extra)
    pci.sort(key=lambda d: d["bus_id"])
    return {"name": name, "cores": cores, "pus": pus,
            "packages": [{"os_index": s, "cores": cores_per_socket, "pus": cores_per_socket * smt} for s in range(sockets)],
            "numa_nodes": numa, "caches": caches(cores, sockets, 2 << 20, l3),
            "gpus": list(gpus), "nics": list(nics), "pci": pci}

def eth(name, bus, numa, gbps):
    return {"name": name, "type": "ethernet", "bus_id": bus, "numa_node": numa, "speed_gbps": gbps}

def dgx_h100(name):
    # 8 H100 SXM, each with 18 NVLink4 links spread over 4 NVSwitch chips (5+4+4+5); 8 ConnectX-7
    # 400 Gbit/s InfiniBand NICs, one per GPU; GPUs 0-3 on socket 0, 4-7 on socket 1.
    gpu_bus = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
               "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]
    nic_bus = ["0000:17:00.0", "0000:29:00.0", "0000:39:00.0", "0000:5c:00.0",
               "0000:99:00.0", "0000:aa:00.0", "0000:b9:00.0", "0000:da:00.0"]
    switches = ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
    gpus = []
    for i, b in enumerate(gpu_bus):
        links = [{"peer_bus_id": s, "kind": "nvlink", "count": c} for s, c in zip(switches, [5, 4, 4, 5])]
        gpus.append({"bus_id": b, "name": "NVIDIA H100 80GB HBM3", "numa_node": i // 4, "cuda_device": i,
                     "pcie_gbps": 64.0, "links": links})
    nics = [{"name": f"mlx5_{i}", "type": "infiniband", "bus_id": b, "numa_node": i // 4, "speed_gbps": 400.0}
            for i, b in enumerate(nic_bus)]
    nics.append(eth("eth0", "0000:c1:00.0", 1, 100.0))
    switch_pci = [{"bus_id": s, "class": "Bridge", "vendor_id": 0x10de, "device_id": 0x22a3, "numa_node": -1}
                  for s in switches]
    return cpu_host(name, 2, 56, 2, 1 << 40, 105 << 20, nics, gpus, switch_pci)

# Ranks whose buffers are in GPU memory reduce and copy with device kernels: float32 sum on an
# H100 at 2791 GB/s, 1.00 of its device-to-device cudaMemcpy (tutti-kernel-bench --backend cuda
# -o sum, 64 MiB; docs/PERFORMANCE.md), instead of the host default of 10 GB/s.
GPU_RATES = {"reduce_gbps": 2790.0, "copy_gbps": 2790.0}

def write(path, hosts, ranks, links=None):
    doc = {"version": 1, "hosts": hosts, "ranks": ranks}
    if links:
        doc["links"] = links
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")

# A 2-socket CPU node: 2 x 32 cores with SMT, one NUMA node per socket; 16 ranks, 8 per socket.
write("cpu-2socket.json",
      [cpu_host("cpu-2s", 2, 32, 2, 256 << 30, 64 << 20, [eth("eth0", "0000:31:00.0", 0, 100.0)])],
      [{"host": 0, "numa_node": r // 8, "gpu": -1, "nic": -1} for r in range(16)])

# One 8-GPU NVLink node (DGX H100-like): 8 ranks, one per GPU, each with its own NIC.
write("dgx-h100-8gpu.json", [dgx_h100("dgx-0")],
      [{"host": 0, "numa_node": g // 4, "gpu": g, "nic": g} for g in range(8)], GPU_RATES)

# 4 hosts over 25 Gbit/s Ethernet (TCP), 4 ranks per host, ranks of a host contiguous. Shows a
# link override: the TCP latency measured on such a cluster.
write("tcp-4host.json",
      [cpu_host(f"node-{h}", 1, 16, 2, 128 << 30, 32 << 20, [eth("eth0", "0000:41:00.0", 0, 25.0)])
       for h in range(4)],
      [{"host": r // 4, "numa_node": 0, "gpu": -1, "nic": 0} for r in range(16)],
      {"tcp": {"latency_us": 25.0, "bandwidth_gbps": 2.8}})

# 2 DGX H100-like hosts over 8 x 400 Gbit/s InfiniBand: 16 ranks, one per GPU.
write("ib-2host-8gpu.json", [dgx_h100("dgx-0"), dgx_h100("dgx-1")],
      [{"host": r // 8, "numa_node": (r % 8) // 4, "gpu": r % 8, "nic": r % 8} for r in range(16)],
      GPU_RATES)
