//! Where our chunks live in MSCCL's input, output and scratch buffers.

use super::{Buf, Loc, MscclError, MAX_OFFSET};
use schedule_ir::{BufferId, ChunkId, Collective, NodeId, Phase, Ranks};

/// Our data buffer.
pub(super) const DATA: BufferId = BufferId(0);

/// Where chunks live in MSCCL's buffers (see the parent module doc).
pub(super) struct Layout {
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
    pub(super) fn new(
        phase: &Phase,
        ranks: &Ranks,
        names: &[String],
    ) -> Result<Layout, MscclError> {
        let n = phase.chunks.len();
        if n == 0 {
            return Err(MscclError::NoChunks {
                phase: phase.name.clone(),
            });
        }
        let rank = |node: NodeId| ranks.rank(node).map(|r| r.0);
        let nodes = names.len();
        let ranks = ranks.len();
        let buffers = phase.buffers.len();
        let regions =
            buffers.saturating_sub(1) + usize::from(phase.collective == Collective::ReduceScatter);
        let needed = (n * regions.max(1)) as u64;
        if needed > u64::from(MAX_OFFSET) + 1 {
            return Err(MscclError::OffsetTooLarge {
                phase: phase.name.clone(),
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
                        return Err(MscclError::Internal {
                            phase: phase.name.clone(),
                            detail: format!("chunk {c} has no owner"),
                        });
                    };
                    g.push(r * k as u32 + owned[node.index()] as u32);
                    owned[node.index()] += 1;
                }
                if let Some((node, &count)) = owned
                    .iter()
                    .enumerate()
                    .find(|&(i, &count)| rank(NodeId::new(i)).is_some() && count * ranks != n)
                {
                    return Err(MscclError::UnequalBlocks {
                        phase: phase.name.clone(),
                        collective: phase.collective.to_string(),
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
    pub(super) fn input(&self, rank: u32, c: ChunkId) -> Option<u32> {
        let g = self.g[c.index()];
        match self.collective {
            Collective::AllGather => {
                (self.owner[c.index()] == Some(rank)).then(|| g - rank * self.k)
            }
            _ => Some(g),
        }
    }

    /// The output-buffer chunk where `rank` must end with `c`, if any.
    pub(super) fn output(&self, rank: u32, c: ChunkId) -> Option<u32> {
        let g = self.g[c.index()];
        match self.collective {
            Collective::ReduceScatter => {
                (self.owner[c.index()] == Some(rank)).then(|| g - rank * self.k)
            }
            _ => Some(g),
        }
    }

    /// Where a store of `c` into our buffer `buf` goes on `rank`.
    pub(super) fn store(&self, rank: u32, buf: BufferId, c: ChunkId) -> Loc {
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
    pub(super) fn in_place(&self, rank: u32, loc: Loc) -> Loc {
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

    pub(super) fn i_chunks(&self) -> u32 {
        match self.collective {
            Collective::AllGather => self.k,
            _ => self.n,
        }
    }

    pub(super) fn o_chunks(&self) -> u32 {
        match self.collective {
            Collective::ReduceScatter => self.k,
            _ => self.n,
        }
    }
}
