//! How large a schedule topoc will build: every method's size is estimated before it lowers
//! anything, and a schedule that would need more memory than the budget, more work than topoc
//! does for one phase, or more symbolic state than the verifier proves is refused with a
//! diagnostic instead of exhausting memory.
//!
//! One mechanism serves every path that lowers (`compile`, `check`, `simulate`, `draw`, `auto`
//! weighing every method): [`Method::lower`](crate::lower::Method::lower) asks the method for
//! its [`Estimate`] ([`Lowering::estimate`](crate::lower::Lowering::estimate), counted from the
//! machine's shape and the phase's size without building anything) and [`admit`] compares it
//! with the [`Budget`] the phase's knobs carry. Methods whose exact size is known only after a
//! search (the ring methods) estimate a lower bound first and are admitted again, exactly,
//! before they build.
//!
//! The memory estimate is [`BYTES_PER_INSTRUCTION`] per instruction, [`BYTES_PER_CHUNK_RUN`]
//! per run of chunk ids an instruction holds, [`BYTES_PER_CHUNK`] per chunk, and the verifier's
//! symbolic state (6 bytes per node, buffer and chunk, [`schedule_ir::limits`]); the constants
//! are fitted to the peaks of the scale benchmark (BENCHMARKS.md). The work
//! limit stays [`MAX_INSTRUCTIONS`]: a `Ladder` of 512 pairs (16 760 832 instructions) and a
//! `Ring` of 1448 nodes compile, in about 3 s each, and a `Ring(nodes: 1449)` does not.

use crate::diag::Problem;
use crate::embed::Ring;
use crate::machine::Machine;
use crate::path;
use crate::topology::spans::Path;
use schedule_ir::{Collective, DType};
use std::fmt;

/// The most instructions (sends plus receives, all nodes, all steps) one phase may have: the
/// work limit, whatever the memory budget.
pub const MAX_INSTRUCTIONS: u64 = 1 << 24;

/// The most chunk ids the instructions of one phase may name: the work limit on what lists
/// say, whatever they take in memory. Lists are held as runs, and the verifier stages and
/// combines a run's ids with a few plain operations each and one set union per distinct pair
/// of sets (not one per id), so 2^29 ids (`rotated-hd` on a 64 × 64 torus names 2^28) take
/// seconds, not minutes (BENCHMARKS.md, "Compile + verify at scale").
pub const MAX_CHUNK_REFS: u64 = 1 << 29;

/// The most planning work (see [`Estimate::planning`]) one phase may take: about a second in
/// a release build.
pub const MAX_PLANNING: u64 = 1 << 30;

/// The most compute nodes `trees` and `halving-doubling` plan for. Both do work that grows with
/// the square of the compute nodes before they emit anything (packing spanning trees; routing
/// every partner pair), measured at about 7 s for 2048 nodes in a release build: beyond this
/// they would keep `auto` busy for minutes on machines that the ring methods refuse anyway.
pub const MAX_PLANNED_NODES: usize = 2048;

/// Memory per instruction while a phase is lowered and verified (the plan, the programs, the
/// verifier's copies). With [`BYTES_PER_CHUNK_RUN`], fitted to the scale benchmark's peaks:
/// 156 to 233 bytes per ring instruction (one chunk id each), 732 MiB for `rotated-hd` on a
/// 32 × 32 torus (1 015 808 instructions naming 16 760 832 chunk ids).
pub const BYTES_PER_INSTRUCTION: u64 = 200;

/// Memory per run of chunk ids an instruction holds, beyond the instruction itself: the run
/// (12 bytes) in the plan's move and in the send and the receive, and the verifier's staging.
/// Lists hold runs ([`schedule_ir::ChunkIds`]), so a list of thousands of evenly spaced ids
/// costs what one id does.
pub const BYTES_PER_CHUNK_RUN: u64 = 40;

/// Memory per chunk of the phase (its range and owner, in the plan, the phase and the report).
pub const BYTES_PER_CHUNK: u64 = 64;

/// Memory per node and BSP step: each node's program holds a list per step, empty or not.
pub const BYTES_PER_NODE_STEP: u64 = 24;

/// The default memory budget: 4 GiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 4 << 30;

/// How much memory compiling one phase may take (`--memory-budget`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The most bytes one phase's lowering and verification may hold.
    pub memory_bytes: u64,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            memory_bytes: DEFAULT_MEMORY_BYTES,
        }
    }
}

