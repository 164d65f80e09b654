//! Random machines of every kind the compiler builds, from a seed: a ring, a ladder, a graph
//! with or without switches, a torus, a mesh, a hypercube, a full mesh, a tree of switches, a
//! fabric of hosts, NICs and switches; with random bandwidths, latencies, lanes, parallel
//! links, switch latency and reduction rate. `compiler/tests/bounds.rs` prices every method on
//! them; `compiler/tests/scale.rs` checks `auto`'s floors on them.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `(bandwidth_gbps: …, latency_us: …, lanes: …)` fields with random values.
pub fn params(rng: &mut ChaCha8Rng) -> String {
    let bw = [10.0, 25.0, 50.0, 100.0, 200.0, 400.0, 12.5][rng.random_range(0..7)];
    let lat = [0.0, 0.25, 0.5, 1.0, 2.0, 5.0][rng.random_range(0..6)];
    let lanes = rng.random_range(1..=2);
    format!("bandwidth_gbps: {bw:?}, latency_us: {lat:?}, lanes: {lanes}")
}

/// A random machine: its `machine:` text and the name of one compute node (a root).
pub fn machine(rng: &mut ChaCha8Rng) -> (String, String) {
    let link = params(rng);
    match rng.random_range(0..11) {
        0 => (
            format!("Ring(nodes: {}, link: ({link}))", rng.random_range(2..=8)),
            "N0".into(),
        ),
        1 => (
            format!("Ladder(pairs: {}, link: ({link}))", rng.random_range(1..=3)),
            "N0".into(),
        ),
        2 => {
            let dims: Vec<String> = (0..rng.random_range(1..=3))
                .map(|_| rng.random_range(2..=3).to_string())
                .collect();
            let origin = vec!["0"; dims.len()].join(",");
            (
                format!("Torus(dims: [{}], link: ({link}))", dims.join(", ")),
                format!("N({origin})"),
            )
        }
        3 => (
            format!(
                "FullMesh(nodes: {}, link: ({link}))",
                rng.random_range(2..=6)
            ),
            "N0".into(),
        ),
        4 => (
            format!(
                "Hypercube(dims: {}, link: ({link}))",
                rng.random_range(1..=3)
            ),
            "N0".into(),
        ),
        5 => (tree(rng, &link), "p0".into()),
        6 => (fabric(rng), "H0R0".into()),
        7 => {
            let dims: Vec<String> = (0..rng.random_range(1..=2))
                .map(|_| rng.random_range(2..=4).to_string())
                .collect();
            let origin = vec!["0"; dims.len()].join(",");
            (
                format!("Mesh(dims: [{}], link: ({link}))", dims.join(", ")),
                format!("N({origin})"),
            )
        }
        _ => (graph(rng, &link), "n0".into()),
    }
}

/// A tree of switches two or three levels deep, with processors at the leaves.
fn tree(rng: &mut ChaCha8Rng, link: &str) -> String {
    let mut procs = 0usize;
    let mut switches = 0usize;
    let leaf = |rng: &mut ChaCha8Rng, procs: &mut usize| {
        let up = if rng.random_bool(0.5) {
            format!(", up: ({})", params(rng))
        } else {
            String::new()
        };
        *procs += 1;
        format!("Processor(name: \"p{}\"{up})", *procs - 1)
    };
    let mut children = Vec::new();
    for _ in 0..rng.random_range(2..=3) {
        if rng.random_bool(0.4) {
            children.push(leaf(rng, &mut procs));
        } else {
            switches += 1;
            let name = format!("s{switches}");
            let kids: Vec<String> = (0..rng.random_range(1..=3))
                .map(|_| leaf(rng, &mut procs))
                .collect();
            let up = format!(", up: ({})", params(rng));
            children.push(format!(
                "Switch(name: \"{name}\"{up}, children: [{}])",
                kids.join(", ")
            ));
        }
    }
    if procs < 2 {
        children.push(leaf(rng, &mut procs));
    }
    format!(
        "Tree(link: ({link}), root: Switch(name: \"root\", children: [{}]))",
        children.join(", ")
    )
}

