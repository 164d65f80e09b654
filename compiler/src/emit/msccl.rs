//! MSCCL algorithm XML: one verified phase as an algorithm file for the MSCCL runtimes
//! (msccl-executor-nccl inside NCCL, RCCL, and the older microsoft/msccl).
//!
//! [`to_xml`] takes a [`VerifiedSchedule`] and the phase to export and returns the whole file, or
//! a [`MscclError`] saying why the phase cannot be expressed. `docs/msccl.md` describes the
//! mapping for users; in short:
//!
//! - **GPUs.** Compute node `n` becomes rank `r` = its position among the compute nodes.
//!   Switches only forward: a transfer routed through them is a plain peer connection for MSCCL.
//! - **Chunks and buffers.** Our chunk `c` is MSCCL chunk `g(c)`: `c` itself for allreduce; for
//!   reduce-scatter and allgather, chunks are laid out owner by owner (`owner·k + m` for the
//!   owner's `m`-th chunk, `k` chunks per rank), because MSCCL's output (reduce-scatter) or input
//!   (allgather) of rank `r` is block `r` of the full vector. A node's data chunk is read from the
//!   input buffer `i` until its first store, which goes to the output buffer `o` (or, for a
//!   chunk the node does not keep in a reduce-scatter, to the scratch buffer `s`); from then on
//!   it lives there. So the input is never written and the file is valid for in-place and
//!   out-of-place calls alike. Our scratch buffer `b` is `s` at offset `(b-1)·N + g(c)`.
//! - **Thread blocks and channels.** Each directed connection (sender, receiver, route, and
//!   lane: the `i`-th transfer over one route in a step, so rings sharing a link of several
//!   lanes keep a connection each) gets one sending and one receiving thread block. At each node, an incoming connection is paired
//!   with the outgoing one that most often forwards what it received one step later; the pair
//!   shares a thread block. The chains of paired connections are our logical rings; each takes
//!   the lowest channel the runtimes' rules allow (one thread block per peer, direction and
//!   channel), so rings that share no peer share a channel. A phase whose thread blocks would
//!   run more than [`MAX_STEPS`] steps is cut into windows of BSP steps, each window with
//!   thread blocks and channels of its own.
//! - **Steps.** One step moves one chunk (`cnt="1"`), so a transfer of several chunks is several
//!   messages on its connection. Each thread block runs BSP step by BSP step: first *step by
//!   step* (a step's sends, then its receives), which needs the fewest steps; if that could
//!   deadlock on one-message FIFOs, *message by message* (the `r`-th send, then the `r`-th
//!   receive, then round `r + 1`), for which one global order of all sends and receives agrees
//!   with every thread block and never needs a FIFO of more than one message (`docs/msccl.md`
//!   gives the argument). A receive in step `k` of what the same thread block sends on in step
//!   `k + 1` is fused (message by message: only a one-chunk transfer that is its connection's
//!   next message): `rcs` (store and forward), `rrcs` (reduce, store, forward), or `rrs`
//!   (reduce and forward) when the stored value would never be read. Otherwise `s`, `r`, `rrc`;
//!   our local `Copy`/`Reduce` become `cpy`/`re` in a local thread block. A chunk that must end
//!   in the output but was never stored there gets a final `cpy`.
//! - **Dependencies.** Where two operations of one GPU touch the same memory (an input chunk and
//!   its in-place output alias) in different thread blocks, the later one waits for the earlier
//!   (`depid`/`deps`, `hasdep` on the awaited step); several waits become `nop` steps.
//!
//! Refused: collectives other than allreduce, reduce-scatter and allgather; phases in which a
//! switch runs a program of its own (in-network reduction); reduce-scatter and
//! allgather whose ranks do not own equal shares; allreduce and reduce-scatter with op mean
//! (MSCCL takes the op from the call: export the phase compiled with op Sum and call it with
//! `ncclAvg`); more than one phase without a choice; and
//! anything beyond the runtimes' limits ([`MAX_STEPS`] steps per thread block even when cut,
//! [`MAX_CHANNELS`] channels, 16-bit offsets,
//! [`MAX_TBS_PER_CHANNEL`], dependency ids up to [`MAX_DEPID`], [`MAX_ELEMENTS_PER_RANK`]).

mod limits;
mod ops;
mod plan;

