//! The wire plan of one phase under MPI: which rank runs which node, and the tag of every
//! message (the scheme is described in the [module doc](super)).

use super::error::MpiError;
use crate::error::Error;
use crate::plan::find_phase;
use crate::transport::MessageKey;
use schedule_ir::{LinkId, Machine, NodeId, NodeKind, RankId, Ranks, Schedule, StepId};

/// The tag upper bound every MPI library guarantees at least.
pub(crate) const MIN_TAG_UB: i32 = 32767;

/// Where a message goes on the wire: the peer's rank and the tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Address {
    pub rank: i32,
    pub tag: i32,
}

/// Everything the transport needs to address the messages of one phase, computed once.
#[derive(Debug)]
pub(crate) struct Wire {
    /// The phase's name.
    pub phase: String,
    /// This process's node.
    pub node: NodeId,
    /// The rank of each compute node.
    ranks: Ranks,
    node_names: Vec<String>,
    link_names: Vec<String>,
    /// The `a` end of each link, by [`LinkId`] index.
    link_a: Vec<NodeId>,
    /// The global number of the phase's step 0: the steps of all earlier phases.
    step_offset: u64,
    /// The most lanes any link has: tag slots per link direction.
    lanes: u64,
    /// Tag slots per step: 2 directions × links × lanes.
    slots: u64,
    /// `MPI_TAG_UB + 1`: tags are taken modulo this.
    modulus: u64,
}

impl Wire {
    /// Plans phase `phase` of `schedule` for the process of rank `rank` in a communicator of
    /// `size` ranks whose tag upper bound is `tag_ub`.
    pub fn new(
        schedule: &Schedule,
        phase: &str,
        rank: usize,
        size: usize,
        tag_ub: i32,
    ) -> Result<Wire, Error> {
        let p = find_phase(schedule, phase)?;
        let machine = &schedule.machine;
        let node = rank_node(machine, rank, size)?;
        no_device_programs(schedule, Some(&p.name))?;
        let ranks = Ranks::new(machine);
        let TagSpace {
            lanes,
            slots,
            modulus,
        } = tag_space(schedule, tag_ub)?;
        if p.elements > i32::MAX as u64 {
            return Err(MpiError::TooLarge {
                phase: p.name.clone(),
                elements: usize::try_from(p.elements).unwrap_or(usize::MAX),
            }
            .into());
        }
        let step_offset = schedule
            .phases
            .iter()
            .take_while(|q| q.name != p.name)
            .map(|q| u64::from(q.steps))
            .sum();
        Ok(Wire {
            phase: p.name.clone(),
            node,
            ranks,
            node_names: machine.nodes.iter().map(|n| n.name.clone()).collect(),
            link_names: machine.links.iter().map(|l| l.name.clone()).collect(),
            link_a: machine.links.iter().map(|l| l.a).collect(),
            step_offset,
            lanes,
            slots,
            modulus,
        })
    }

    /// The user-facing name of `node`.
    pub fn node_name(&self, node: NodeId) -> String {
        self.node_names
            .get(node.index())
            .cloned()
            .unwrap_or_else(|| node.to_string())
    }

    /// The user-facing name of `link`.
    pub fn link_name(&self, link: LinkId) -> String {
        self.link_names
            .get(link.index())
            .cloned()
            .unwrap_or_else(|| link.to_string())
    }

    /// The addresses of this node's outgoing messages of one step (`to` is the peer).
    pub fn outgoing<'k>(
        &self,
        keys: impl Iterator<Item = &'k MessageKey>,
    ) -> Result<Vec<Address>, MpiError> {
        self.addresses(keys.map(|k| (k, k.to)))
    }

    /// The addresses of the messages this node expects in one step (`from` is the peer).
    pub fn incoming<'k>(
        &self,
        keys: impl Iterator<Item = &'k MessageKey>,
    ) -> Result<Vec<Address>, MpiError> {
        self.addresses(keys.map(|k| (k, k.from)))
    }

    /// Numbers the messages exchanged with the same peer over the same link in the step by
    /// their first chunk (the lane), then computes every address.
    fn addresses<'k>(
        &self,
        keys: impl Iterator<Item = (&'k MessageKey, NodeId)>,
    ) -> Result<Vec<Address>, MpiError> {
        let keys: Vec<(&MessageKey, NodeId)> = keys.collect();
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by_key(|&i| keys.get(i).map(|(k, peer)| (*peer, k.link, k.first_chunk)));
        let mut lane = vec![0u64; keys.len()];
        let mut previous: Option<(NodeId, LinkId)> = None;
        let mut next = 0;
        for &i in &order {
            let Some((k, peer)) = keys.get(i) else {
                continue;
            };
            let group = Some((*peer, k.link));
            next = if group == previous { next + 1 } else { 0 };
            previous = group;
            if let Some(cell) = lane.get_mut(i) {
                *cell = next;
            }
        }
        keys.iter()
            .zip(lane)
            .map(|((key, peer), lane)| self.address(key, *peer, lane))
            .collect()
    }
}

