//! topoc: a topology compiler.
//!
//! It reads a declared machine graph from a RON topology file, derives embeddings (rings for
//! now), lowers collectives onto them into per-node programs whose every transfer names its
//! link, proves the result with the `schedule-ir` verifier and emits the schedule.
//!
//! The pipeline, module by module:
//!
//! 1. [`topology`] — the file format: [`topology::ast`] mirrors the RON syntax,
//!    [`topology::parse`] reads it, [`topology::spans`] remembers where each value was written.
//! 2. [`machine`] — the machine graph (petgraph), one generator per machine kind, and the
//!    checks that turn a declaration into a graph ([`machine::build`]).
//! 3. [`embed`] — rings over the graph, constructed or searched for, and their proofs.
//! 4. [`lower`] — one module per method, producing [`schedule_ir::Phase`]s.
//! 5. [`compile`] — the driver that ties it together and verifies the result.
//! 6. [`diag`] — problems with user input, rendered by codespan-reporting.
//! 7. [`trial`] — trial runs on random data against a reference reduction (`topoc run`).

pub mod compile;
pub mod diag;
pub mod embed;
pub mod error;
pub mod limits;
pub mod lower;
pub mod machine;
pub mod topology;
pub mod trial;

pub use compile::{compile, Compiled, Options};
pub use error::Error;