use super::layout::LayoutError;
pub use super::layout::{Buf, Loc};
use super::{choose_phase, PhaseChoiceError};
use plan::Order;
use schedule_ir::{Collective, NodeKind, ReduceOp, VerifiedSchedule};
use thiserror::Error;

/// Steps one thread block may hold, `nop`s included: `MSCCL_MAX_NUM_STEPS` of
/// msccl-executor-nccl and RCCL (the older microsoft/msccl allows 256).
pub const MAX_STEPS: usize = 64;
/// Channels msccl-executor-nccl has (`MAXCHANNELS`); RCCL has 128. Its parser accepts a `chan`
/// of 32, which then indexes past its 32-entry channel array, so channels run from 0 to 31.
pub const MAX_CHANNELS: u32 = 32;
/// Thread blocks of one GPU that may send (or receive) on one channel.
pub const MAX_TBS_PER_CHANNEL: usize = 32;
/// The largest thread-block id a dependency may name (`depid` is stored in 8 bits).
pub const MAX_DEPID: usize = 127;
/// The largest chunk offset (offsets are 16-bit).
pub const MAX_OFFSET: u32 = i16::MAX as u32;
/// The most windows a phase's BSP steps are cut into to keep thread blocks short.
const MAX_WINDOWS: u32 = 64;
/// XML elements the runtime's parser keeps for one rank (`algo`, every `gpu`, the rank's
/// `tb`s and `step`s).
pub const MAX_ELEMENTS_PER_RANK: usize = 4096;
/// The runtime reads attribute values into fixed buffers: the algorithm name is cut to this.
const MAX_NAME_BYTES: usize = 200;

/// What to export.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The phase to export. `None` is fine when the schedule has exactly one phase; an MSCCL
    /// file holds one algorithm.
    pub phase: Option<String>,
}

