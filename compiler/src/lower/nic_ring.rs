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
use super::ring::{even_chunks, PhaseSpec};
use crate::machine::Machine;
use schedule_ir::{
    BufferId, Chunk, ChunkId, Instr, LinkId, NodeId, NodeKind, Phase, Program, RecvMode,
};
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

/// The link directions a route from `from` crosses, with their lanes.
fn directions(machine: &Machine, from: NodeId, links: &[LinkId]) -> Vec<(usize, u32)> {
    let mut at = from;
    links
        .iter()
        .map(|&link| {
            let (a, b) = machine.endpoints(link);
            let backward = at != a;
            at = if backward { a } else { b };
            (
                2 * link.index() + usize::from(backward),
                machine.link(link).lanes,
            )
        })
        .collect()
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
    // Sub-steps of a ring step: first-fit by link direction, as `ring::plan` does.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut load: Vec<BTreeMap<usize, u32>> = Vec::new();
    for (i, hop) in hops.iter().enumerate().take(if h > 1 { h } else { 0 }) {
        let dirs = directions(machine, l.hosts[i].0, hop);
        let fits = |m: &BTreeMap<usize, u32>| {
            dirs.iter()
                .all(|&(d, lanes)| m.get(&d).copied().unwrap_or(0) < lanes)
        };
        let g = match load.iter().position(fits) {
            Some(g) => g,
            None => {
                groups.push(Vec::new());
                load.push(BTreeMap::new());
                groups.len() - 1
            }
        };
        groups[g].push(i);
        for &(d, _) in &dirs {
            *load[g].entry(d).or_default() += 1;
        }
    }
    let wave = (l.nic_units as usize).max(1);
    let waves = segments.div_ceil(wave);
    let ring_steps = 2 * (h.saturating_sub(1));
    let per_wave = 2 + ring_steps * groups.len();
    let steps = waves * per_wave;

    let mut programs: Vec<Program> = (0..machine.node_count())
        .map(|i| {
            let id = NodeId::new(i);
            let runs = machine.node(id).kind == NodeKind::Compute || nics.contains(&id);
            Program {
                steps: if runs {
                    vec![Vec::new(); steps]
                } else {
                    Vec::new()
                },
            }
        })
        .collect();
    let data = BufferId(0);
    let mut sends: Vec<(usize, NodeId, Instr)> = Vec::new();
    let mut recvs: Vec<(usize, NodeId, Instr)> = Vec::new();
    let mut transfer = |step: usize,
                        from: NodeId,
                        to: NodeId,
                        links: &[LinkId],
                        chunks: &[ChunkId],
                        mode: RecvMode| {
        let (Some(&first), Some(&last)) = (links.first(), links.last()) else {
            return;
        };
        if chunks.is_empty() {
            return;
        }
        sends.push((
            step,
            from,
            Instr::Send {
                link: first,
                via: links[1..].to_vec(),
                to,
                buffer: data,
                chunks: chunks.to_vec(),
            },
        ));
        recvs.push((
            step,
            to,
            Instr::Recv {
                link: last,
                from,
                buffer: data,
                chunks: chunks.to_vec(),
                mode,
            },
        ));
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
    for (step, node, instr) in sends.into_iter().chain(recvs) {
        programs[node.index()].steps[step].push(instr);
    }
    let chunks = even_chunks(spec.elements, segments)
        .into_iter()
        .map(|(start, end)| Chunk {
            start,
            end,
            owner: None,
        })
        .collect();
    let described = vec![format!(
        "{why}: a ring among the {h} NICs through the switches, {waves} wave(s) of up to {wave} segment(s) of at most {} B",
        l.mtu_bytes
    )];
    let phase = spec.phase(
        "in-network",
        chunks,
        super::ring::data_buffer(),
        steps,
        programs,
    );
    (phase, described)
}
