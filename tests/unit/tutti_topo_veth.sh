#!/bin/sh
# The probe inside a network namespace whose only link is a veth (a container's or an emulated
# host's): no PCI NIC there reports a speed, so the veth is listed with its speed (10 Gbit/s for a
# veth) and the tcp class gets it. Two namespaces of our own hold the veth's ends; both are
# removed on exit. Skipped (77) without root or network namespaces.
# Usage: tutti_topo_veth.sh <tutti-topo>
set -u
topo=$1
ns=tutti-topo-veth-$$
[ "$(id -u)" = 0 ] || { echo "needs root (ip netns)"; exit 77; }
ip netns add "$ns-a" 2>/dev/null || { echo "ip netns add failed: no network namespaces"; exit 77; }
trap 'ip netns del "$ns-a" 2>/dev/null; ip netns del "$ns-b" 2>/dev/null' EXIT INT TERM
ip netns add "$ns-b" || exit 1
ip link add tveth0 netns "$ns-a" type veth peer name tveth1 netns "$ns-b" || exit 1
ip -n "$ns-a" link set tveth0 up && ip -n "$ns-b" link set tveth1 up || exit 1
out=$(ip netns exec "$ns-a" "$topo") || { echo "tutti-topo failed: $out"; exit 1; }
echo "$out" | grep NIC
echo "$out" | grep -q "NIC tveth0 ethernet .*10 Gbit/s" || { echo "FAIL: no 10 Gbit/s tveth0 NIC"; exit 1; }
sel=$(ip netns exec "$ns-a" "$topo" --select allreduce --nranks 2 --sizes 8:8) || exit 1
echo "$sel" | head -1
echo "$sel" | head -1 | grep -q "tcp [0-9.]*us/1.125GB/s" || { echo "FAIL: tcp class not 0.9 x 10 Gbit/s"; exit 1; }
# Down, it is not the host's link.
ip -n "$ns-a" link set tveth0 down
ip netns exec "$ns-a" "$topo" | grep -q "NIC tveth0" && { echo "FAIL: a down veth listed"; exit 1; }
echo "tutti-topo in a namespace: ok"
