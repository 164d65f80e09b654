#!/usr/bin/env python3
"""Side by side with TACOS (all-gather) on 2-D meshes and tori: writes the topoc topology files
(each machine as a plain `Graph` and as its structured kind, same link figures), compiles and
simulates them with topoc, runs the TACOS driver on the same machine, and prints one table.

Run through run.sh, which builds both tools. Each tool prices its own schedule with its own
model: TACOS with its event-driven link model (every chunk hop costs the link's latency plus
chunk / bandwidth, one chunk at a time per link direction), topoc with its BSP α-β model (a
step costs the slowest latency used plus the most loaded direction's bytes over its
bandwidth). With equal links and one chunk per direction at a time the two coincide.
"""
import argparse
import json
import os
import subprocess
import sys
import time

SIZES = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def parse_size(text):
    for suffix, factor in SIZES.items():
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * factor
    return int(text)


def grid_links(kind, n):
    """(name, a, b) of every link of an n × n mesh or torus, nodes named rRcC."""
    links = []
    for r in range(n):
        for c in range(n):
            if c + 1 < n or (kind == "torus" and n > 2):
                links.append((f"h{r}.{c}", f"r{r}c{c}", f"r{r}c{(c + 1) % n}"))
            if r + 1 < n or (kind == "torus" and n > 2):
                links.append((f"v{r}.{c}", f"r{r}c{c}", f"r{(r + 1) % n}c{c}"))
    return links


def topology(kind, n, form, elements, gbps, latency):
    link = f"(bandwidth_gbps: {gbps:.1f}, latency_us: {latency})"
    phase = f'Exchange(name: "gather", collective: AllGather, dtype: F32, elements: {elements})'
    if form == "kind":
        machine = f"{kind.capitalize()}(dims: [{n}, {n}], link: {link})"
    else:
        nodes = ", ".join(f'"r{r}c{c}"' for r in range(n) for c in range(n))
        links = ",\n".join(
            f'    (id: "{i}", between: ("{a}", "{b}"))' for i, a, b in grid_links(kind, n)
        )
        machine = f"Graph(nodes: [{nodes}], link: {link}, links: [\n{links}\n])"
    return f'Topology(name: "{kind}-{n}x{n}-{form}", machine: {machine},\n phases: [{phase}])\n'


