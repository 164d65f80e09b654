//! Chakra execution traces: one verified phase as a custom collective for the ASTRA-sim
//! simulator, one trace file per rank, one set of files per message size.
//!
//! [`export`] takes a [`VerifiedSchedule`] and returns every file's bytes, or a [`ChakraError`]
//! saying why the phase cannot be expressed. `docs/chakra.md` describes the mapping for users;
//! in short:
//!
//! - **Files.** ASTRA-sim reads a custom collective from the system-configuration key
//!   `all-reduce-implementation-custom` (or `reduce-scatter-…`, `all-gather-…`) whose value is
//!   a path `P`; rank `r` reads `P.r.et`. So an export to prefix `P` writes `P.r.et` for every
//!   rank and `P.json`, the configuration snippet naming `P`. Because ASTRA-sim takes message
//!   sizes from the trace, not from the workload, each size asked for gets a set of its own:
//!   prefix `P.<bytes>`.
//! - **Trace format.** Each file is a sequence of messages of the vendored schema
//!   (`compiler/proto/chakra/et_def.proto`), each preceded by its length as a varint: first a
//!   `GlobalMetadata`, then the rank's `Node`s, ids from 0, every node after those it depends on.
//! - **Ranks.** Compute node `n` is rank `r` = its position among the compute nodes. A transfer
//!   routed through switches or forwarding nodes is a plain message from its sender to its
//!   receiver: ASTRA-sim routes over its own network model.
//! - **Nodes.** A send is a `COMM_SEND_NODE` (`comm_dst`, `comm_size` in bytes, `comm_tag`); a
//!   receive a `COMM_RECV_NODE` (`comm_src`, same size and tag). Tags count the messages of one
//!   ordered pair of ranks, so sender and receiver agree and no two messages of a pair share one.
//!   A receive that combines, a local reduce, copy and mean's division are `COMP_NODE`s; a
//!   combining node lasts as long as the machine's reduction rate says.
//! - **Dependencies.** `data_deps` keep exactly what the BSP steps guarantee, location by
//!   location (see [`graph`]): ranks are not held in lockstep.
//!
//! Attributes named `topoc_*` record which buffer and chunks a node touches; ASTRA-sim ignores
//! them, and a replay of the traces uses them to check the data movement.
//!
//! Refused: collectives ASTRA-sim has no custom-implementation key for (broadcast, reduce);
//! phases whose programs run on switches (in-network reduction: a trace runs on ranks only);
//! sizes that are not a whole number of elements; steps whose local copies read and overwrite
//! each other in a cycle; more than one phase without a choice.

mod graph;
pub mod schema;

use super::{choose_phase, PhaseChoiceError};
use prost::Message;
use schedule_ir::{Collective, VerifiedSchedule};
use thiserror::Error;

/// The schema version written into every trace's `GlobalMetadata` (as Chakra's own
/// generators write it).
pub const VERSION: &str = "1.0.0";

/// What to export.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The phase to export; `None` is fine when the schedule has exactly one.
    pub phase: Option<String>,
    /// Message sizes in bytes per rank, one trace set each; empty: one set at the phase's own
    /// size, written without a size in its name.
    pub sizes: Vec<u64>,
}

/// Why a phase cannot be written as Chakra traces.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ChakraError {
    /// No one phase to export.
    #[error(transparent)]
    Phase(#[from] PhaseChoiceError),
    /// A collective ASTRA-sim takes no custom implementation for.
    #[error(
        "phase `{phase}` is a {collective}, but ASTRA-sim takes custom implementations only for \
         allreduce, reduce-scatter, allgather and all-to-all"
    )]
    UnsupportedCollective {
        /// The phase.
        phase: String,
        /// The collective, in words.
        collective: String,
    },
    /// A switch runs a program: the phase reduces in the network.
    #[error(
        "phase `{phase}` combines data on `{node}`, a switch or NIC (in-network reduction), but a \
         Chakra trace runs on compute ranks only and ASTRA-sim's network does not combine; \
         compile the phase with a method that reduces on the compute nodes (--algorithm ring)"
    )]
    InNetwork {
        /// The phase.
        phase: String,
        /// The device.
        node: String,
    },
    /// A size that is not a whole number of elements.
    #[error(
        "size {bytes} B is not a whole, positive number of the phase's {dtype}-byte elements; \
         give sizes that are multiples of {dtype} B"
    )]
    BadSize {
        /// The size asked for.
        bytes: u64,
        /// Bytes per element.
        dtype: u64,
    },
    /// A step whose local copies or reductions read and overwrite each other in a cycle.
    #[error(
        "phase `{phase}`, step {step}: {node}'s local copies and reductions read and overwrite \
         each other in a cycle, which a trace (no steps, only dependencies) cannot order"
    )]
    Unorderable {
        /// The phase.
        phase: String,
        /// The step.
        step: u32,
        /// The node.
        node: String,
    },
    /// More messages between two ranks than a 32-bit tag counts.
    #[error(
        "phase `{phase}`: rank {src} sends rank {dst} more messages than a 32-bit comm_tag can \
         number"
    )]
    TooManyMessages {
        /// The phase.
        phase: String,
        /// Sender.
        src: u32,
        /// Receiver.
        dst: u32,
    },
    /// Something a verified schedule rules out; a bug in topoc.
    #[error(
        "internal error exporting phase `{phase}` to Chakra traces: {detail}; please report this"
    )]
    Internal {
        /// The phase.
        phase: String,
        /// What went wrong.
        detail: String,
    },
}

