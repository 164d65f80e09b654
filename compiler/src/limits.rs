//! How large a schedule topoc will build: checked before lowering, so that a machine or a
//! vector too large to compile is refused with a diagnostic instead of exhausting memory or
//! failing verification.
//!
//! A ring schedule has `2(p-1)` steps (allreduce) in which every node of every logical ring
//! sends once and receives once: about `8p²` instructions for a ring walked both ways, `16p²`
//! for two, so the limit below lets a `Ring` of 1024 nodes compile (with about 1.5 GB of memory)
//! and refuses a `Ring(nodes: 16384)`, which would need hundreds of gigabytes.

use crate::diag::Problem;
use crate::embed::Ring;
use crate::path;
use crate::topology::spans::Path;
use schedule_ir::{Collective, DType};

/// The most instructions (sends plus receives, all nodes, all steps) one phase may have.
pub const MAX_INSTRUCTIONS: u64 = 1 << 23;

/// The most compute nodes `trees` and `halving-doubling` plan for. Both do work that grows with
/// the square of the compute nodes before they emit anything (packing spanning trees; routing
/// every partner pair), measured at about 7 s for 2048 nodes in a release build: beyond this
/// they would keep `auto` busy for minutes on machines that the ring methods refuse anyway.
pub const MAX_PLANNED_NODES: usize = 2048;

/// Refuses a phase (declared at `at`) whose vector is larger than the verifier accepts
/// ([`schedule_ir::verify::MAX_VECTOR_BYTES`]).
pub fn check_vector(at: &Path, elements: u64, dtype: DType) -> Result<(), Problem> {
    let limit = schedule_ir::verify::MAX_VECTOR_BYTES / dtype.size_bytes();
    if elements <= limit {
        return Ok(());
    }
    Err(Problem::at(
        at.field("elements"),
        format!("a vector of {elements} {dtype} elements is larger than topoc handles"),
        format!("more than {limit} elements"),
    )
    .hint("a phase's vector may hold at most 2^48 bytes (256 TiB)"))
}

/// Instructions of a ring lowering of `collective` over the logical `rings`.
pub fn ring_instructions(collective: Collective, rings: &[Ring]) -> u64 {
    let p = rings.first().map_or(0, |r| r.nodes.len() as u64);
    let halves = match collective {
        Collective::AllReduce => 2,
        _ => 1,
    };
    let steps = halves * p.saturating_sub(1);
    let transfers_per_step: u64 = rings.iter().map(|r| r.nodes.len() as u64).sum();
    2 * steps * transfers_per_step
}

/// Refuses a phase (declared at `at`) whose schedule would have `instructions` instructions,
/// if that is more than [`MAX_INSTRUCTIONS`].
pub fn check(at: &Path, nodes: usize, instructions: u64) -> Result<(), Problem> {
    if instructions <= MAX_INSTRUCTIONS {
        return Ok(());
    }
    Err(Problem::at(
        path!["machine"],
        format!(
            "the schedule for this {nodes}-node machine would have {instructions} instructions, \
             more than topoc builds ({MAX_INSTRUCTIONS})"
        ),
        format!("{nodes} nodes"),
    )
    .also(at.clone(), "this exchange phase")
    .hint("ring schedules grow with the square of the node count; compile a smaller machine"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedule_ir::{LinkId, NodeId};

    fn ring(p: usize) -> Ring {
        Ring {
            nodes: (0..p).map(NodeId::new).collect(),
            links: (0..p).map(LinkId::new).collect(),
            via: vec![Vec::new(); p],
        }
    }

    #[test]
    fn a_1024_node_ring_compiles_and_a_1025_node_one_does_not() {
        let both = |p| vec![ring(p), ring(p)];
        let size = ring_instructions(Collective::AllReduce, &both(1024));
        assert_eq!(size, 2 * 2 * 1023 * 2 * 1024);
        assert!(check(&Path::root(), 1024, size).is_ok());
        let size = ring_instructions(Collective::AllReduce, &both(1025));
        assert!(check(&Path::root(), 1025, size).is_err());
        assert_eq!(
            ring_instructions(Collective::AllGather, &both(8)),
            2 * 7 * 16
        );
    }
}