/// Why a schedule cannot be written as MSCCL XML.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MscclError {
    /// No one phase to export.
    #[error(transparent)]
    Phase(#[from] PhaseChoiceError),
    /// A collective MSCCL export does not handle.
    #[error(
        "phase `{phase}` is a {collective}; MSCCL export handles allreduce, reduce-scatter and \
         allgather"
    )]
    UnsupportedCollective {
        /// The phase.
        phase: String,
        /// The collective, in words.
        collective: String,
    },
    /// A mean allreduce or reduce-scatter: MSCCL takes the op from the collective call and has
    /// no instruction to divide by the number of ranks.
    #[error(
        "phase `{phase}` has op mean, but an MSCCL algorithm takes its op from the collective \
         call and has no division step; compile the phase with op Sum, export that, and call it \
         with ncclAvg"
    )]
    MeanOp {
        /// The phase.
        phase: String,
    },
    /// A banded export asked for an exchange that has no bands.
    #[error("the schedule has no banded exchange `{exchange}`")]
    NotBanded {
        /// The exchange asked for.
        exchange: String,
    },
    /// A band that ends at 1 byte: MSCCL would read its `maxBytes="0"` as no upper end.
    #[error(
        "the band of phase `{phase}` serves only empty buffers, which MSCCL cannot express          (maxBytes=\"0\" means no upper end); compile at sizes of at least 2 bytes"
    )]
    BandTooSmall {
        /// The band's phase.
        phase: String,
    },
    /// A switch that holds and combines chunks itself (in-network reduction): MSCCL runs
    /// programs on GPUs only.
    #[error(
        "phase `{phase}`: switch {node} sends, receives or combines chunks itself (in-network \
         reduction), but an MSCCL algorithm runs only on the GPUs; compile the phase with a \
         method whose switches only forward, e.g. --algorithm ring"
    )]
    DeviceProgram {
        /// The phase.
        phase: String,
        /// The first such switch.
        node: String,
    },
    /// A phase without chunks has nothing to transfer.
    #[error("phase `{phase}` has no chunks; MSCCL needs at least one chunk per loop")]
    NoChunks {
        /// The phase.
        phase: String,
    },
    /// Reduce-scatter or allgather where ranks own unequal shares.
    #[error(
        "phase `{phase}`: MSCCL's {collective} gives every rank an equal block of the vector, \
         but {node} owns {owned} of the {chunks} chunks (each of the {ranks} ranks must own as \
         many as the others)"
    )]
    UnequalBlocks {
        /// The phase.
        phase: String,
        /// The collective, in words.
        collective: String,
        /// A node whose share differs.
        node: String,
        /// How many chunks it owns.
        owned: usize,
        /// Chunks in the phase.
        chunks: usize,
        /// Compute nodes.
        ranks: usize,
    },
    /// Offsets would not fit in 16 bits.
    #[error(
        "phase `{phase}`: {chunks} chunks in {buffers} buffer(s) need chunk offsets up to {needed}, \
         but MSCCL offsets are 16-bit (at most {MAX_OFFSET}); use fewer chunks"
    )]
    OffsetTooLarge {
        /// The phase.
        phase: String,
        /// Chunks in the phase.
        chunks: usize,
        /// Buffers in the phase.
        buffers: usize,
        /// The offsets the layout needs.
        needed: u64,
    },
    /// The thread blocks would wait for each other forever.
    #[error(
        "phase `{phase}`: as MSCCL thread blocks, this schedule deadlocks (with one-message \
         connections, {stuck} wait for each other); export a ring-structured phase instead"
    )]
    Deadlock {
        /// The phase.
        phase: String,
        /// The first thread blocks that cannot go on, in words.
        stuck: String,
    },
    /// A thread block longer than the runtimes accept.
    #[error(
        "phase `{phase}`: thread block {tb} of {node} (rank {rank}, channel {chan}) needs {steps} \
         steps, but the MSCCL runtimes run at most {MAX_STEPS} per thread block \
         (msccl-executor-nccl and RCCL), even with the phase's steps cut among as many thread \
         blocks as it allows (one window per step, at most {MAX_WINDOWS}); move fewer chunks per \
         step"
    )]
    TooManySteps {
        /// The phase.
        phase: String,
        /// The node.
        node: String,
        /// Its rank.
        rank: u32,
        /// The thread block.
        tb: usize,
        /// Its channel.
        chan: u32,
        /// Steps it needs.
        steps: usize,
    },
    /// Too many thread blocks of one GPU on one channel.
    #[error(
        "phase `{phase}`: {node} (rank {rank}) has {count} thread blocks that {direction} on \
         channel {chan}; MSCCL allows at most {MAX_TBS_PER_CHANNEL}"
    )]
    TooManyThreadBlocks {
        /// The phase.
        phase: String,
        /// The node.
        node: String,
        /// Its rank.
        rank: u32,
        /// The channel.
        chan: u32,
        /// `send` or `receive`.
        direction: &'static str,
        /// How many.
        count: usize,
    },
    /// More channels than the runtimes have.
    #[error(
        "phase `{phase}`: even packed under the runtimes' rules (one thread block per peer, \
         direction and channel), the thread blocks need {needed} channels, but \
         msccl-executor-nccl has {MAX_CHANNELS} (channels 0 to 31); {node} (rank {rank}) has a \
         thread block on the last"
    )]
    TooManyChannels {
        /// The phase.
        phase: String,
        /// Channels needed.
        needed: u32,
        /// A node on the highest channel.
        node: String,
        /// Its rank.
        rank: u32,
    },
    /// A dependency on a thread block whose id does not fit `depid`.
    #[error(
        "phase `{phase}`: {node} (rank {rank}) needs a step to wait for thread block {tb}, but \
         MSCCL dependency ids stop at {MAX_DEPID}"
    )]
    DependencyTooFar {
        /// The phase.
        phase: String,
        /// The node.
        node: String,
        /// Its rank.
        rank: u32,
        /// The thread block waited for.
        tb: usize,
    },
    /// More XML elements for one rank than the parser keeps.
    #[error(
        "phase `{phase}`: rank {rank} ({node}) needs {count} XML elements, but the MSCCL parser \
         keeps at most {MAX_ELEMENTS_PER_RANK} per rank"
    )]
    TooManyElements {
        /// The phase.
        phase: String,
        /// The node.
        node: String,
        /// Its rank.
        rank: u32,
        /// Elements needed.
        count: usize,
    },
    /// Operations of one thread block that would have to run in both orders.
    #[error(
        "phase `{phase}`, step {step}: {node}'s operations cannot be ordered for MSCCL: {detail}"
    )]
    Unorderable {
        /// The phase.
        phase: String,
        /// The BSP step.
        step: u32,
        /// The node.
        node: String,
        /// What conflicts.
        detail: String,
    },
    /// Something a verified schedule rules out; a bug in topoc.
    #[error("internal error exporting phase `{phase}` to MSCCL XML: {detail}; please report this")]
    Internal {
        /// The phase.
        phase: String,
        /// What went wrong.
        detail: String,
    },
}