/// The traces of one message size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceSet {
    /// The size asked for, in bytes per rank; `None` for the phase's own size.
    pub size: Option<u64>,
    /// One file's bytes per rank, in rank order.
    pub ranks: Vec<Vec<u8>>,
}

/// A whole export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    /// The system-configuration key that loads the traces
    /// (`all-reduce-implementation-custom`, …).
    pub key: &'static str,
    /// One set per size.
    pub sets: Vec<TraceSet>,
}

impl Export {
    /// Every file to write for the prefix `prefix`, as (path, bytes), in a fixed order: per
    /// set, the ranks' traces and then the configuration snippet.
    pub fn files(&self, prefix: &str) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for set in &self.sets {
            let base = match set.size {
                Some(bytes) => format!("{prefix}.{bytes}"),
                None => prefix.to_string(),
            };
            for (rank, bytes) in set.ranks.iter().enumerate() {
                out.push((format!("{base}.{rank}.et"), bytes.clone()));
            }
            out.push((
                format!("{base}.json"),
                system_json(self.key, &base).into_bytes(),
            ));
        }
        out
    }
}

/// The system-configuration snippet that makes ASTRA-sim run the traces with prefix `base`:
/// a JSON object with the one key, to merge into the system file.
pub fn system_json(key: &str, base: &str) -> String {
    let mut map = serde_json::Map::new();
    map.insert(
        key.to_string(),
        serde_json::Value::Array(vec![serde_json::Value::String(base.to_string())]),
    );
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(map))
        .unwrap_or_else(|_| "{}".to_string());
    format!("{text}\n")
}

/// The phase chosen by `options`, or why none can be.
fn choose<'a>(
    schedule: &'a schedule_ir::Schedule,
    options: &Options,
) -> Result<&'a schedule_ir::Phase, ChakraError> {
    Ok(choose_phase(
        schedule,
        options.phase.as_deref(),
        "a set of traces holds one collective",
    )?)
}

/// Exports one phase of a verified schedule as Chakra traces, one set per size.
///
/// A size re-chunks the verified phase ([`Phase::with_elements`]): every chunk keeps its share
/// of the vector, so the programs, and what the verifier proved of them, are unchanged.
pub fn export(schedule: &VerifiedSchedule, options: &Options) -> Result<Export, ChakraError> {
    let schedule = schedule.schedule();
    let phase = choose(schedule, options)?;
    let key = match phase.collective {
        Collective::AllReduce => "all-reduce-implementation-custom",
        Collective::ReduceScatter => "reduce-scatter-implementation-custom",
        Collective::AllGather => "all-gather-implementation-custom",
        Collective::Broadcast { .. } | Collective::Reduce { .. } => {
            return Err(ChakraError::UnsupportedCollective {
                phase: phase.name.clone(),
                collective: phase.collective.describe(&schedule.machine),
            })
        }
    };
    let machine = &schedule.machine;
    if let Some(n) = machine.nodes.iter().position(|n| n.capacity.is_some()) {
        let runs = phase
            .programs
            .get(n)
            .is_some_and(|p| p.steps.iter().any(|s| !s.is_empty()));
        if runs {
            return Err(ChakraError::InNetwork {
                phase: phase.name.clone(),
                node: machine.nodes[n].name.clone(),
            });
        }
    }
    let dtype = phase.dtype.size_bytes();
    let mut sized = Vec::new();
    if options.sizes.is_empty() {
        sized.push((None, phase.clone()));
    }
    for &bytes in &options.sizes {
        if bytes == 0 || bytes % dtype != 0 {
            return Err(ChakraError::BadSize { bytes, dtype });
        }
        sized.push((Some(bytes), phase.with_elements(bytes / dtype)));
    }
    let ranks = graph::ranks(machine);
    let mut sets = Vec::new();
    for (size, phase) in &sized {
        let tags = graph::tags(phase, &ranks)?;
        let mut files = Vec::new();
        for (n, rank) in ranks.iter().enumerate() {
            if rank.is_none() {
                continue;
            }
            let nodes = graph::build(&graph::Rank {
                machine,
                phase,
                node: schedule_ir::NodeId::new(n),
                ranks: &ranks,
                tags: &tags,
            })?;
            files.push(encode(&nodes));
        }
        sets.push(TraceSet {
            size: *size,
            ranks: files,
        });
    }
    Ok(Export { key, sets })
}

/// A trace file: `GlobalMetadata`, then the nodes, each message preceded by its varint length
/// (the framing of Chakra's `protoio`).
fn encode(nodes: &[schema::Node]) -> Vec<u8> {
    let mut out = Vec::new();
    let meta = schema::GlobalMetadata {
        version: VERSION.to_string(),
        attr: Vec::new(),
    };
    // Writing into a Vec cannot run out of room.
    let _ = meta.encode_length_delimited(&mut out);
    for node in nodes {
        let _ = node.encode_length_delimited(&mut out);
    }
    out
}
