//! `in-network`: allreduce in the NICs and the switch of a single-switch `Fabric`.
//!
//! The vector is cut into segments of at most the MTU (the smaller of the NICs' and the
//! switch's), one chunk each. Segments travel in **batches** of `B`, one batch launched every
//! `stride` steps; batch `g` launched at step `t` goes:
//!
//! 1. step `t`: every rank sends the batch to its NIC, which stores the first rank's copy and
//!    reduces the others in (program order: ranks in id order);
//! 2. step `t+1`: every NIC sends its partial to the switch, which stores the first and
//!    reduces the others in;
//! 3. step `t+2`: the switch sends the finished batch to every NIC, which stores it;
//! 4. step `t+3`: every NIC sends it to every local rank, which stores it.
//!
//! Each batch holds a NIC's unit for four steps (partial, then result) and the switch's for
//! two, so `B = min(nic units / 4, switch units / 2)` when that is at least 1 (`stride = 1`),
//! else `B = 1` and batches are spaced so that no device ever holds more segments than it has
//! units — what the verifier's capacity pass checks. Each link direction carries one transfer
//! per step: ranks→NIC, NIC→switch, switch→NIC and NIC→ranks of different batches use
//! different directions.
//!
//! Applies to allreduce on a fabric whose NICs reduce. When the NICs cannot reduce, the method
//! says so and `auto` goes on to `ring`, which runs through the NICs and the switch. When the
//! switch cannot reduce, or the fabric has leaf switches under a spine, it falls back to a ring
//! among the NICs ([`super::nic_ring`]) and says so; `auto` weighs it against `ring` through
//! the ranks like any other schedule. Reducing in the leaf switches and the spine of a
//! two-level fabric is not done yet.

use super::plan::{self, Move, Packing, Plan};
use super::{vector_chunks, Embedding, Job, Lowered, Lowering, PhaseSpec};
use crate::embed::EmbedError;
use crate::limits::Estimate;
use crate::machine::{Machine, Shape};
use schedule_ir::{ChunkId, Collective, LinkId, NodeId, NodeKind, Phase, RecvMode};

/// `in-network`: allreduce reduced in the NICs and the switch of a `Fabric`.
pub struct InNetwork;

impl Lowering for InNetwork {
    fn supports(&self, collective: Collective) -> bool {
        collective == Collective::AllReduce
    }
    fn applies(&self, job: &Job<'_>) -> Result<Embedding, EmbedError> {
        let machine = job.machine;
        applies(machine).map(Embedding::summary)
    }
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        estimate(spec, machine)
    }
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        lower(spec, machine).map(Lowered::described)
    }
    fn sized(&self) -> bool {
        true
    }
}

/// A host: its NIC, the NIC's link to its switch, and its ranks with their links to the NIC.
pub(super) type Host = (NodeId, LinkId, Vec<(NodeId, LinkId)>);

/// A fabric whose NICs reduce: every NIC with its ranks and links, and the switch when there
/// is one and it reduces.
pub(super) struct Layout {
    /// The hosts, NICs in id order.
    pub(super) hosts: Vec<Host>,
    /// The single switch and its segment units, when it reduces; else why not.
    pub(super) switch: Result<(NodeId, u32), String>,
    /// Segment units of each NIC (the smallest).
    pub(super) nic_units: u32,
    /// The smallest MTU of the fabric's devices, in bytes.
    pub(super) mtu_bytes: u32,
}

fn refuse(why: String) -> EmbedError {
    EmbedError::NotApplicable(format!("`in-network`: {why}"))
}

