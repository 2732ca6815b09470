# Joins tutti-perf and the peers' mpi_coll_perf outputs (same columns) into one markdown table.
import sys
def load(fn):
    d={}
    for l in open(fn):
        f=l.split()
        if l.startswith('#') or not f or not f[0].isdigit(): continue
        d[int(f[0])]=(float(f[5]), float(f[7]), f[8])
    return d
def tut(prefix):
    d={}
    for s in ('small','large'): d.update(load(f'{prefix}_{s}.txt'))
    return d
cols=[("Open MPI vader np2",load('ompi_vader_np2.txt')),("tutti shm np2",tut('tutti_shm_np2')),
      ("Open MPI tcp np2",load('ompi_tcp_np2.txt')),("tutti tcp np2",tut('tutti_tcp_np2')),
      ("Open MPI vader np4",load('ompi_vader_np4.txt')),("tutti shm np4",tut('tutti_shm_np4')),
      ("tutti tcp np4",tut('tutti_tcp_np4'))]
pairs=[(0,1),(2,3),(4,5)]
print("| size (B) | " + " | ".join(c[0]+" us (busbw)" for c in cols) + " | shm/vader np2 | tcp/tcp np2 | shm/vader np4 |")
print("|---:|" + "---:|"*(len(cols)+3))
for size in sorted(cols[0][1]):
    row=[]
    for name,d in cols:
        row.append(f"{d[size][0]:.2f} ({d[size][1]:.2f})" if size in d else "-")
    for a,b in pairs:
        da,db=cols[a][1],cols[b][1]
        row.append(f"{da[size][0]/db[size][0]:.2f}x" if size in da and size in db else "-")
    print(f"| {size} | " + " | ".join(row) + " |")