/// The compute node run by rank `rank` of `size`: the `rank`-th compute node, if the machine
/// has exactly `size` of them.
pub(crate) fn rank_node(machine: &Machine, rank: usize, size: usize) -> Result<NodeId, MpiError> {
    let ranks = Ranks::new(machine);
    match ranks.node(RankId::new(rank)) {
        Some(node) if ranks.len() == size => Ok(node),
        _ => Err(MpiError::WorldSize {
            machine: machine.name.clone(),
            ranks: size,
            compute: ranks.len(),
        }),
    }
}

/// Refuses a schedule in which a device (a NIC or switch that reduces in the network) runs a
/// program in `phase` (every phase, if `None`): only compute nodes have ranks, so nothing would
/// run the device's part, and its peers would wait at the first step for messages no rank
/// sends.
pub(crate) fn no_device_programs(schedule: &Schedule, phase: Option<&str>) -> Result<(), MpiError> {
    let machine = &schedule.machine;
    for p in &schedule.phases {
        if phase.is_some_and(|name| name != p.name) {
            continue;
        }
        let busy = machine.nodes.iter().zip(&p.programs).find(|(n, program)| {
            n.kind != NodeKind::Compute && program.steps.iter().any(|s| !s.is_empty())
        });
        if let Some((device, _)) = busy {
            return Err(MpiError::DeviceProgram {
                phase: p.name.clone(),
                device: device.name.clone(),
            });
        }
    }
    Ok(())
}

/// How a schedule's messages share the tags.
pub(crate) struct TagSpace {
    /// Tag slots per link direction: the most lanes any link has, or more where a phase whose
    /// links are shared sends more messages between two nodes over one link in a step.
    lanes: u64,
    /// Tag slots per step: 2 directions × links × lanes.
    slots: u64,
    /// `MPI_TAG_UB + 1`: tags are taken modulo this.
    modulus: u64,
}

/// The tag space of `schedule` under a tag upper bound of `tag_ub` (or the least guaranteed
/// one, if `tag_ub` is not positive); fails if one step's messages cannot have distinct tags.
pub(crate) fn tag_space(schedule: &Schedule, tag_ub: i32) -> Result<TagSpace, MpiError> {
    let machine = &schedule.machine;
    let lanes = machine
        .links
        .iter()
        .map(|l| u64::from(l.lanes.max(1)))
        .chain(schedule.phases.iter().map(most_between))
        .max()
        .unwrap_or(1);
    let slots = 2 * (machine.links.len() as u64).max(1) * lanes;
    let tag_ub = if tag_ub > 0 { tag_ub } else { MIN_TAG_UB };
    let modulus = tag_ub as u64 + 1;
    if slots > modulus {
        return Err(MpiError::TagSpace {
            machine: machine.name.clone(),
            needed: slots,
            tag_ub: i64::from(tag_ub),
        });
    }
    Ok(TagSpace {
        lanes,
        slots,
        modulus,
    })
}

/// The most messages of one step of `phase` from one node to another over one (last) link,
/// where the phase's links are shared (0 where they are exclusive: lanes bound them). Every
/// message has its receive, so receives are counted.
fn most_between(phase: &schedule_ir::Phase) -> u64 {
    if phase.links.is_exclusive() {
        return 0;
    }
    let mut most = 0;
    let mut count: std::collections::HashMap<(NodeId, LinkId), u64> = Default::default();
    for program in &phase.programs {
        for step in &program.steps {
            count.clear();
            for instr in step {
                if let schedule_ir::Instr::Recv { link, from, .. } = instr {
                    let c = count.entry((*from, *link)).or_default();
                    *c += 1;
                    most = most.max(*c);
                }
            }
        }
    }
    most
}

