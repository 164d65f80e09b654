//! `direct`: collectives in one step per half on machines where every two compute nodes share
//! a link (a `FullMesh`, or a `Graph` that is complete).
//!
//! The vector is cut into `p` chunks, chunk `j` owned by the `j`-th compute node.
//! - **reduce-scatter** (1 step): every node sends chunk `j` straight to node `j`, which
//!   reduces the `p - 1` arrivals into its own copy, in the order of the senders.
//! - **allgather** (1 step): every node sends its chunk straight to every other node.
//! - **allreduce**: the two in sequence, 2 steps.
//!
//! In each step every link direction between compute nodes carries exactly one chunk, `m/p`
//! bytes, so on `p - 1` links of bandwidth `B` per node an allreduce takes `2m/(pB)` plus two
//! latencies: the total-traffic bound `2(p-1)m/(p(p-1)B)` exactly, and the fewest steps any
//! schedule can have. Where links differ in speed a step lasts as long as its slowest link, so
//! on such machines `auto` weighs it against the balanced methods by estimate.

use super::plan::{self, Move, Packing, Plan};
use super::{link_between, vector_chunks, Job, Lowered, Lowering, PhaseSpec};
use crate::embed::EmbedError;
use crate::limits::Estimate;
use crate::machine::Machine;
use schedule_ir::{ChunkId, Collective, LinkId, Phase, RecvMode};

/// `direct`: every chunk straight to its owner and back.
pub struct Direct;

impl Lowering for Direct {
    /// `p(p - 1)` transfers of one chunk per half. A machine where some compute node has
    /// fewer links than that cannot be joined pairwise: it is estimated empty, and [`lower`]
    /// names the pair that shares no link.
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        let nodes = machine.compute_nodes();
        let p = nodes.len();
        if nodes.iter().any(|&n| machine.links_at(n).len() + 1 < p) {
            return Ok(Estimate::default());
        }
        let halves = if spec.collective == Collective::AllReduce {
            2
        } else {
            1
        };
        let transfers = (halves * p * p.saturating_sub(1)) as u64;
        Ok(Estimate::transfers(transfers, transfers, p as u64, 1)
            .on(p)
            .in_steps(halves as u64))
    }
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        Ok(Lowered::phase(lower(spec, job.name, machine)?))
    }
}

/// Whether `direct` lowers `collective`.
pub fn supports(collective: Collective) -> bool {
    // An allreduce and either of its halves.
    super::halves(collective).is_some()
}

/// Lowers `spec` with direct transfers; refuses a machine where two compute nodes share no
/// link, naming them.
pub fn lower(spec: &PhaseSpec, algorithm: &str, machine: &Machine) -> Result<Phase, EmbedError> {
    super::halves_only("direct", spec.collective)?;
    let nodes = machine.compute_nodes();
    let p = nodes.len();
    // links[i][j]: the link from the i-th to the j-th compute node.
    let mut links: Vec<Vec<LinkId>> = Vec::with_capacity(p);
    for &a in &nodes {
        let mut row = Vec::with_capacity(p);
        for &b in &nodes {
            if a == b {
                row.push(LinkId(0));
                continue;
            }
            let link = link_between(machine, a, b).ok_or_else(|| {
                EmbedError::NotApplicable(format!(
                    "`direct` needs a link between every two compute nodes, and {} and {} share none",
                    machine.node(a).name,
                    machine.node(b).name
                ))
            })?;
            row.push(link);
        }
        links.push(row);
    }
    let chunks = vector_chunks(spec.elements, p, |i| nodes.get(i).copied());
    let pairs = |mode: RecvMode, chunk_of: fn(usize, usize) -> usize| -> Vec<Move> {
        let mut step = Vec::with_capacity(p * p.saturating_sub(1));
        for (i, &from) in nodes.iter().enumerate() {
            for (j, &to) in nodes.iter().enumerate() {
                if i != j {
                    step.push(Move::data(
                        from,
                        to,
                        vec![links[i][j]],
                        vec![ChunkId::new(chunk_of(i, j))],
                        mode,
                    ));
                }
            }
        }
        step
    };
    // Reduce-scatter: i sends chunk j (the receiver's); allgather: i sends chunk i (its own).
    let scatter = || pairs(RecvMode::Reduce, |_, j| j);
    let gather = || pairs(RecvMode::Store, |i, _| i);
    let steps = match spec.collective {
        Collective::ReduceScatter => vec![scatter()],
        Collective::AllGather => vec![gather()],
        _ => vec![scatter(), gather()],
    };
    let plan = Plan::data(chunks, steps, Packing::AsGiven);
    Ok(plan::assemble(spec, algorithm, machine, plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedule_ir::Instr;

    use crate::lower::testing::machine;

    fn spec(collective: Collective, elements: u64) -> PhaseSpec {
        crate::lower::testing::spec(collective, schedule_ir::DType::F32, elements)
    }

    #[test]
    fn allreduce_on_a_full_mesh_is_two_steps_with_every_direction_busy_once() {
        let m = machine(r#"Topology(name: "m", machine: FullMesh(nodes: 5))"#);
        let phase = lower(&spec(Collective::AllReduce, 100), "direct", &m).expect("lowers");
        assert_eq!(phase.steps, 2);
        assert_eq!(phase.chunks.len(), 5);
        let ir = m.to_ir();
        let loads = schedule_ir::cost::step_loads(&ir, &phase);
        for step in &loads {
            // 10 links, 20 directions, one chunk of 20 elements (80 B) each.
            assert_eq!(step.busy(), 20);
            assert!(step.loads.iter().all(|l| l.bytes == 80 && l.transfers == 1));
        }
        // Node 2 receives four reducing chunk-2 transfers in step 0, then stores the four
        // chunks it lacks in step 1.
        let recvs = |k: usize| -> Vec<(u32, RecvMode)> {
            phase.programs[2].steps[k]
                .iter()
                .filter_map(|i| match i {
                    Instr::Recv { chunks, mode, .. } => chunks.first().map(|c| (c.0, *mode)),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(recvs(0), vec![(2, RecvMode::Reduce); 4]);
        assert_eq!(
            recvs(1),
            vec![
                (0, RecvMode::Store),
                (1, RecvMode::Store),
                (3, RecvMode::Store),
                (4, RecvMode::Store)
            ]
        );
    }

    #[test]
    fn refuses_a_machine_with_an_unjoined_pair_naming_it() {
        let m = machine(r#"Topology(name: "r", machine: Ring(nodes: 4))"#);
        let err = lower(&spec(Collective::AllReduce, 8), "direct", &m)
            .expect_err("a ring of 4 is not complete");
        assert_eq!(
            err.to_string(),
            "`direct` needs a link between every two compute nodes, and N0 and N2 share none"
        );
    }
}