/// What a method's schedule for one phase would hold, counted before it is built. Every count
/// saturates instead of overflowing, so an absurd machine gives `u64::MAX`, not a wrapped
/// small number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Estimate {
    /// Sends, receives and local operations, over every node and step.
    pub instructions: u64,
    /// Chunk ids named by those instructions.
    pub chunk_refs: u64,
    /// Runs of evenly spaced chunk ids those instructions hold ([`schedule_ir::ChunkIds`]):
    /// what their chunk lists take in memory. At most `chunk_refs`.
    pub chunk_runs: u64,
    /// Chunks the vector is cut into.
    pub chunks: u64,
    /// Buffers per node (data, scratch).
    pub buffers: u64,
    /// Nodes that run programs, whose state the verifier tracks.
    pub state_nodes: u64,
    /// BSP steps: every node that runs a program holds a (possibly empty) list per step.
    pub steps: u64,
    /// Planning work beyond building the instructions, in elementary operations: routing
    /// transfers and packing them into BSP steps (checked against [`MAX_PLANNING`]).
    pub planning: u64,
}

impl Estimate {
    /// A schedule in which `state_nodes` nodes hold `buffers` buffers of `chunks` chunks, and
    /// `transfers` transfers carry `chunk_refs / 2` chunk ids in all (a transfer is a send and
    /// a receive: two instructions).
    pub fn transfers(transfers: u64, carried: u64, chunks: u64, buffers: u64) -> Estimate {
        Estimate {
            instructions: transfers.saturating_mul(2),
            chunk_refs: carried.saturating_mul(2),
            chunk_runs: carried.saturating_mul(2),
            chunks,
            buffers,
            state_nodes: 0,
            steps: 0,
            planning: 0,
        }
    }

    /// The same with the chunk lists of the `transfers` held as `runs` runs in all (the
    /// default is one run per chunk id, the most there can be).
    pub fn in_runs(self, runs: u64) -> Estimate {
        Estimate {
            chunk_runs: runs.saturating_mul(2).min(self.chunk_refs),
            ..self
        }
    }

    /// The same in `steps` BSP steps.
    pub fn in_steps(self, steps: u64) -> Estimate {
        Estimate { steps, ..self }
    }

    /// The same with `nodes` running programs.
    pub fn on(self, nodes: usize) -> Estimate {
        Estimate {
            state_nodes: nodes as u64,
            ..self
        }
    }

    /// The generic estimate, for methods that give none of their own: a schedule the size of
    /// a ring allreduce over the compute nodes (`2(p-1)` steps in which every node sends and
    /// receives one chunk of `p`), with a scratch buffer.
    pub fn generic(machine: &Machine) -> Estimate {
        let p = machine.compute_nodes().len() as u64;
        let transfers = 2u64.saturating_mul(p.saturating_sub(1)).saturating_mul(p);
        Estimate::transfers(transfers, transfers, p, 2)
            .on(p as usize)
            .in_steps(2 * p.saturating_sub(1))
    }

    /// A ring lowering of `collective` over the logical `rings` (one chunk per transfer).
    pub fn rings(collective: Collective, rings: &[Ring]) -> Estimate {
        let p = rings.first().map_or(0, |r| r.nodes.len());
        Estimate::logical_rings(collective, rings.len(), p)
    }

    /// A ring lowering of `collective` over `count` logical rings of `p` nodes each.
    pub fn logical_rings(collective: Collective, count: usize, p: usize) -> Estimate {
        let instructions = ring_size(collective, count as u64, p as u64);
        Estimate {
            instructions,
            chunk_refs: instructions,
            chunk_runs: instructions,
            chunks: (p as u64).saturating_mul(count as u64),
            buffers: 1,
            state_nodes: p as u64,
            planning: 0,
            steps: (instructions / 2)
                .checked_div(p as u64 * count as u64)
                .unwrap_or(0),
        }
    }

    /// What `phase` holds, counted as an estimate counts it: so that a method's estimate can be
    /// compared with the schedule it lowers (the unit tests of each method do).
    pub fn measured(phase: &schedule_ir::Phase, state_nodes: usize) -> Estimate {
        use schedule_ir::Instr;
        let mut estimate = Estimate {
            chunks: phase.chunks.len() as u64,
            buffers: phase.buffers.len() as u64,
            state_nodes: state_nodes as u64,
            steps: u64::from(phase.steps),
            ..Estimate::default()
        };
        for instr in phase.programs.iter().flat_map(|p| p.steps.iter().flatten()) {
            let chunks = match instr {
                Instr::Send { chunks, .. }
                | Instr::Recv { chunks, .. }
                | Instr::Reduce { chunks, .. }
                | Instr::Copy { chunks, .. }
                | Instr::Scale { chunks, .. } => chunks,
            };
            estimate.instructions += 1;
            estimate.chunk_refs += chunks.len() as u64;
            estimate.chunk_runs += chunks.runs().len() as u64;
        }
        estimate
    }

