//! [`Location`]: where in a schedule a problem is, one type for every error and warning.

use super::error::{ErrorKind, VerifyError};
use super::names::Named;
use crate::{BufferId, ChunkId, LinkId, NodeId, StepId};
use serde::Serialize;

/// Where a problem is: the phase, step, node, link, buffer and chunk it is about, each when it
/// applies. Ids come with the names the user wrote ([`Named`]), so tools can use the ids and
/// people the names. Every [`VerifyError`] and [`Warning`](super::Warning) carries one; what
/// the error says beyond its place is its [`ErrorKind`].
///
/// Serialises with the fields that are set only:
/// `{"phase": "grads", "step": 3, "node": {"id": 2, "name": "N2"}}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Location {
    /// The phase, by its name (names are unique in a schedule that passed the first checks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The step. For a problem with the end of a phase (a wrong result), its last step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<StepId>,
    /// The node whose program, declaration or result is wrong (for a transfer, the sender).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<Named<NodeId>>,
    /// The link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<Named<LinkId>>,
    /// The buffer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer: Option<Named<BufferId>>,
    /// The chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk: Option<ChunkId>,
}

impl Location {
    /// The schedule or machine as a whole.
    pub fn schedule() -> Self {
        Location::default()
    }

    /// A phase as a whole.
    pub fn phase(name: &str) -> Self {
        Location {
            phase: Some(name.to_string()),
            ..Location::default()
        }
    }

    /// One step of a phase.
    pub fn step(name: &str, step: StepId) -> Self {
        Location {
            step: Some(step),
            ..Location::phase(name)
        }
    }

    /// This place, at `step` (or at none).
    pub fn at_step(self, step: Option<StepId>) -> Self {
        Location { step, ..self }
    }

    /// This place, on `node`.
    pub fn node(self, node: Named<NodeId>) -> Self {
        Location {
            node: Some(node),
            ..self
        }
    }

    /// This place, on `link`.
    pub fn link(self, link: Named<LinkId>) -> Self {
        Location {
            link: Some(link),
            ..self
        }
    }

    /// This place, in `buffer` (or in none).
    pub fn buffer(self, buffer: Option<Named<BufferId>>) -> Self {
        Location { buffer, ..self }
    }

    /// This place, at `chunk`.
    pub fn chunk(self, chunk: ChunkId) -> Self {
        Location {
            chunk: Some(chunk),
            ..self
        }
    }

    /// The error `kind` found here.
    pub fn error(self, kind: ErrorKind) -> VerifyError {
        VerifyError {
            location: self,
            kind,
        }
    }
}
