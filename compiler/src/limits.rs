//! How large a schedule topoc will build: checked before lowering, so that a machine or a
//! vector too large to compile is refused with a diagnostic instead of exhausting memory or
//! failing verification.
//!
//! A ring schedule has `2(p-1)` steps (allreduce) in which every node of every logical ring
//! sends once and receives once: about `8p²` instructions for a ring walked both ways, `16p²`
//! for two. The limit below lets a `Ladder` of 512 pairs (16 760 832 instructions) and a `Ring`
//! of 1448 nodes compile, with peaks of 2.2 and 2.4 GiB of memory (139 and 156 bytes per
//! instruction; rings routed through switches take about 233: see BENCHMARKS.md), and refuses
//! a `Ring(nodes: 1449)` and a `Ring(nodes: 16384)`, which would need hundreds of gigabytes.
//!
//! Only the ring methods are checked here; a schedule the verifier cannot execute symbolically
//! (more than [`schedule_ir::limits::MAX_SYMBOLIC_WORDS`] words of state) is refused by the
//! verifier instead, which the driver reports against the machine (see BENCHMARKS.md).

use crate::diag::Problem;
use crate::embed::Ring;
use crate::path;
use crate::topology::spans::Path;
use schedule_ir::{Collective, DType};

/// The most instructions (sends plus receives, all nodes, all steps) one phase may have.
pub const MAX_INSTRUCTIONS: u64 = 1 << 24;

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
    .hint(format!(
        "a phase's vector may hold at most {}",
        schedule_ir::limits::vector_bytes_phrase()
    )))
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
    fn a_1448_node_ring_and_a_512_pair_ladder_compile_and_a_1449_node_ring_does_not() {
        let both = |p| vec![ring(p), ring(p)];
        let size = ring_instructions(Collective::AllReduce, &both(1448));
        assert_eq!(size, 2 * 2 * 1447 * 2 * 1448);
        assert!(check(&Path::root(), 1448, size).is_ok());
        let size = ring_instructions(Collective::AllReduce, &both(1449));
        assert!(check(&Path::root(), 1449, size).is_err());
        // The ladder's four logical rings of 1024 nodes: 64p² - 32p for p = 512 pairs.
        let ladder = vec![ring(1024), ring(1024), ring(1024), ring(1024)];
        let size = ring_instructions(Collective::AllReduce, &ladder);
        assert_eq!(size, 64 * 512 * 512 - 32 * 512);
        assert!(check(&Path::root(), 1024, size).is_ok());
        assert_eq!(
            ring_instructions(Collective::AllGather, &both(8)),
            2 * 7 * 16
        );
    }
}
