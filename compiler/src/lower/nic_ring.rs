//! `in-network`'s fallback when the switch cannot reduce: a ring among the NICs through it.
//!
//! Segments (at most the MTU each) go in **waves** of as many segments as a NIC has units. In
//! a wave: every rank sends the wave to its NIC, which stores the first rank's copy and reduces
//! the others in (1 step); the `H` NICs, in id order, run a ring reduce-scatter and allgather
//! over the wave cut into `H` pieces, each hop routed through the switches (`2(H-1)` ring
//! steps, each split into sub-steps where hops share a link direction); every NIC sends the
//! result to its ranks (1 step). A NIC holds a wave's segments from its first step to its last,
//! so waves run one after another and never exceed its units. Empty pieces (a wave with fewer
//! segments than NICs) are not sent.

use super::in_network::Layout;
use super::plan::{self, Move, Packing, Plan};
use super::{even_chunks, vector_chunks, PhaseSpec};
use crate::machine::Machine;
use schedule_ir::{ChunkId, LinkId, NodeId, NodeKind, Phase, RecvMode};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The shortest route from `from` to `to` whose inner nodes are switches other than NICs
/// (ties to the lowest link ids); empty if there is none.
fn route(machine: &Machine, nics: &BTreeSet<NodeId>, from: NodeId, to: NodeId) -> Vec<LinkId> {
    let mut back: BTreeMap<NodeId, (NodeId, LinkId)> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(v) = queue.pop_front() {
        if v == to {
            break;
        }
        if v != from && (nics.contains(&v) || machine.node(v).kind != NodeKind::Switch) {
            continue;
        }
        for (link, w) in machine.links_at(v) {
            if w != from && !back.contains_key(&w) {
                back.insert(w, (v, link));
                queue.push_back(w);
            }
        }
    }
    let mut links = Vec::new();
    let mut at = to;
    while at != from {
        let Some(&(prev, link)) = back.get(&at) else {
            return Vec::new();
        };
        links.push(link);
        at = prev;
    }
    links.reverse();
    links
}

/// Lowers an allreduce of `segments` segments by a ring among the NICs; `why` says why the
/// switch does not reduce.
pub(super) fn lower(
    spec: &PhaseSpec,
    machine: &Machine,
    l: &Layout,
    segments: usize,
    why: &str,
) -> (Phase, Vec<String>) {
    let h = l.hosts.len();
    let nics: BTreeSet<NodeId> = l.hosts.iter().map(|host| host.0).collect();
    let hops: Vec<Vec<LinkId>> = (0..h)
        .map(|i| route(machine, &nics, l.hosts[i].0, l.hosts[(i + 1) % h].0))
        .collect();
    // Sub-steps of a ring step: first-fit by link direction, fixed for every wave (a wave's
    // pieces may be empty, and an empty piece is not sent, so the plan places the moves).
    let ring_hops = if h > 1 { h } else { 0 };
    let groups = plan::first_fit(
        hops.iter()
            .take(ring_hops)
            .enumerate()
            .map(|(i, hop)| plan::route_directions(machine, l.hosts[i].0, hop.iter().copied())),
    );
    let wave = (l.nic_units as usize).max(1);
    let waves = segments.div_ceil(wave);
    let ring_steps = 2 * (h.saturating_sub(1));
    let per_wave = 2 + ring_steps * groups.len();
    let steps = waves * per_wave;

    let mut plan_steps: Vec<Vec<Move>> = vec![Vec::new(); steps];
    let mut transfer = |step: usize,
                        from: NodeId,
                        to: NodeId,
                        links: &[LinkId],
                        chunks: &[ChunkId],
                        mode: RecvMode| {
        if !links.is_empty() && !chunks.is_empty() {
            plan_steps[step].push(Move::data(from, to, links.to_vec(), chunks.to_vec(), mode));
        }
    };
    for w in 0..waves {
        let ids: Vec<ChunkId> = (w * wave..((w + 1) * wave).min(segments))
            .map(ChunkId::new)
            .collect();
        let pieces: Vec<Vec<ChunkId>> = even_chunks(ids.len() as u64, h)
            .into_iter()
            .map(|(a, b)| ids[a as usize..b as usize].to_vec())
            .collect();
        let t0 = w * per_wave;
        let last = t0 + per_wave - 1;
        for (nic, _, ranks) in &l.hosts {
            for (r, &(rank, link)) in ranks.iter().enumerate() {
                let mode = if r == 0 {
                    RecvMode::Store
                } else {
                    RecvMode::Reduce
                };
                transfer(t0, rank, *nic, &[link], &ids, mode);
                transfer(last, *nic, rank, &[link], &ids, RecvMode::Store);
            }
        }
        for s in 0..ring_steps {
            for (g, group) in groups.iter().enumerate() {
                let step = t0 + 1 + s * groups.len() + g;
                for &i in group {
                    let (piece, mode) = if s < h - 1 {
                        ((i + h - s) % h, RecvMode::Reduce)
                    } else {
                        ((i + 1 + h - (s - (h - 1))) % h, RecvMode::Store)
                    };
                    let (from, to) = (l.hosts[i].0, l.hosts[(i + 1) % h].0);
                    transfer(step, from, to, &hops[i], &pieces[piece], mode);
                }
            }
        }
    }
    let chunks = vector_chunks(spec.elements, segments, |_| None);
    let described = vec![format!(
        "{why}: a ring among the {h} NICs through the switches, {waves} wave(s) of up to {wave} segment(s) of at most {} B",
        l.mtu_bytes
    )];
    let phase = plan::assemble(
        spec,
        "in-network",
        machine,
        Plan::data(chunks, plan_steps, Packing::AsGiven),
    );
    (phase, described)
}
