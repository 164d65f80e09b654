//! topoc: a topology compiler.
//!
//! It reads a declared machine graph from a RON topology file, derives embeddings (rings, or
//! packed spanning trees), lowers collectives onto them into per-node programs whose every transfer names its
//! link, proves the result with the `schedule-ir` verifier and emits the schedule.
//!
//! The pipeline, module by module:
//!
//! 1. [`topology`] — the file format: [`topology::ast`] mirrors the RON syntax,
//!    [`topology::parse()`] reads it, [`topology::spans`] remembers where each value was written.
//! 2. [`machine`] — the machine graph (petgraph), one generator per machine kind (ring,
//!    ladder, hypercube and cube, torus, full mesh, tree, fabric, explicit graph), the checks
//!    that turn a declaration into a graph ([`machine::build()`]), failed links and nodes
//!    ([`machine::failures`]) and the summary `topoc check` prints ([`machine::summary`]).
//! 3. [`embed`] — rings over the graph — constructed, searched for, or routed through
//!    switches — and spanning-tree packings, with their proofs.
//! 4. [`lower`] — one module per method, producing [`schedule_ir::Phase`]s; [`lower::dag`]
//!    schedules lowerings described as dependent transfers.
//! 5. [`compile()`] — the driver that ties it together and verifies the result.
//! 6. [`diag`] — problems with user input, rendered by codespan-reporting.
//! 7. [`simulate`] — cost tables over message sizes (`topoc simulate`).
//! 8. [`trial`] — trial runs on random data against a reference reduction (`topoc run`).
//! 9. [`draw`] — pictures of the machine, its embeddings and a step's link use (`topoc draw`).
//! 10. [`emit`] — back ends for other tools' formats: [`emit::msccl`] writes MSCCL algorithm XML.
//! 11. [`import`] — topology files from other tools' descriptions of a machine (NCCL's topology
//!     dump, `nvidia-smi topo -m`).
//! 12. [`visible`] — control characters in users' names shown as text in every output.

pub mod compile;
pub mod diag;
pub mod draw;
pub mod embed;
pub mod emit;
pub mod error;
pub mod few;
pub mod ids;
pub mod import;
pub mod lab;
pub mod limits;
pub mod lower;
pub mod machine;
pub mod progress;
pub mod simulate;
pub mod topology;
pub mod trial;
pub mod visible;

pub use compile::{compile, compile_source, load, Compiled, Loaded, Options};
pub use error::Error;
