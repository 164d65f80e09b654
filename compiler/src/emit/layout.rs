//! Where our chunks live in a GPU's input, output and scratch buffers, for the formats that
//! name chunks by offset in those three buffers (MSCCL XML and MSCCL++ execution plans).
//!
//! Our chunk `c` is chunk `g(c)` of the full vector: `c` itself for allreduce; for
//! reduce-scatter and allgather, chunks are laid out owner by owner (`owner·k + m` for the
//! owner's `m`-th chunk, `k` chunks per rank), because the output (reduce-scatter) or input
//! (allgather) of rank `r` is block `r` of the full vector. Our scratch buffer `b` is the
//! scratch buffer at offset `(b-1)·N + g(c)`; a reduce-scatter chunk a rank does not keep is
//! stored past them.

use schedule_ir::{BufferId, ChunkId, Collective, NodeId, Phase, Ranks};
use std::fmt;
use thiserror::Error;

/// One of a GPU's three buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Buf {
    /// The call's input (`i`).
    Input,
    /// The call's output (`o`).
    Output,
    /// Scratch space the runtime allocates (`s`).
    Scratch,
}

impl Buf {
    /// The letter both formats use.
    pub fn letter(self) -> &'static str {
        match self {
            Buf::Input => "i",
            Buf::Output => "o",
            Buf::Scratch => "s",
        }
    }
}

/// A chunk position in one of a GPU's buffers, in chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    /// The buffer.
    pub buf: Buf,
    /// The chunk offset in it.
    pub off: u32,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.buf.letter(), self.off)
    }
}

/// Why a phase's chunks have no layout; each format words it in its own error.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub(crate) enum LayoutError {
    /// No chunks at all.
    #[error("no chunks")]
    NoChunks,
    /// Offsets past what the format stores.
    #[error("offsets up to {needed}")]
    OffsetTooLarge {
        /// Chunks in the phase.
        chunks: usize,
        /// Buffers in the phase.
        buffers: usize,
        /// The largest offset needed.
        needed: u64,
    },
    /// Ranks owning unequal shares of a reduce-scatter or allgather.
    #[error("unequal blocks")]
    UnequalBlocks {
        /// A node whose share differs.
        node: String,
        /// How many chunks it owns.
        owned: usize,
        /// Chunks in the phase.
        chunks: usize,
        /// Compute nodes.
        ranks: usize,
    },
    /// A verified schedule rules this out.
    #[error("{0}")]
    Internal(String),
}

/// Our data buffer.
pub(crate) const DATA: BufferId = BufferId(0);

/// Where chunks live in MSCCL's buffers (see the parent module doc).
pub(crate) struct Layout {
    collective: Collective,
    /// Chunks per loop.
    n: u32,
    /// Chunks per rank block (reduce-scatter output, allgather input).
    k: u32,
    /// Our buffers (data and scratch).
    buffers: u32,
    /// Per chunk, its MSCCL chunk in the full vector.
    g: Vec<u32>,
    /// Per chunk, its owner's rank.
    owner: Vec<Option<u32>>,
}

