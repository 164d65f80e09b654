#!/usr/bin/env python3
"""Writes a rows x cols two-dimensional mesh or torus as a plain `Graph` topology file.

Usage: grid.py mesh|torus ROWS COLS > FILE

Node rRcC is linked to its right neighbour by link hR.C and to the one below by vR.C; a torus
adds the wrap-around links. The link figures and phases are those of `examples/torus4x4.ron`
(a 4 MiB allreduce, then a 256 KiB allgather), so that the file compares with the same machine
written as `Torus(dims: [ROWS, COLS])` or `Mesh(dims: [ROWS, COLS])`.
"""
import sys


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("mesh", "torus"):
        sys.exit(__doc__)
    kind, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    wrap = kind == "torus"
    out = [f"// A {rows} x {cols} {kind} written as a plain `Graph` (bench/auto/grid.py).",
           "Topology(",
           f'    name: "graph-{kind}-{rows}x{cols}",',
           "    machine: Graph(",
           "        nodes: ["]
    for r in range(rows):
        out.append("            " + " ".join(f'"r{r}c{c}",' for c in range(cols)))
    out += ["        ],",
            "        link: (bandwidth_gbps: 200.0, latency_us: 0.5),",
            "        links: ["]
    for r in range(rows):
        for c in range(cols):
            right, down = (r, (c + 1) % cols), ((r + 1) % rows, c)
            if c + 1 < cols or (wrap and cols > 2):
                out.append(f'            (id: "h{r}.{c}", between: ("r{r}c{c}", "r{right[0]}c{right[1]}")),')
            if r + 1 < rows or (wrap and rows > 2):
                out.append(f'            (id: "v{r}.{c}", between: ("r{r}c{c}", "r{down[0]}c{down[1]}")),')
    out += ["        ],",
            "    ),",
            "    phases: [",
            '        Exchange(name: "grads", collective: AllReduce, op: Sum, dtype: F32, elements: 1048576),',
            '        Compute("optimizer"),',
            '        Exchange(name: "activations", collective: AllGather, op: Sum, dtype: F32, elements: 65536),',
            "    ],",
            ")"]
    print("\n".join(out))


main()