def timed(cmd):
    """Runs cmd under /usr/bin/time; returns (stdout, wall seconds, user seconds, peak KiB)."""
    full = ["/usr/bin/time", "-f", "TIME %e %U %M"] + cmd
    done = subprocess.run(full, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    line = [l for l in done.stderr.splitlines() if l.startswith("TIME ")][-1]
    wall, user, peak = line.split()[1:]
    return done.stdout, float(wall), float(user), int(peak)


def run_topoc(args, kind, n, form, size):
    elements = size // 4
    base = os.path.join(args.out, f"{kind}{n}x{n}-{form}-{size}")
    with open(base + ".ron", "w") as f:
        f.write(topology(kind, n, form, elements, args.gbps, args.latency_us))
    _, wall, user, peak = timed(
        [args.topoc, "compile", base + ".ron", "--algorithm", args.algorithm, "--compact",
         "--emit", "json", "--no-progress", "-o", base + ".sched.json"]
    )
    out, _, _, _ = timed(
        [args.topoc, "simulate", base + ".sched.json", "--sizes", str(size), "--format", "json"]
    )
    row = json.loads(out)["rows"][0]
    return {
        "us": row["estimate"]["seconds"] * 1e6,
        "bound_us": row["bound"]["seconds"] * 1e6,
        "method": row["algorithm"],
        "steps": row["steps"],
        "efficiency": row["efficiency"],
        "compile_s": wall,
        "compile_user_s": user,
        "peak_mib": peak / 1024,
    }


def run_tacos(args, kind, n, size):
    """TACOS's best over the chunk counts tried (every count with at most --tacos-max-chunks
    chunks in all), each run --repeats times (once on 1 024 nodes or more); results are cached
    in the scratch directory, since TACOS takes minutes on the larger machines."""
    gibps = args.gbps * 1e9 / 8 / (1 << 30)
    repeats = args.repeats if n * n < 1024 else 1
    best = None
    for k in args.tacos_chunks:
        if size // (n * n * k) < 1 or (k > 1 and n * n * k > args.tacos_max_chunks):
            continue
        cache = os.path.join(args.out, f"tacos-{kind}{n}x{n}-{k}-{size}-{repeats}.json")
        derived = n * n >= args.derive_nodes and derive(args, kind, n, k, size, repeats, gibps)
        if derived:
            got = derived
        elif os.path.exists(cache):
            with open(cache) as f:
                got = json.load(f)
        else:
            out, _, _, _ = timed(
                [args.tacos, kind, str(n), str(n), repr(gibps), str(args.latency_us), str(k),
                 str(size), str(repeats)]
            )
            got = json.loads(out)
            with open(cache, "w") as f:
                json.dump(got, f)
        print(f"  TACOS {kind} {n}x{n} {size} B, {k} chunk(s)/NPU: "
              f"{got['collective_us_best']:.2f}-{got['collective_us_worst'] or 0:.2f} us, "
              f"solve {got['solve_ms_mean']:.0f} ms"
              f"{' (derived)' if got.get('derived_from') else ''}", file=sys.stderr)
        if best is None or got["collective_us_best"] < best["collective_us_best"]:
            best = got
    return best


def hop_us(args, gibps, chunk_bytes):
    """TACOS's time for one chunk over one link: latency + chunk / bandwidth (GiB/s)."""
    return args.latency_us + chunk_bytes / (gibps * (1 << 30) / 1e6)


def derive(args, kind, n, k, size, repeats, gibps):
    """On equal links every TACOS transfer takes the same time, so its matching does not depend
    on the chunk size and its collective time is a whole number of hops: a run cached at another
    size gives the hop count, priced here at `size` with TACOS's own formula."""
    for other in args.sizes_bytes:
        cache = os.path.join(args.out, f"tacos-{kind}{n}x{n}-{k}-{other}-{repeats}.json")
        if other == size or not os.path.exists(cache):
            continue
        with open(cache) as f:
            got = json.load(f)
        hops = round(got["collective_us_best"] / hop_us(args, gibps, got["chunk_bytes"]))
        chunk = size // (n * n * k)
        got.update(chunk_bytes=chunk, collective_us_best=hops * hop_us(args, gibps, chunk),
                   collective_us_worst=None, derived_from=other)
        return got
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tacos", required=True, help="the built TACOS driver")
    p.add_argument("--topoc", required=True, help="the topoc binary")
    p.add_argument("--out", required=True, help="scratch directory")
    p.add_argument("--dims", default="4,8,16,32", help="side lengths n of the n × n machines")
    p.add_argument("--kinds", default="mesh,torus")
    p.add_argument("--sizes", default="256MiB,1MiB", help="all-gather output sizes")
    p.add_argument("--gbps", type=float, default=400.0, help="link bandwidth, Gbit/s each way")
    p.add_argument("--latency-us", type=float, default=0.5, help="link latency, µs")
    p.add_argument("--tacos-chunks", default="1,2,3,4,6,8,12,16,24,32",
                   help="TACOS chunks per NPU tried (its best is reported)")
    p.add_argument("--tacos-max-chunks", type=int, default=1024,
                   help="most chunks in all (NPUs × chunks per NPU) a TACOS run may have, "
                   "beyond one chunk per NPU")
    p.add_argument("--derive-nodes", type=int, default=1024,
                   help="on machines of at least this many NPUs, TACOS runs at one size only "
                   "(it takes tens of minutes there) and its hop count prices the others")
    p.add_argument("--tacos-only", action="store_true",
                   help="run (and cache) TACOS only")
    p.add_argument("--repeats", type=int, default=3, help="TACOS runs per chunk count")
    p.add_argument("--algorithm", default="auto", help="topoc's --algorithm")
    p.add_argument("--forms", default="graph,kind",
                   help="topoc machine forms: a plain `Graph`, the structured kind")
    args = p.parse_args()
    args.tacos_chunks = [int(k) for k in args.tacos_chunks.split(",")]
    args.sizes_bytes = [parse_size(t) for t in args.sizes.split(",")]
    os.makedirs(args.out, exist_ok=True)
    header = ("| machine | size | TACOS µs (chunks/NPU, solve s) | topoc form | topoc µs | method | "
              "steps | bound µs | topoc eff. | TACOS eff. | topoc / TACOS | compile s (wall, user) |")
    lines = [header, "|" + "---|" * 12]
    for kind in args.kinds.split(","):
        for n in [int(d) for d in args.dims.split(",")]:
            for size_text in args.sizes.split(","):
                size = parse_size(size_text)
                t = run_tacos(args, kind, n, size)
                if args.tacos_only:
                    continue
                for form in args.forms.split(","):
                    r = run_topoc(args, kind, n, form, size)
                    lines.append(
                        f"| {kind} {n}×{n} | {size_text} | {t['collective_us_best']:.2f}"
                        f"{'*' if t.get('derived_from') else ''} "
                        f"({t['chunks_per_npu']}, {t['solve_ms_mean'] / 1e3:.2f}) | {form} | "
                        f"{r['us']:.2f} | `{r['method']}` | {r['steps']} | {r['bound_us']:.2f} | "
                        f"{100 * r['efficiency']:.1f}% | "
                        f"{100 * r['bound_us'] / t['collective_us_best']:.1f}% | "
                        f"{r['us'] / t['collective_us_best']:.3f} | {r['compile_s']:.2f}, "
                        f"{r['compile_user_s']:.2f} |"
                    )
                    print(lines[-1], file=sys.stderr)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
