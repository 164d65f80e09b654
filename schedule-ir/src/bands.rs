//! Size bands: the [`Band`]s of a [`ProgramItem::Bands`] and how a buffer's size picks one
//! ([`Schedule::phase_for_bytes`]). See the [crate doc](crate#size-bands).

use crate::{Phase, ProgramItem, Schedule};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One size band of a [`ProgramItem::Bands`]: buffers of `min_bytes` bytes up to (not
/// including) `max_bytes` run the phase called `phase`. That phase was compiled for a size in
/// the range; at any other size in it the runtime re-cuts its chunks
/// ([`Phase::with_elements`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Band {
    /// The smallest buffer, in bytes, the band serves.
    pub min_bytes: u64,
    /// One past the largest buffer, in bytes, the band serves; `None`: no upper end.
    pub max_bytes: Option<u64>,
    /// The name of the phase that runs for sizes in the band.
    pub phase: String,
}

impl Band {
    /// Whether a buffer of `bytes` bytes falls in the band.
    pub fn holds(&self, bytes: u64) -> bool {
        bytes >= self.min_bytes && self.max_bytes.is_none_or(|max| bytes < max)
    }
}

impl fmt::Display for Band {
    /// The byte range: `0..32768 bytes`, or `32768.. bytes` without an upper end.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.max_bytes {
            Some(max) => write!(f, "{}..{} bytes", self.min_bytes, max),
            None => write!(f, "{}.. bytes", self.min_bytes),
        }
    }
}

impl Schedule {
    /// The bands of the banded exchange called `name`, if the program has one.
    pub fn bands(&self, name: &str) -> Option<&[Band]> {
        self.program.iter().find_map(|item| match item {
            ProgramItem::Bands { name: n, bands } if n == name => Some(bands.as_slice()),
            _ => None,
        })
    }

    /// The phase that runs the exchange called `name` on a buffer of `bytes` bytes: the band
    /// holding `bytes` of a banded exchange, or the phase called `name`. `Err` says what there
    /// is instead: no exchange of that name, or the bands, none of which holds `bytes`.
    pub fn phase_for_bytes(&self, name: &str, bytes: u64) -> Result<&Phase, PhaseLookup<'_>> {
        let Some(bands) = self.bands(name) else {
            return self.phase(name).ok_or(PhaseLookup::Unknown);
        };
        let band = bands
            .iter()
            .find(|b| b.holds(bytes))
            .ok_or(PhaseLookup::NoBand(bands))?;
        self.phase(&band.phase).ok_or(PhaseLookup::Unknown)
    }
}

/// Why [`Schedule::phase_for_bytes`] found no phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseLookup<'a> {
    /// No phase and no banded exchange has the name.
    Unknown,
    /// The exchange is banded, and no band holds the size; these are its bands.
    NoBand(&'a [Band]),
}