/// Finds the fabric's layout, or why `in-network` does not apply.
fn layout(machine: &Machine) -> Result<Layout, EmbedError> {
    if machine.shape != Shape::Fabric {
        let broke = machine.failed.broke(|s| *s == Shape::Fabric);
        return Err(EmbedError::NotApplicable(format!(
            "`in-network` runs on intact `Fabric` machines only{broke}"
        )));
    }
    let name = |n: NodeId| machine.node(n).name.clone();
    let mut hosts: Vec<Host> = Vec::new();
    for rank in machine.compute_nodes() {
        let [(link, nic)] = machine.links_at(rank)[..] else {
            return Err(refuse(format!(
                "rank `{}` is linked to more than its NIC (a `host_fabric`), so its data could \
                 bypass the NIC's reduction",
                name(rank)
            )));
        };
        match hosts.iter_mut().find(|h| h.0 == nic) {
            Some(h) => h.2.push((rank, link)),
            None => hosts.push((nic, link, vec![(rank, link)])),
        }
    }
    hosts.sort_by_key(|h| h.0);
    let caps = |n: NodeId| machine.devices.get(&n).copied();
    let mut nic_units = u32::MAX;
    let mut mtu_bytes = u32::MAX;
    for &(nic, _, _) in &hosts {
        match caps(nic) {
            Some(c) if c.reduces && c.segment_buffers > 0 => {
                nic_units = nic_units.min(c.segment_buffers);
                mtu_bytes = mtu_bytes.min(c.mtu_bytes);
            }
            _ => {
                return Err(refuse(format!(
                    "NIC `{}` cannot reduce; `ring` runs through the NICs and the switch instead",
                    name(nic)
                )))
            }
        }
    }
    for c in machine.devices.values() {
        mtu_bytes = mtu_bytes.min(c.mtu_bytes.max(1));
    }
    let mut switch: Option<Result<NodeId, String>> = None;
    for host in &mut hosts {
        let up: Vec<(LinkId, NodeId)> = machine
            .links_at(host.0)
            .into_iter()
            .filter(|(_, n)| machine.node(*n).kind == NodeKind::Switch)
            .collect();
        let [(link, sw)] = up[..] else {
            return Err(refuse(format!(
                "NIC `{}` is not on one switch",
                name(host.0)
            )));
        };
        switch = match switch {
            None => Some(Ok(sw)),
            Some(Ok(s)) if s != sw => {
                Some(Err("the fabric has leaf switches under a spine".to_string()))
            }
            other => other,
        };
        host.1 = link;
    }
    let switch = match switch {
        None => return Err(refuse("the fabric has no switch".into())),
        Some(Err(why)) => Err(why),
        Some(Ok(sw)) => match caps(sw) {
            Some(c) if c.reduces && c.segment_buffers > 0 => Ok((sw, c.segment_buffers)),
            _ => Err(format!("the switch `{}` cannot reduce", name(sw))),
        },
    };
    Ok(Layout {
        hosts,
        switch,
        nic_units,
        mtu_bytes,
    })
}

/// The size of [`lower`]'s schedule (or its ring among the NICs'), counted from the layout and
/// the segment count without building it: per batch, every rank and NIC sends up and receives
/// back; per wave of the ring, the ranks send up, the NICs run a ring, and send back.
fn estimate(spec: &PhaseSpec, machine: &Machine) -> Result<Estimate, EmbedError> {
    let l = layout(machine)?;
    let seg_elems = (u64::from(l.mtu_bytes) / spec.dtype.size_bytes()).max(1);
    let segments = spec.elements.div_ceil(seg_elems).max(1);
    let p = machine.compute_nodes().len() as u64;
    let h = l.hosts.len() as u64;
    let (per_group, group, steps_each, ring_moves) = match &l.switch {
        Ok((_, switch_units)) => {
            let full = u64::from((l.nic_units / 4).min(switch_units / 2));
            let (batch, stride) = if full >= 1 {
                (full, 1)
            } else {
                let need = |units: u32, steps: u64| steps.div_ceil(u64::from(units.max(1)));
                (1, need(l.nic_units, 4).max(need(*switch_units, 2)))
            };
            (2 * p + 2 * h, batch, stride, 0)
        }
        Err(_) => {
            let ring = 2 * h.saturating_sub(1);
            (2 * p, u64::from(l.nic_units.max(1)), 2 + ring * h, ring * h)
        }
    };
    let groups = segments.div_ceil(group);
    let transfers = groups.saturating_mul(per_group + ring_moves);
    // Ring moves carry a wave's share each: `2(h - 1)` shares of a wave per NIC.
    let carried = segments.saturating_mul(per_group + 2 * h.saturating_sub(1));
    Ok(Estimate::transfers(transfers, carried, segments, 1)
        .on((p + h + 1) as usize)
        .in_steps(groups.saturating_mul(steps_each).saturating_add(4)))
}