    /// Whether this estimate is within `factor` of `actual` in instructions and chunk ids,
    /// either way (a test of a method's estimate).
    pub fn near(&self, actual: &Estimate, factor: u64) -> bool {
        let within =
            |e: u64, a: u64| e <= a.saturating_mul(factor) && a <= e.saturating_mul(factor);
        within(self.instructions, actual.instructions) && within(self.chunk_refs, actual.chunk_refs)
    }

    /// Bytes of the verifier's symbolic state: 6 per (node, buffer, chunk) slot.
    pub fn state_bytes(&self) -> u64 {
        self.state_nodes
            .saturating_mul(self.buffers)
            .saturating_mul(self.chunks)
            .saturating_mul(6)
    }

    /// Bytes the phase would take to lower and verify.
    pub fn bytes(&self) -> u64 {
        self.instructions
            .saturating_mul(BYTES_PER_INSTRUCTION)
            .saturating_add(self.chunk_runs.saturating_mul(BYTES_PER_CHUNK_RUN))
            .saturating_add(self.chunks.saturating_mul(BYTES_PER_CHUNK))
            .saturating_add(self.state_bytes())
            .saturating_add(
                self.steps
                    .saturating_mul(self.state_nodes)
                    .saturating_mul(BYTES_PER_NODE_STEP),
            )
    }
}

/// Links on a shortest path from `from` to every node (`u64::MAX` where none), through any
/// node: what routed methods estimate their routes' lengths with, in one breadth-first search.
pub fn hops_from(machine: &Machine, from: schedule_ir::NodeId) -> Vec<u64> {
    let mut hops = vec![u64::MAX; machine.node_count()];
    let Some(first) = hops.get_mut(from.index()) else {
        return hops;
    };
    *first = 0;
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(node) = queue.pop_front() {
        let next = hops[node.index()] + 1;
        for (_, to) in machine.links_at(node) {
            if hops[to.index()] == u64::MAX {
                hops[to.index()] = next;
                queue.push_back(to);
            }
        }
    }
    hops
}

/// Why a phase was refused for its size, in words for `auto`'s report and the diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// More memory than the budget.
    Memory {
        /// The estimate.
        estimate: Estimate,
        /// The budget.
        budget: Budget,
    },
    /// More instructions than [`MAX_INSTRUCTIONS`].
    Work {
        /// The estimate.
        estimate: Estimate,
    },
    /// More chunk ids named than [`MAX_CHUNK_REFS`].
    ChunkRefs {
        /// The estimate.
        estimate: Estimate,
    },
    /// More planning than [`MAX_PLANNING`].
    Planning {
        /// The estimate.
        estimate: Estimate,
    },
    /// More symbolic state than the verifier proves ([`schedule_ir::limits::MAX_SYMBOLIC_WORDS`]).
    Verifier {
        /// The estimate.
        estimate: Estimate,
    },
}

impl Refusal {
    /// Whether raising `--memory-budget` would help.
    pub fn is_memory(&self) -> bool {
        matches!(self, Refusal::Memory { .. })
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = |e: &Estimate| {
            format!(
                "{} instructions naming {} chunk ids, {} chunks",
                e.instructions, e.chunk_refs, e.chunks
            )
        };
        match self {
            Refusal::Memory { estimate, budget } => write!(
                f,
                "needs about {} ({}), more than the memory budget of {} (--memory-budget)",
                bytes_phrase(estimate.bytes()),
                size(estimate),
                bytes_phrase(budget.memory_bytes)
            ),
            Refusal::Work { estimate } => write!(
                f,
                "would have {} instructions, more than topoc builds for one phase ({MAX_INSTRUCTIONS})",
                estimate.instructions
            ),
            Refusal::ChunkRefs { estimate } => write!(
                f,
                "would name {} chunk ids in its instructions, more than topoc builds for one \
                 phase ({MAX_CHUNK_REFS})",
                estimate.chunk_refs
            ),
            Refusal::Planning { estimate } => write!(
                f,
                "would take about {} operations to route and pack its transfers, more than \
                 topoc spends on one phase ({MAX_PLANNING})",
                estimate.planning
            ),
            Refusal::Verifier { estimate } => write!(
                f,
                "would need {} of symbolic state ({} nodes × {} buffers × {} chunks), more than \
                 the verifier proves ({})",
                bytes_phrase(estimate.state_bytes()),
                estimate.state_nodes,
                estimate.buffers,
                estimate.chunks,
                bytes_phrase(schedule_ir::limits::MAX_SYMBOLIC_WORDS * 8)
            ),
        }
    }
}