impl Layout {
    pub(crate) fn new(
        phase: &Phase,
        ranks: &Ranks,
        names: &[String],
        max_offset: u32,
    ) -> Result<Layout, LayoutError> {
        let n = phase.chunks.len();
        if n == 0 {
            return Err(LayoutError::NoChunks);
        }
        let rank = |node: NodeId| ranks.rank(node).map(|r| r.0);
        let nodes = names.len();
        let ranks = ranks.len();
        let buffers = phase.buffers.len();
        let regions =
            buffers.saturating_sub(1) + usize::from(phase.collective == Collective::ReduceScatter);
        let needed = (n * regions.max(1)) as u64;
        if needed > u64::from(max_offset) + 1 {
            return Err(LayoutError::OffsetTooLarge {
                chunks: n,
                buffers,
                needed: needed - 1,
            });
        }
        let n32 = n as u32;
        let owner: Vec<Option<u32>> = phase
            .chunks
            .iter()
            .map(|c| c.owner.and_then(rank))
            .collect();
        let (k, g) = match phase.collective {
            Collective::ReduceScatter | Collective::AllGather => {
                let mut owned = vec![0usize; nodes];
                let mut g = Vec::with_capacity(n);
                let k = n / ranks.max(1);
                for (c, chunk) in phase.chunks.iter().enumerate() {
                    let (Some(node), Some(r)) = (chunk.owner, owner[c]) else {
                        return Err(LayoutError::Internal(format!("chunk {c} has no owner")));
                    };
                    g.push(r * k as u32 + owned[node.index()] as u32);
                    owned[node.index()] += 1;
                }
                if let Some((node, &count)) = owned
                    .iter()
                    .enumerate()
                    .find(|&(i, &count)| rank(NodeId::new(i)).is_some() && count * ranks != n)
                {
                    return Err(LayoutError::UnequalBlocks {
                        node: names[node].clone(),
                        owned: count,
                        chunks: n,
                        ranks,
                    });
                }
                (k as u32, g)
            }
            _ => (n32, (0..n32).collect()),
        };
        Ok(Layout {
            collective: phase.collective,
            n: n32,
            k,
            buffers: buffers as u32,
            g,
            owner,
        })
    }

    /// The input-buffer chunk holding `c` on `rank` at the start, if any.
    pub(crate) fn input(&self, rank: u32, c: ChunkId) -> Option<u32> {
        let g = self.g[c.index()];
        match self.collective {
            Collective::AllGather => {
                (self.owner[c.index()] == Some(rank)).then(|| g - rank * self.k)
            }
            _ => Some(g),
        }
    }

    /// The output-buffer chunk where `rank` must end with `c`, if any.
    pub(crate) fn output(&self, rank: u32, c: ChunkId) -> Option<u32> {
        let g = self.g[c.index()];
        match self.collective {
            Collective::ReduceScatter => {
                (self.owner[c.index()] == Some(rank)).then(|| g - rank * self.k)
            }
            _ => Some(g),
        }
    }

    /// Where a store of `c` into our buffer `buf` goes on `rank`.
    pub(crate) fn store(&self, rank: u32, buf: BufferId, c: ChunkId) -> Loc {
        let g = self.g[c.index()];
        if buf == DATA {
            if let Some(off) = self.output(rank, c) {
                return Loc {
                    buf: Buf::Output,
                    off,
                };
            }
            // A chunk this rank does not keep (reduce-scatter): past the scratch buffers.
            return Loc {
                buf: Buf::Scratch,
                off: (self.buffers - 1) * self.n + g,
            };
        }
        Loc {
            buf: Buf::Scratch,
            off: (buf.0 - 1) * self.n + g,
        }
    }

    /// The memory a location is in an in-place call, where the runtime passes one buffer as
    /// both input and output (reduce-scatter's output is the rank's block of the input,
    /// allgather's input the rank's block of the output).
    pub(crate) fn in_place(&self, rank: u32, loc: Loc) -> Loc {
        match (self.collective, loc.buf) {
            (Collective::AllReduce, Buf::Output) => Loc {
                buf: Buf::Input,
                off: loc.off,
            },
            (Collective::ReduceScatter, Buf::Output) => Loc {
                buf: Buf::Input,
                off: rank * self.k + loc.off,
            },
            (Collective::AllGather, Buf::Input) => Loc {
                buf: Buf::Output,
                off: rank * self.k + loc.off,
            },
            _ => loc,
        }
    }

    /// Scratch chunks the layout itself uses (our scratch buffers, and the chunks a
    /// reduce-scatter rank does not keep); a format may place more past them.
    pub(crate) fn scratch_region(&self) -> u32 {
        let regions = self.buffers.saturating_sub(1)
            + u32::from(self.collective == Collective::ReduceScatter);
        regions * self.n
    }

    pub(crate) fn i_chunks(&self) -> u32 {
        match self.collective {
            Collective::AllGather => self.k,
            _ => self.n,
        }
    }

    pub(crate) fn o_chunks(&self) -> u32 {
        match self.collective {
            Collective::ReduceScatter => self.k,
            _ => self.n,
        }
    }
}