impl Wire {
    /// The address of `key` sent to or received from `peer` on lane `lane`.
    fn address(&self, key: &MessageKey, peer: NodeId, lane: u64) -> Result<Address, MpiError> {
        let unaddressable = |detail: String| MpiError::Unaddressable {
            from: self.node_name(key.from),
            to: self.node_name(key.to),
            link: self.link_name(key.link),
            detail,
        };
        let rank = self
            .ranks
            .rank(peer)
            .and_then(|r| i32::try_from(r.0).ok())
            .ok_or_else(|| {
                unaddressable(format!("{} is not a compute node", self.node_name(peer)))
            })?;
        let a = self
            .link_a
            .get(key.link.index())
            .ok_or_else(|| unaddressable("the link does not exist".into()))?;
        if lane >= self.lanes {
            return Err(unaddressable(format!(
                "{} transfers share the link direction in one step, more than its lanes",
                lane + 1
            )));
        }
        let tag = tag(
            self.step_offset,
            key.step,
            key.link,
            key.to == *a,
            lane,
            self.lanes,
            self.slots,
            self.modulus,
        );
        Ok(Address { rank, tag })
    }
}

/// The tag formula: `(g · slots + (2·link + backward) · lanes + lane) mod modulus`, where `g` is
/// the global step (`step_offset + step`).
#[allow(clippy::too_many_arguments)]
fn tag(
    step_offset: u64,
    step: StepId,
    link: LinkId,
    backward: bool,
    lane: u64,
    lanes: u64,
    slots: u64,
    modulus: u64,
) -> i32 {
    let g = u128::from(step_offset) + step.index() as u128;
    let direction = 2 * link.index() as u128 + u128::from(backward);
    let t = (g * u128::from(slots) + direction * u128::from(lanes) + u128::from(lane))
        % u128::from(modulus.max(1));
    // `modulus` is at most `i32::MAX + 1`, so `t` fits.
    i32::try_from(t).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use crate::test_common::*;
    use schedule_ir::{ChunkId, DType, ReduceOp};
    use std::collections::HashSet;

    fn key(step: usize, link: usize, from: usize, to: usize, chunk: usize) -> MessageKey {
        MessageKey {
            step: StepId::new(step),
            link: LinkId::new(link),
            from: NodeId::new(from),
            to: NodeId::new(to),
            first_chunk: ChunkId::new(chunk),
        }
    }

    fn two_phases(p: usize) -> Schedule {
        build_schedule(
            ring_machine(p),
            vec![
                ring_allreduce(p, "a", ReduceOp::Sum, DType::F32, 100),
                ring_allreduce(p, "b", ReduceOp::Sum, DType::F32, 100),
            ],
        )
    }

    #[test]
    fn ranks_are_compute_node_positions() {
        let s = build_schedule(
            star_machine(4),
            vec![star_allreduce(4, "g", ReduceOp::Sum, DType::I32, 8)],
        );
        let w = Wire::new(&s, "g", 2, 4, MIN_TAG_UB).unwrap();
        assert_eq!(w.node, NodeId::new(2));
        let out = w.outgoing([key(0, 3, 2, 3, 0)].iter()).unwrap();
        assert_eq!(out[0].rank, 3);
        // The switch (node 4) has no rank.
        let err = w.outgoing([key(0, 3, 2, 4, 0)].iter()).unwrap_err();
        assert!(err.to_string().contains("S is not a compute node"), "{err}");
    }

    /// In-network reduction: the switch of a star reduces and sends the sums back, so it runs
    /// a program; no rank could run it.
    #[test]
    fn a_device_with_a_program_is_refused() {
        let mut machine = star_machine(2);
        machine.nodes[2].name = "NIC0".into();
        machine.nodes[2].capacity = Some(4);
        let mut phase = star_allreduce(2, "grads", ReduceOp::Sum, DType::F32, 8);
        phase.programs[2].steps = vec![Vec::new(); phase.steps as usize];
        phase.programs[2].steps[0].push(schedule_ir::Instr::Copy {
            src: schedule_ir::BufferId(0),
            dst: schedule_ir::BufferId(0),
            chunks: vec![ChunkId(0)].into(),
        });
        let s = build_schedule(machine, vec![phase]);
        let want = "phase `grads`: device NIC0 runs a program (it reduces in the network), but \
                    under MPI only compute nodes run, one per rank, so nothing would run it: run \
                    the schedule in one process (`topoc run`, `runtime_lite::run_phase`), or \
                    compile it for MPI without reducing devices";
        assert_eq!(
            Wire::new(&s, "grads", 0, 2, MIN_TAG_UB)
                .unwrap_err()
                .to_string(),
            want
        );
        assert_eq!(no_device_programs(&s, None).unwrap_err().to_string(), want);
        // A device whose programs are empty (a NIC ring through a plain switch) is fine.
        let mut s = s;
        s.phases[0].programs[2].steps[0].clear();
        assert!(no_device_programs(&s, None).is_ok());
    }

    #[test]
    fn wrong_world_size() {
        let err = Wire::new(&two_phases(4), "a", 0, 3, MIN_TAG_UB).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the MPI job has 3 ranks but machine `ring-4` has 4 compute nodes: run one rank per \
             compute node (`mpirun -np 4 …`)"
        );
    }

    #[test]
    fn tags_without_wrapping_encode_phase_step_link_and_direction() {
        let s = two_phases(4);
        let a = Wire::new(&s, "a", 0, 4, i32::MAX).unwrap();
        let b = Wire::new(&s, "b", 0, 4, i32::MAX).unwrap();
        // 4 links, 1 lane: 8 slots per step; phase `a` has 6 steps.
        let steps_a = s.phases[0].steps as i32;
        assert_eq!(a.outgoing([key(0, 0, 0, 1, 0)].iter()).unwrap()[0].tag, 0);
        assert_eq!(a.outgoing([key(2, 0, 0, 1, 0)].iter()).unwrap()[0].tag, 16);
        assert_eq!(
            a.incoming([key(2, 3, 3, 0, 0)].iter()).unwrap()[0].tag,
            16 + 6
        );
        // Link 3 joins N3 (a) and N0 (b): N0 → N3 goes backward.
        assert_eq!(
            a.outgoing([key(2, 3, 0, 3, 0)].iter()).unwrap()[0].tag,
            16 + 7
        );
        assert_eq!(
            b.outgoing([key(0, 0, 0, 1, 0)].iter()).unwrap()[0].tag,
            8 * steps_a
        );
    }

    #[test]
    fn lanes_number_transfers_sharing_a_link_direction() {
        let mut s = two_phases(3);
        s.machine.links[0].lanes = 3;
        let w = Wire::new(&s, "a", 0, 3, i32::MAX).unwrap();
        // Sent in one order, expected in another: the tags follow the first chunk.
        let sent = w
            .outgoing([key(1, 0, 0, 1, 5), key(1, 0, 0, 1, 2), key(1, 1, 0, 2, 0)].iter())
            .unwrap();
        let seen = w
            .incoming([key(1, 0, 0, 1, 2), key(1, 0, 0, 1, 5)].iter())
            .unwrap();
        assert_eq!(sent[1].tag, seen[0].tag);
        assert_eq!(sent[0].tag, seen[1].tag);
        assert_ne!(sent[0].tag, sent[1].tag);
        assert_eq!((sent[0].rank, seen[0].rank), (1, 0));
        let err = w
            .outgoing(
                [
                    key(1, 1, 0, 2, 0),
                    key(1, 1, 0, 2, 1),
                    key(1, 1, 0, 2, 2),
                    key(1, 1, 0, 2, 3),
                ]
                .iter(),
            )
            .unwrap_err();
        assert!(err.to_string().contains("4 transfers share"), "{err}");
    }

    #[test]
    fn tags_stay_below_the_bound_and_distinct_within_a_step() {
        let mut s = two_phases(5);
        for l in &mut s.machine.links {
            l.lanes = 2;
        }
        // 5 links × 2 directions × 2 lanes = 20 slots; a bound of 29 makes tags wrap often.
        let w = Wire::new(&s, "b", 0, 5, 29).unwrap();
        for step in 0..40 {
            let mut tags = HashSet::new();
            for link in 0..5 {
                for (from, to) in [(link, (link + 1) % 5), ((link + 1) % 5, link)] {
                    let keys = [key(step, link, from, to, 0), key(step, link, from, to, 1)];
                    for address in w.outgoing(keys.iter()).unwrap() {
                        assert!((0..=29).contains(&address.tag));
                        tags.insert(address.tag);
                    }
                }
            }
            assert_eq!(tags.len(), 20, "step {step}");
        }
        let err = Wire::new(&s, "b", 0, 5, 18).unwrap_err();
        assert!(
            err.to_string().contains("needs 20 distinct MPI tags"),
            "{err}"
        );
    }
}
