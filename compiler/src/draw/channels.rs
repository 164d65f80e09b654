//! Channels derived from a schedule, for pictures of schedules whose embedding is not known.
//!
//! Two link directions are in the same channel when some chunk crosses both during the phase
//! (transitively): the connected components of the graph joining each chunk to every link
//! direction it crosses. For a ring method every logical ring carries its own chunks, so each
//! logical ring is one component; a component whose directions are exactly another's reversed
//! is the same ring walked the other way, and the two become one channel, oriented as the one
//! that carries the lower chunk ids. Channels are numbered by their lowest chunk.

use super::{hop, walk, Overlay};
use schedule_ir::{Hop, Instr, LinkId, Machine, NodeId, Phase};
use std::collections::{BTreeMap, BTreeSet};

/// The channels of `phase`, as overlays named `channel 1`, `channel 2`, ….
pub fn derive(machine: &Machine, phase: &Phase) -> Vec<Overlay> {
    let chunks = phase.chunks.len();
    let mut uf = UnionFind::new(chunks + 2 * machine.links.len());
    let mut crossings: BTreeMap<usize, Hop> = BTreeMap::new();
    let mut first_chunk: BTreeMap<usize, usize> = BTreeMap::new();
    for (node, program) in phase.programs.iter().enumerate() {
        for instr in program.steps.iter().flatten() {
            let Instr::Send {
                link,
                via,
                chunks: carried,
                ..
            } = instr
            else {
                continue;
            };
            for h in machine.route(NodeId::new(node), *link, via) {
                let d = h.direction();
                crossings.entry(d).or_insert(h);
                for c in carried {
                    if c.index() < chunks && chunks + d < uf.len() {
                        uf.union(c.index(), chunks + d);
                        let lowest = first_chunk.entry(d).or_insert(c.index());
                        *lowest = (*lowest).min(c.index());
                    }
                }
            }
        }
    }
    // Components: root → (directions, lowest chunk).
    let mut groups: BTreeMap<usize, (BTreeSet<usize>, usize)> = BTreeMap::new();
    for (&d, &c) in &first_chunk {
        let g = groups
            .entry(uf.find(chunks + d))
            .or_insert((BTreeSet::new(), usize::MAX));
        g.0.insert(d);
        g.1 = g.1.min(c);
    }
    let mut groups: Vec<(BTreeSet<usize>, usize)> = groups.into_values().collect();
    groups.sort_by_key(|g| g.1);

    // Pair each group with the one that is its reverse, if any.
    let mut taken = vec![false; groups.len()];
    let mut channels: Vec<BTreeSet<usize>> = Vec::new();
    for i in 0..groups.len() {
        if taken[i] {
            continue;
        }
        taken[i] = true;
        let reversed: BTreeSet<usize> = groups[i].0.iter().map(|d| d ^ 1).collect();
        if let Some(j) = (i + 1..groups.len()).find(|&j| !taken[j] && groups[j].0 == reversed) {
            taken[j] = true;
        }
        channels.push(groups[i].0.clone());
    }

    channels
        .iter()
        .enumerate()
        .map(|(i, dirs)| {
            let hops: Vec<Hop> = dirs
                .iter()
                .filter_map(|d| crossings.get(d).copied())
                .collect();
            let (edges, detail) = match as_cycle(machine, &hops) {
                Some((nodes, edges)) => (edges, walk(machine, &nodes)),
                None => {
                    let links: BTreeSet<LinkId> = hops.iter().map(|h| h.link).collect();
                    let detail = format!(
                        "{} link direction{} over {} link{}",
                        hops.len(),
                        if hops.len() == 1 { "" } else { "s" },
                        links.len(),
                        if links.len() == 1 { "" } else { "s" }
                    );
                    (hops, detail)
                }
            };
            Overlay {
                name: format!("channel {}", i + 1),
                detail,
                edges,
                both_ways: false,
            }
        })
        .collect()
}

/// When `hops` form one directed cycle, its nodes and hops in walking order from the lowest
/// node id.
fn as_cycle(machine: &Machine, hops: &[Hop]) -> Option<(Vec<NodeId>, Vec<Hop>)> {
    let mut next: BTreeMap<NodeId, Hop> = BTreeMap::new();
    for h in hops {
        if next.insert(h.from, *h).is_some() {
            return None;
        }
    }
    let start = *next.keys().next()?;
    let (mut nodes, mut edges) = (Vec::new(), Vec::new());
    let mut at = start;
    loop {
        let h = next.get(&at)?;
        nodes.push(at);
        edges.push(hop(machine, h.link, h.from, h.to)?);
        at = h.to;
        if at == start {
            break;
        }
        if nodes.len() > hops.len() {
            return None;
        }
    }
    (edges.len() == hops.len()).then_some((nodes, edges))
}

/// A union-find over `0..n` with path halving.
struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> UnionFind {
        UnionFind {
            parent: (0..n).collect(),
        }
    }

    fn len(&self) -> usize {
        self.parent.len()
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            // The lower index becomes the root, so roots do not depend on the union order.
            let (lo, hi) = (ra.min(rb), ra.max(rb));
            self.parent[hi] = lo;
        }
    }
}