/// Whether `in-network` applies to `machine`, and how, in a line for humans (`topoc check`).
pub fn applies(machine: &Machine) -> Result<String, EmbedError> {
    let l = layout(machine)?;
    Ok(match &l.switch {
        Ok((sw, units)) => format!(
            "{} NICs ({} units each) reduce into `{}` ({units} units), segments of at most {} B",
            l.hosts.len(),
            l.nic_units,
            machine.node(*sw).name,
            l.mtu_bytes
        ),
        Err(why) => format!(
            "{why}: a ring among the {} NICs ({} units each), segments of at most {} B",
            l.hosts.len(),
            l.nic_units,
            l.mtu_bytes
        ),
    })
}

/// Lowers `spec` in the network, with a line describing how; collectives other than
/// allreduce are refused with a reason, so that `auto` moves on.
pub fn lower(spec: &PhaseSpec, machine: &Machine) -> Result<(Phase, Vec<String>), EmbedError> {
    let l = layout(machine)?;
    if spec.collective != Collective::AllReduce {
        return Err(refuse(format!(
            "lowers allreduce only, not {}",
            spec.collective
        )));
    }
    let seg_elems = (u64::from(l.mtu_bytes) / spec.dtype.size_bytes()).max(1);
    let segments = usize::try_from(spec.elements.div_ceil(seg_elems).max(1))
        .map_err(|_| refuse("too many segments".into()))?;
    let (switch, switch_units) = match &l.switch {
        Ok(s) => *s,
        Err(why) => {
            // Under `auto`, the ring among the NICs competes with every other method on its
            // estimate, like any schedule.
            return Ok(super::nic_ring::lower(spec, machine, &l, segments, why));
        }
    };
    let full = (l.nic_units / 4).min(switch_units / 2) as usize;
    let (batch, stride) = if full >= 1 {
        (full, 1)
    } else {
        let need = |units: u32, steps: u32| steps.div_ceil(units.max(1)) as usize;
        (1, need(l.nic_units, 4).max(need(switch_units, 2)))
    };
    let batches = segments.div_ceil(batch);
    let steps = (batches - 1) * stride + 4;

    let mut plan_steps: Vec<Vec<Move>> = vec![Vec::new(); steps];
    let mut put =
        |step: usize, from: NodeId, to: NodeId, link: LinkId, chunks: &[ChunkId], mode| {
            plan_steps[step].push(Move::data(from, to, vec![link], chunks.to_vec(), mode));
        };
    let first_or = |first: bool| {
        if first {
            RecvMode::Store
        } else {
            RecvMode::Reduce
        }
    };
    for g in 0..batches {
        let chunks: Vec<ChunkId> = (g * batch..((g + 1) * batch).min(segments))
            .map(ChunkId::new)
            .collect();
        let t = g * stride;
        for (h, (nic, up, ranks)) in l.hosts.iter().enumerate() {
            for (r, &(rank, link)) in ranks.iter().enumerate() {
                put(t, rank, *nic, link, &chunks, first_or(r == 0));
            }
            put(t + 1, *nic, switch, *up, &chunks, first_or(h == 0));
            put(t + 2, switch, *nic, *up, &chunks, RecvMode::Store);
            for &(rank, link) in ranks {
                put(t + 3, *nic, rank, link, &chunks, RecvMode::Store);
            }
        }
    }
    let chunks = vector_chunks(spec.elements, segments, |_| None);
    let described = vec![format!(
        "{segments} segment(s) of at most {} B, {batch} per batch every {stride} step(s): ranks → NIC → `{}` → NICs → ranks",
        l.mtu_bytes,
        machine.node(switch).name
    )];
    let phase = plan::assemble(
        spec,
        "in-network",
        machine,
        Plan::data(chunks, plan_steps, Packing::AsGiven),
    );
    Ok((phase, described))
}