impl MscclError {
    /// The error for a phase whose chunks have no MSCCL layout.
    fn from_layout(phase: &schedule_ir::Phase, e: LayoutError) -> MscclError {
        let name = phase.name.clone();
        match e {
            LayoutError::NoChunks => MscclError::NoChunks { phase: name },
            LayoutError::OffsetTooLarge {
                chunks,
                buffers,
                needed,
            } => MscclError::OffsetTooLarge {
                phase: name,
                chunks,
                buffers,
                needed,
            },
            LayoutError::UnequalBlocks {
                node,
                owned,
                chunks,
                ranks,
            } => MscclError::UnequalBlocks {
                phase: name,
                collective: phase.collective.to_string(),
                node,
                owned,
                chunks,
                ranks,
            },
            LayoutError::Internal(detail) => MscclError::Internal {
                phase: name,
                detail,
            },
        }
    }
}

/// The type of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// `s`: send `src` to the thread block's send peer.
    Send,
    /// `r`: receive from the recv peer into `dst`.
    Recv,
    /// `rcs`: receive, store into `dst`, forward.
    RecvCopySend,
    /// `rrs`: receive, reduce with the local `src`, send the result on (nothing stored).
    RecvReduceSend,
    /// `rrc`: receive, reduce with the local `src`, store into `dst`.
    RecvReduceCopy,
    /// `rrcs`: receive, reduce with `src`, store into `dst`, send the result on.
    RecvReduceCopySend,
    /// `cpy`: `dst = src`.
    Copy,
    /// `re`: `dst = op(dst, src)`.
    Reduce,
    /// `nop`: only waits for its dependency.
    Nop,
}

impl StepKind {
    /// The `type` attribute.
    pub fn code(self) -> &'static str {
        match self {
            StepKind::Send => "s",
            StepKind::Recv => "r",
            StepKind::RecvCopySend => "rcs",
            StepKind::RecvReduceSend => "rrs",
            StepKind::RecvReduceCopy => "rrc",
            StepKind::RecvReduceCopySend => "rrcs",
            StepKind::Copy => "cpy",
            StepKind::Reduce => "re",
            StepKind::Nop => "nop",
        }
    }
}

/// A step that must wait: thread block `tb` of the same GPU has completed its step `step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dep {
    /// The thread block waited for.
    pub tb: u32,
    /// Its step index (`s`).
    pub step: u32,
}

/// One `<step>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Its type.
    pub kind: StepKind,
    /// The local source (for `rrs`/`rrc`/`rrcs`, the local operand of the reduction).
    pub src: Loc,
    /// The local destination.
    pub dst: Loc,
    /// Chunks moved.
    pub cnt: u32,
    /// What it waits for.
    pub dep: Option<Dep>,
    /// Whether another thread block waits for this step.
    pub has_dep: bool,
}

/// One `<tb>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadBlock {
    /// The rank it sends to.
    pub send: Option<u32>,
    /// The rank it receives from.
    pub recv: Option<u32>,
    /// Its channel.
    pub chan: u32,
    /// Its steps, in order; `s` is the index.
    pub steps: Vec<Step>,
}

/// One `<gpu>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// Its rank (`id`).
    pub rank: u32,
    /// The compute node it is, for messages.
    pub node: String,
    /// Input buffer size in chunks.
    pub i_chunks: u32,
    /// Output buffer size in chunks.
    pub o_chunks: u32,
    /// Scratch buffer size in chunks.
    pub s_chunks: u32,
    /// Its thread blocks; the index is the `id`.
    pub tbs: Vec<ThreadBlock>,
}

/// A whole algorithm file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Algo {
    /// The `name` attribute.
    pub name: String,
    /// The `coll` attribute.
    pub coll: &'static str,
    /// Chunks per loop.
    pub nchunksperloop: u32,
    /// Channels (largest `chan` + 1).
    pub nchannels: u32,
    /// One per rank, in rank order.
    pub gpus: Vec<Gpu>,
    /// The `minBytes` attribute: the smallest buffer the algorithm serves (0: every size).
    pub min_bytes: u64,
    /// The `maxBytes` attribute: the largest buffer it serves, inclusive (0: no upper end).
    pub max_bytes: u64,
}