/// A byte count in binary units; beyond what `u64` holds, "more than 16 EiB".
fn bytes_phrase(bytes: u64) -> String {
    if bytes == u64::MAX {
        return "more than 16 EiB".to_string();
    }
    crate::simulate::format_bytes(bytes)
}

/// Admits a phase whose schedule is `estimate`, or says which limit it passes: the work limits
/// (instructions, chunk ids, planning), then the verifier's, then the memory budget.
pub fn admit(estimate: Estimate, budget: &Budget) -> Result<(), Refusal> {
    if estimate.instructions > MAX_INSTRUCTIONS {
        return Err(Refusal::Work { estimate });
    }
    if estimate.chunk_refs > MAX_CHUNK_REFS {
        return Err(Refusal::ChunkRefs { estimate });
    }
    if estimate.planning > MAX_PLANNING {
        return Err(Refusal::Planning { estimate });
    }
    if estimate.state_bytes().div_ceil(8) > schedule_ir::limits::MAX_SYMBOLIC_WORDS {
        return Err(Refusal::Verifier { estimate });
    }
    if estimate.bytes() > budget.memory_bytes {
        return Err(Refusal::Memory {
            estimate,
            budget: *budget,
        });
    }
    Ok(())
}

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
    ring_size(collective, rings.len() as u64, p)
}

/// Instructions of a ring lowering of `collective` over `count` logical rings of `p` nodes:
/// `halves × (p - 1)` steps in which every node of every ring sends once and receives once.
fn ring_size(collective: Collective, count: u64, p: u64) -> u64 {
    let halves = match collective {
        Collective::AllReduce => 2,
        _ => 1,
    };
    let steps = halves * p.saturating_sub(1);
    2u64.saturating_mul(steps)
        .saturating_mul(count)
        .saturating_mul(p)
}

