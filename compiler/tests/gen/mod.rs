//! Generators for the property tests: random machines (as topology text) and random exchange
//! phases.
//!
//! Every machine kind has one generator function returning a [`GenMachine`] strategy, and
//! [`machine`] picks among them; adding a kind (trees, tori) is one function and one line in
//! [`machine`]. A generated machine says which methods must compile it ([`GenMachine::must`]):
//! the property tests fail if one of them refuses.
#![allow(dead_code)]

pub mod random;

use proptest::prelude::*;
use proptest::sample::Index;
use topoc::lower::Method;

/// A generated machine: the `machine:` value of a topology file and what must hold for it.
#[derive(Clone, Debug)]
pub struct GenMachine {
    /// What generated it, for messages.
    pub kind: &'static str,
    /// The RON text of the `machine:` field.
    pub text: String,
    /// Number of compute nodes.
    pub nodes: usize,
    /// The methods that must compile every supported collective on it.
    pub must: Vec<Method>,
}

/// Link parameters: bandwidth in quarter-Gbit/s steps, latency in quarter-µs steps, 1–2 lanes.
fn link_params() -> impl Strategy<Value = String> {
    (1u32..=1600, 0u32..=20, 1u32..=2).prop_map(|(bw, lat, lanes)| {
        format!(
            "bandwidth_gbps: {:?}, latency_us: {:?}, lanes: {lanes}",
            f64::from(bw) / 4.0,
            f64::from(lat) / 4.0
        )
    })
}

/// A random graph with a Hamiltonian cycle: `n` named nodes, a cycle through them in random
/// order, and random extra links (parallel links allowed), each link with random parameters.
pub fn hamiltonian_graph() -> impl Strategy<Value = GenMachine> {
    (2usize..=9)
        .prop_flat_map(|n| {
            (
                Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
                prop::collection::vec((0..n, 0..n), 0..=2 * n),
                prop::collection::vec(prop::option::of(link_params()), 3 * n),
                link_params(),
            )
        })
        .prop_map(|(order, extra, params, default)| {
            let n = order.len();
            let mut pairs: Vec<(usize, usize)> =
                (0..n).map(|i| (order[i], order[(i + 1) % n])).collect();
            pairs.extend(extra.into_iter().filter(|(a, b)| a != b));
            let links: Vec<String> = pairs
                .iter()
                .zip(params.iter().cycle())
                .enumerate()
                .map(|(j, (&(a, b), p))| {
                    let extra = p.as_ref().map_or(String::new(), |p| format!(", {p}"));
                    format!("(id: \"e{j}\", between: (\"n{a}\", \"n{b}\"){extra})")
                })
                .collect();
            let nodes: Vec<String> = (0..n).map(|i| format!("\"n{i}\"")).collect();
            GenMachine {
                kind: "graph",
                text: format!(
                    "Graph(nodes: [{}], links: [{}], link: ({default}))",
                    nodes.join(", "),
                    links.join(", ")
                ),
                nodes: n,
                must: vec![Method::Ring],
            }
        })
}

/// A ring of 2 to 12 nodes.
pub fn ring() -> impl Strategy<Value = GenMachine> {
    (2usize..=12, link_params()).prop_map(|(n, link)| GenMachine {
        kind: "ring",
        text: format!("Ring(nodes: {n}, link: ({link}))"),
        nodes: n,
        must: vec![Method::Ring],
    })
}

/// A ladder of 1 to 6 pairs, with rungs of their own parameters or not. `ladder-rings` must
/// apply to one pair and to even pair counts; the ring search to every ladder.
pub fn ladder() -> impl Strategy<Value = GenMachine> {
    (1usize..=6, link_params(), prop::option::of(link_params())).prop_map(|(pairs, link, rung)| {
        let rung = rung.map_or(String::new(), |r| format!(", rung: ({r})"));
        let mut must = vec![Method::Ring];
        if pairs == 1 || pairs % 2 == 0 {
            must.insert(0, Method::LadderRings);
        }
        GenMachine {
            kind: "ladder",
            text: format!("Ladder(pairs: {pairs}, link: ({link}){rung})"),
            nodes: 2 * pairs,
            must,
        }
    })
}

/// Any generated machine.
pub fn machine() -> impl Strategy<Value = GenMachine> {
    prop_oneof![hamiltonian_graph(), ring(), ladder()]
}

/// A generated exchange phase.
#[derive(Clone, Debug)]
pub struct GenPhase {
    /// `AllReduce`, `ReduceScatter` or `AllGather`: the collectives the methods lower.
    pub collective: &'static str,
    /// `Sum`, `Prod`, `Max`, `Min` or `Mean`.
    pub op: &'static str,
    /// `F32`, `F64`, `I32` or `I64`.
    pub dtype: &'static str,
    /// The vector length: 0, 1, fewer than the chunks, or a few hundred.
    pub elements: u64,
}

fn collective() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["AllReduce", "ReduceScatter", "AllGather"])
}

fn op() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["Sum", "Prod", "Max", "Min", "Mean"])
}

/// Vector lengths: 0 and 1, fewer than the chunks (a method makes up to 4 chunks per node),
/// and larger.
fn elements() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(1u64), 2u64..48, 48u64..400]
}

/// A phase of any supported collective, op, element type and length.
pub fn phase() -> impl Strategy<Value = GenPhase> {
    (
        collective(),
        op(),
        prop::sample::select(vec!["F32", "F64", "I32", "I64"]),
        elements(),
    )
        .prop_map(|(collective, op, dtype, elements)| GenPhase {
            collective,
            op,
            dtype,
            elements,
        })
}

/// A phase on integers (whose results must match the reference exactly).
pub fn integer_phase() -> impl Strategy<Value = GenPhase> {
    (
        collective(),
        op(),
        prop::sample::select(vec!["I32", "I64"]),
        0u64..64,
    )
        .prop_map(|(collective, op, dtype, elements)| GenPhase {
            collective,
            op,
            dtype,
            elements,
        })
}

/// The topology file of `machine` with the one exchange phase `phase`, called `p`.
pub fn topology(machine: &GenMachine, phase: &GenPhase) -> String {
    format!(
        "Topology(name: \"prop-{}\", machine: {}, phases: [Exchange(name: \"p\", collective: {}, op: {}, dtype: {}, elements: {})])",
        machine.kind, machine.text, phase.collective, phase.op, phase.dtype, phase.elements
    )
}

/// Indices into whatever a mutation picks from; resolved against the schedule.
pub type Pick = (Index, Index, Index);