/// The phase chosen by `options`, or why none can be.
fn choose<'a>(
    schedule: &'a schedule_ir::Schedule,
    options: &Options,
) -> Result<&'a schedule_ir::Phase, MscclError> {
    Ok(choose_phase(
        schedule,
        options.phase.as_deref(),
        "an MSCCL file holds one algorithm",
    )?)
}

/// Builds the algorithm for one phase of a verified schedule.
pub fn build(schedule: &VerifiedSchedule, options: &Options) -> Result<Algo, MscclError> {
    let schedule = schedule.schedule();
    let phase = choose(schedule, options)?;
    let coll = match phase.collective {
        Collective::AllReduce => "allreduce",
        Collective::ReduceScatter => "reducescatter",
        Collective::AllGather => "allgather",
        other @ (Collective::Broadcast { .. } | Collective::Reduce { .. }) => {
            return Err(MscclError::UnsupportedCollective {
                phase: phase.name.clone(),
                collective: match other {
                    Collective::Broadcast { .. } => "broadcast".to_string(),
                    _ => "reduce".to_string(),
                },
            })
        }
    };
    // An allgather moves inputs unchanged: its op, mean included, plays no part.
    if phase.op == ReduceOp::Mean && coll != "allgather" {
        return Err(MscclError::MeanOp {
            phase: phase.name.clone(),
        });
    }
    if let Some(device) = schedule
        .machine
        .nodes
        .iter()
        .zip(&phase.programs)
        .find(|(n, p)| n.kind != NodeKind::Compute && p.steps.iter().any(|s| !s.is_empty()))
    {
        return Err(MscclError::DeviceProgram {
            phase: phase.name.clone(),
            node: device.0.name.clone(),
        });
    }
    let name = format!(
        "topoc {} {} {}",
        schedule.machine.name, phase.name, phase.algorithm
    );
    // Step by step where that runs on one-message FIFOs (the fewest steps); message by message,
    // which always does, where it would not.
    match lay_out(schedule, phase, (name.clone(), coll), Order::StepByStep) {
        Err(MscclError::Deadlock { .. }) => {
            lay_out(schedule, phase, (name, coll), Order::MessageByMessage)
        }
        other => other,
    }
}