/// A fabric: hosts of ranks, a NIC per host, one switch or leaves under a spine; devices that
/// reduce or not.
fn fabric(rng: &mut ChaCha8Rng) -> String {
    let hosts = rng.random_range(1..=4);
    let ranks = rng.random_range(1..=3);
    let ranks = if hosts * ranks < 2 { 2 } else { ranks };
    let leaves = if hosts > 1 && rng.random_bool(0.4) {
        format!(", leaf_switches: {}", rng.random_range(1..=hosts))
    } else {
        String::new()
    };
    let device = |rng: &mut ChaCha8Rng| {
        format!(
            "(reduce: {}, segment_buffers: {}, mtu_bytes: {})",
            rng.random_bool(0.6),
            rng.random_range(1..=8),
            // Segments of at most the MTU: large ones keep a 1 GiB vector to a few hundred.
            [1 << 22, 1 << 24][rng.random_range(0..2)]
        )
    };
    format!(
        "Fabric(hosts: {hosts}, ranks_per_host: {ranks}{leaves}, nic: {}, switch: {}, host_link: ({}), network_link: ({}))",
        device(rng),
        device(rng),
        params(rng),
        params(rng)
    )
}

/// A connected graph of 2 to 7 compute nodes and up to 3 switches: a random spanning path
/// plus random extra links (parallel ones included), each with its own parameters at times.
fn graph(rng: &mut ChaCha8Rng, link: &str) -> String {
    let n = rng.random_range(2..=7);
    let s = if rng.random_bool(0.5) {
        rng.random_range(1..=3)
    } else {
        0
    };
    let names: Vec<String> = (0..n)
        .map(|i| format!("n{i}"))
        .chain((0..s).map(|i| format!("s{i}")))
        .collect();
    let mut order: Vec<usize> = (0..names.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let mut pairs: Vec<(usize, usize)> = order.windows(2).map(|w| (w[0], w[1])).collect();
    for _ in 0..rng.random_range(0..=names.len() * 2) {
        let (a, b) = (
            rng.random_range(0..names.len()),
            rng.random_range(0..names.len()),
        );
        if a != b {
            pairs.push((a, b));
        }
    }
    let links: Vec<String> = pairs
        .iter()
        .enumerate()
        .map(|(j, &(a, b))| {
            let own = if rng.random_bool(0.5) {
                format!(", {}", params(rng))
            } else {
                String::new()
            };
            format!(
                "(id: \"e{j}\", between: (\"{}\", \"{}\"){own})",
                names[a], names[b]
            )
        })
        .collect();
    let quoted = |v: &[String]| {
        v.iter()
            .map(|x| format!("\"{x}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "Graph(nodes: [{}], switches: [{}], links: [{}], link: ({link}))",
        quoted(&names[..n]),
        quoted(&names[n..]),
        links.join(", ")
    )
}

/// A whole topology file: a random machine, maybe a switch latency and a reduction rate, and
/// one random collective.
pub fn topology(seed: u64) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (machine, root) = machine(&mut rng);
    let collective = match rng.random_range(0..5) {
        0 => "ReduceScatter".to_string(),
        1 => "AllGather".to_string(),
        2 => format!("Broadcast(root: \"{root}\")"),
        3 => format!("Reduce(root: \"{root}\")"),
        _ => "AllReduce".to_string(),
    };
    let mut extra = String::new();
    if rng.random_bool(0.4) {
        extra.push_str(&format!(
            "switch_latency_us: {:?}, ",
            [0.1, 0.5, 2.0][rng.random_range(0..3)]
        ));
    }
    if rng.random_bool(0.3) {
        extra.push_str(&format!(
            "reduce_gbps: {:?}, ",
            [50.0, 400.0, 3200.0][rng.random_range(0..3)]
        ));
    }
    format!(
        "Topology(name: \"bounds\", {extra}machine: {machine}, phases: [Exchange(name: \"p\", collective: {collective}, op: Sum, dtype: F32, elements: 4096)])"
    )
}
