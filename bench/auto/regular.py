#!/usr/bin/env python3
"""Writes a connected random regular graph as a plain `Graph` topology file with one phase.

Usage: regular.py NODES DEGREE SEED [COLLECTIVE] > FILE

NODES compute nodes v0 … v{NODES-1}, each with DEGREE links of 100 Gbit/s and 1 µs, drawn by
the configuration model (stubs shuffled and paired, drawn again until no loop, no repeated
link and one component) from Python's generator seeded with SEED, so a seed always gives the
same machine. The phase is `COLLECTIVE` of 262 144 f32 (default: a broadcast from v0), e.g.
'Reduce(root: "v0"), op: Sum' or 'AllReduce, op: Sum'.
"""
import random
import sys


def draw(nodes, degree, rng):
    while True:
        stubs = [v for v in range(nodes) for _ in range(degree)]
        rng.shuffle(stubs)
        links = set()
        for a, b in zip(stubs[::2], stubs[1::2]):
            link = (min(a, b), max(a, b))
            if a == b or link in links:
                break
            links.add(link)
        else:
            adjacent = {v: [] for v in range(nodes)}
            for a, b in links:
                adjacent[a].append(b)
                adjacent[b].append(a)
            seen, stack = {0}, [0]
            while stack:
                for w in adjacent[stack.pop()]:
                    if w not in seen:
                        seen.add(w)
                        stack.append(w)
            if len(seen) == nodes:
                return sorted(links)


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    nodes, degree, seed = (int(a) for a in sys.argv[1:4])
    collective = sys.argv[4] if len(sys.argv) == 5 else 'Broadcast(root: "v0")'
    if nodes * degree % 2 or degree >= nodes:
        sys.exit("NODES × DEGREE must be even and DEGREE below NODES")
    links = draw(nodes, degree, random.Random(seed))
    out = [f"// A random {degree}-regular graph of {nodes} nodes, seed {seed} "
           "(bench/auto/regular.py).",
           "Topology(",
           f'    name: "regular-{nodes}-{degree}-{seed}",',
           "    machine: Graph(",
           "        nodes: [" + ", ".join(f'"v{v}"' for v in range(nodes)) + "],",
           "        link: (bandwidth_gbps: 100.0, latency_us: 1.0),",
           "        links: ["]
    out += [f'            (id: "e{a}.{b}", between: ("v{a}", "v{b}")),' for a, b in links]
    out += ["        ],",
            "    ),",
            "    phases: [",
            f'        Exchange(name: "x", collective: {collective}, dtype: F32, elements: 262144),',
            "    ],",
            ")"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