/// The algorithm for `phase` with its messages in `order`, checked against the runtimes' limits
/// and for progress on one-message FIFOs.
fn lay_out(
    schedule: &schedule_ir::Schedule,
    phase: &schedule_ir::Phase,
    (name, coll): (String, &'static str),
    order: Order,
) -> Result<Algo, MscclError> {
    // First one thread block per connection for the whole phase; while one is longer than
    // the runtimes run, cut the BSP steps into more windows, each with thread blocks (and
    // channels) of its own.
    let mut windows = 1u32;
    let algo = loop {
        let bounds: Vec<u32> = (1..windows)
            .map(|i| (u64::from(i) * u64::from(phase.steps) / u64::from(windows)) as u32)
            .collect();
        let planned = plan::plan(&schedule.machine, phase, order, &bounds)?;
        let nchannels = planned
            .iter()
            .flat_map(|g| g.tbs.iter().map(|t| t.chan + 1))
            .max()
            .unwrap_or(1);
        let algo = Algo {
            name: name.clone(),
            coll,
            nchunksperloop: u32::try_from(phase.chunks.len()).unwrap_or(u32::MAX),
            nchannels,
            gpus: planned,
            min_bytes: 0,
            max_bytes: 0,
        };
        let longest = algo
            .gpus
            .iter()
            .flat_map(|g| g.tbs.iter().map(|t| t.steps.len()))
            .max()
            .unwrap_or(0);
        if longest <= MAX_STEPS || windows >= phase.steps || windows >= MAX_WINDOWS {
            break algo;
        }
        // Aim below the limit, leaving room for the waits a cut adds.
        let more = longest.div_ceil(MAX_STEPS * 3 / 4) as u32;
        windows = (windows * more.max(2) / 2)
            .max(windows + 1)
            .min(phase.steps);
    };
    limits::check_limits(&algo, &phase.name)?;
    limits::check_progress(&algo, &phase.name)?;
    Ok(algo)
}

/// Exports one phase of a verified schedule as MSCCL algorithm XML.
pub fn to_xml(schedule: &VerifiedSchedule, options: &Options) -> Result<String, MscclError> {
    Ok(build(schedule, options)?.to_xml())
}

/// Exports a banded exchange as one MSCCL algorithm per band, in band order, each with the
/// band's `minBytes` and `maxBytes`: MSCCL's schedulers take an algorithm when the buffer's
/// size `n` has `minBytes <= n` and (`maxBytes == 0` or `n <= maxBytes`), so a band
/// `min..max` (max exclusive) is written `minBytes=min maxBytes=max-1`, and an unbounded band
/// `maxBytes=0`. One algorithm per file: MSCCL's parser reads the first `<algo>` of a file.
pub fn bands_to_xml(
    schedule: &VerifiedSchedule,
    exchange: &str,
) -> Result<Vec<(schedule_ir::Band, String)>, MscclError> {
    let bands = schedule
        .schedule()
        .bands(exchange)
        .ok_or_else(|| MscclError::NotBanded {
            exchange: exchange.to_string(),
        })?;
    bands
        .iter()
        .map(|band| {
            let options = Options {
                phase: Some(band.phase.clone()),
            };
            let mut algo = build(schedule, &options)?;
            algo.min_bytes = band.min_bytes;
            algo.max_bytes = match band.max_bytes {
                None => 0,
                // `maxBytes="0"` would read as unbounded.
                Some(max) if max <= 1 => {
                    return Err(MscclError::BandTooSmall {
                        phase: band.phase.clone(),
                    })
                }
                Some(max) => max - 1,
            };
            Ok((band.clone(), algo.to_xml()))
        })
        .collect()
}

impl Algo {
    /// The XML text, in the layout the runtimes' hand-written parser expects: no prolog, one
    /// element per line, double-quoted attributes separated by single spaces, every attribute
    /// written on every element.
    pub fn to_xml(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "<algo name=\"{}\" proto=\"Simple\" nchannels=\"{}\" nchunksperloop=\"{}\" ngpus=\"{}\" \
             coll=\"{}\" inplace=\"1\" outofplace=\"1\" minBytes=\"{}\" maxBytes=\"{}\">\n",
            escape(&self.name),
            self.nchannels,
            self.nchunksperloop,
            self.gpus.len(),
            self.coll,
            self.min_bytes,
            self.max_bytes
        ));
        let peer = |p: Option<u32>| p.map_or(-1, i64::from);
        for gpu in &self.gpus {
            out.push_str(&format!(
                "  <gpu id=\"{}\" i_chunks=\"{}\" o_chunks=\"{}\" s_chunks=\"{}\">\n",
                gpu.rank, gpu.i_chunks, gpu.o_chunks, gpu.s_chunks
            ));
            for (id, tb) in gpu.tbs.iter().enumerate() {
                out.push_str(&format!(
                    "    <tb id=\"{id}\" send=\"{}\" recv=\"{}\" chan=\"{}\">\n",
                    peer(tb.send),
                    peer(tb.recv),
                    tb.chan
                ));
                for (s, step) in tb.steps.iter().enumerate() {
                    let (depid, deps) = step
                        .dep
                        .map_or((-1, -1), |d| (i64::from(d.tb), i64::from(d.step)));
                    out.push_str(&format!(
                        "      <step s=\"{s}\" type=\"{}\" srcbuf=\"{}\" srcoff=\"{}\" dstbuf=\"{}\" \
                         dstoff=\"{}\" cnt=\"{}\" depid=\"{depid}\" deps=\"{deps}\" hasdep=\"{}\"/>\n",
                        step.kind.code(),
                        step.src.buf.letter(),
                        step.src.off,
                        step.dst.buf.letter(),
                        step.dst.off,
                        step.cnt,
                        u8::from(step.has_dep)
                    ));
                }
                out.push_str("    </tb>\n");
            }
            out.push_str("  </gpu>\n");
        }
        out.push_str("</algo>\n");
        out
    }
}

/// An attribute value: XML-escaped, control characters shown as text as in every other
/// output ([`crate::visible`]: a line break as `\x0a`), cut to [`MAX_NAME_BYTES`].
fn escape(text: &str) -> String {
    let mut out = String::new();
    for ch in text.chars() {
        let piece = match ch {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&apos;".to_string(),
            c if c.is_control() => crate::visible::escape(c).unwrap_or_default(),
            c => c.to_string(),
        };
        if out.len() + piece.len() > MAX_NAME_BYTES {
            break;
        }
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_bounded() {
        assert_eq!(escape("a<b>&\"c'\n"), "a&lt;b&gt;&amp;&quot;c&apos;\\x0a");
        assert!(escape(&"é".repeat(500)).len() <= MAX_NAME_BYTES);
    }
}
