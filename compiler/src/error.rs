//! The compiler's one error type.

use crate::diag::Problem;
use thiserror::Error;

/// Everything that can go wrong in topoc.
#[derive(Debug, Error)]
pub enum Error {
    /// The topology file has problems; render them with [`crate::diag::render`].
    #[error("the topology file has {} problem(s)", .0.len())]
    Topology(Vec<Problem>),
    /// The compiler produced a schedule the verifier rejects: a bug in topoc, never emitted.
    #[error("internal error: the compiled schedule failed verification; please report this\n{0}")]
    Unverified(schedule_ir::VerifyErrors),
}