/// The diagnostic for a phase (declared at `at`) that every method it may use refused for its
/// size: the machine, the phase, each method's reason, and how to raise the budget when that
/// would help.
pub fn refused(at: &Path, nodes: usize, refusals: &[(String, Refusal)]) -> Problem {
    let headline = match refusals {
        [(_, Refusal::Work { estimate })] => format!(
            "the schedule for this {nodes}-node machine would have {} instructions, more than \
             topoc builds ({MAX_INSTRUCTIONS})",
            estimate.instructions
        ),
        [(method, why)] => format!("`{method}` on this {nodes}-node machine {why}"),
        _ => format!("every method that applies to this {nodes}-node machine is over a limit"),
    };
    let mut problem = Problem::at(path!["machine"], headline, format!("{nodes} nodes"))
        .also(at.clone(), "this exchange phase");
    if refusals.len() > 1 {
        for (method, why) in refusals {
            problem = problem.note(format!("{method}: {why}"));
        }
    }
    let hint = if refusals.iter().any(|(_, r)| r.is_memory()) {
        "raise the budget with --memory-budget (e.g. --memory-budget 16GiB) if the machine has \
         the memory, or compile a smaller machine"
    } else if matches!(refusals, [(m, Refusal::Work { .. })] if m.contains("ring")) {
        "ring schedules grow with the square of the node count; compile a smaller machine"
    } else {
        "compile a smaller machine or a smaller vector, or choose another method"
    };
    problem.hint(hint)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
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
        let budget = Budget::default();
        let both = |p| vec![ring(p), ring(p)];
        let size = ring_instructions(Collective::AllReduce, &both(1448));
        assert_eq!(size, 2 * 2 * 1447 * 2 * 1448);
        assert_eq!(
            admit(Estimate::rings(Collective::AllReduce, &both(1448)), &budget),
            Ok(())
        );
        let refused = admit(Estimate::rings(Collective::AllReduce, &both(1449)), &budget);
        assert!(matches!(refused, Err(Refusal::Work { .. })), "{refused:?}");
        // The ladder's four logical rings of 1024 nodes: 64p² - 32p for p = 512 pairs.
        let ladder = vec![ring(1024), ring(1024), ring(1024), ring(1024)];
        let size = ring_instructions(Collective::AllReduce, &ladder);
        assert_eq!(size, 64 * 512 * 512 - 32 * 512);
        assert_eq!(
            admit(Estimate::rings(Collective::AllReduce, &ladder), &budget),
            Ok(())
        );
        assert_eq!(
            ring_instructions(Collective::AllGather, &both(8)),
            2 * 7 * 16
        );
    }

    #[test]
    fn a_smaller_budget_refuses_by_memory_and_names_the_option() {
        let both = vec![ring(1024), ring(1024)];
        let estimate = Estimate::rings(Collective::AllReduce, &both);
        let small = Budget {
            memory_bytes: 1 << 30,
        };
        let refused = admit(estimate, &small).unwrap_err();
        assert!(refused.is_memory());
        let text = refused.to_string();
        assert!(
            text.contains("more than the memory budget of 1 GiB (--memory-budget)"),
            "{text}"
        );
        assert_eq!(admit(estimate, &Budget::default()), Ok(()));
    }

    #[test]
    fn symbolic_state_past_the_verifiers_limit_is_refused_whatever_the_budget() {
        // 16384 nodes × 65536 chunks × 6 bytes: 6 GiB of state, past the verifier's 1 GiB.
        let estimate = Estimate::transfers(1, 1, 65536, 1).on(16384);
        let huge = Budget {
            memory_bytes: u64::MAX,
        };
        assert!(matches!(
            admit(estimate, &huge),
            Err(Refusal::Verifier { .. })
        ));
    }

    /// Every method's estimate against the schedule it lowers, on every example: methods that
    /// count their schedule exactly are within a factor of two of it in instructions and chunk
    /// ids, and no estimate falls short of the schedule's size by more than a factor of four.
    #[test]
    fn estimates_match_the_schedules_of_the_examples() {
        use crate::lower::Method;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "ron"))
            .collect();
        files.sort();
        let exact = [
            Method::LadderRings,
            Method::RotatedHd,
            Method::Direct,
            Method::InNetwork,
        ];
        let mut compared = 0;
        for file in files {
            let loaded = crate::compile::load(&std::fs::read_to_string(&file).unwrap()).unwrap();
            let machine = &loaded.machine;
            for request in loaded.phases().unwrap() {
                let knobs = request.knobs(&crate::Options::default()).unwrap();
                for method in Method::ALL {
                    if !method.supports(request.spec.collective) {
                        continue;
                    }
                    let Ok(lowered) = method.lower(machine, &request.spec, &knobs) else {
                        continue;
                    };
                    let estimate = method.estimate(machine, &request.spec, &knobs).unwrap();
                    let actual = Estimate::measured(&lowered.phase, estimate.state_nodes as usize);
                    let case = format!("{} {} `{}`", file.display(), method, request.spec.name);
                    // Instructions beyond sends and receives: the mean's divisions.
                    if exact.contains(&method) && request.spec.op != schedule_ir::ReduceOp::Mean {
                        assert!(
                            estimate.near(&actual, 2),
                            "{case}: {estimate:?} for {actual:?}"
                        );
                    }
                    // `ring` estimates one logical ring before its search (a lower bound), and
                    // admits the rings found again, walked around: the schedule holds no more
                    // than that, and no less than half when its chunks meet in the middle (half
                    // the steps) or rings sharing a link send as one.
                    let estimate = if method == Method::Ring {
                        let set = crate::lower::ring::rings(machine).unwrap();
                        let logical = crate::lower::ring::Logical::of(machine, &set);
                        Estimate::rings(request.spec.collective, &logical.rings)
                    } else {
                        estimate
                    };
                    if method == Method::Ring && request.spec.op != schedule_ir::ReduceOp::Mean {
                        assert!(
                            actual.instructions <= estimate.instructions
                                && actual.chunk_refs <= estimate.chunk_refs
                                && estimate.near(&actual, 4),
                            "{case}: {estimate:?} for {actual:?}"
                        );
                    }
                    assert!(
                        estimate.bytes().saturating_mul(4) >= actual.bytes(),
                        "{case}: {estimate:?} for {actual:?}"
                    );
                    compared += 1;
                }
            }
        }
        assert!(compared > 40, "only {compared} schedules compared");
    }

    #[test]
    fn counts_saturate_instead_of_wrapping() {
        let estimate = Estimate::transfers(u64::MAX, u64::MAX, u64::MAX, 2).on(usize::MAX);
        assert_eq!(estimate.bytes(), u64::MAX);
        assert!(admit(estimate, &Budget::default()).is_err());
        assert!(bytes_phrase(u64::MAX).contains("16 EiB"));
    }
}
