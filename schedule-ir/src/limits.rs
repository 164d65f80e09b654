//! Every size limit of this crate, in one place, with why it is what it is.
//!
//! The verifier refuses a schedule over a limit with
//! [`ErrorKind::TooLarge`](crate::verify::ErrorKind::TooLarge), whose message gives the count
//! and the limit; messages and hints elsewhere that mention a limit are built from these
//! constants (see [`vector_bytes_phrase`]).

/// The most entities of one kind (nodes, links, chunks, buffers) and steps a schedule may
/// have: ids are `u32`, and every id must fit one.
pub const MAX_COUNT: u64 = u32::MAX as u64;

/// The largest vector a phase may work on, in bytes (2^48, 256 TiB): byte counts of chunks,
/// link loads and reports then fit in a `u64` with room to add.
pub const MAX_VECTOR_BYTES: u64 = 1 << 48;

/// The most words (`u64`, 8 bytes) of symbolic state the correctness pass may use for one
/// phase (2^27 words, 1 GiB), so that a phase too large to prove is refused rather than
/// exhausting memory. The state is 6 bytes per (state node, buffer, chunk) slot — a set id and
/// two flags — checked before the run, plus every distinct input set (⌈compute nodes / 64⌉
/// words and about 3 of bookkeeping each), checked as sets appear.
pub const MAX_SYMBOLIC_WORDS: u64 = 1 << 27;

/// The most chunk ids the runs of one compact schedule file may expand to, in all (2^32,
/// 16 GiB of ids): a run is a few bytes of text however many ids it names, so reading bounds
/// what runs expand to instead of trusting the file's size. An explicit list is bounded by
/// the text itself and does not count.
pub const MAX_EXPANDED_CHUNK_IDS: u64 = 1 << 32;

/// The most (grid node, step) pairs a pattern's phase may span (2^26): proving it holds an
/// empty step per node and step (24 bytes each, 1.5 GiB at the limit), and expanding it a
/// step list per node. A 200 × 200 torus's allreduce spans 31.8 million.
pub const MAX_PATTERN_STEP_SLOTS: u64 = 1 << 26;

/// The most instructions a pattern's phase is expanded to (2^24, the compiler's own limit on
/// an explicit phase): beyond it the pattern is kept as it is.
pub const MAX_EXPANDED_INSTRUCTIONS: u64 = 1 << 24;

/// [`MAX_VECTOR_BYTES`] in words: `2^48 bytes (256 TiB)`.
pub fn vector_bytes_phrase() -> String {
    let power = MAX_VECTOR_BYTES.trailing_zeros();
    format!("2^{power} bytes ({} TiB)", MAX_VECTOR_BYTES >> 40)
}
