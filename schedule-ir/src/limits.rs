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

/// The most wrong final results the verifier lists per phase (2^10); past them it counts them
/// in one more error. A schedule whose programs are empty leaves every (node, chunk) pair of an
/// allreduce wrong: `n²` errors, each naming up to `n` missing inputs, so a 180 KB file of 1 000
/// nodes claimed 20 GB of errors. The first ones name the mistake; the rest repeat it.
pub const MAX_LISTED_RESULTS: u64 = 1 << 10;

/// The accepted rates, Gbit/s: a link's `bandwidth_gbps` and the machine's `reduce_gbps`,
/// 1 kbit/s to 10^9 Gbit/s. Being positive and finite is not enough: a subnormal bandwidth
/// (`5e-324`) turns every transfer's time into `inf`, so every estimate and efficiency in the
/// reports would be meaningless. The topology language holds its figures to the same range.
pub const RATE_GBPS: std::ops::RangeInclusive<f64> = 1e-6..=1e9;

/// The accepted latencies other than zero, µs: a link's `latency_us` and the machine's
/// `switch_latency_us`, 1 ps to 1000 s (a sum over a phase's steps stays finite).
pub const LATENCY_US: std::ops::RangeInclusive<f64> = 1e-6..=1e9;

/// The most lanes a link may have. Real links stay far below it (an NVSwitch port bundles 18
/// NVLinks; a leaf-to-spine bundle a few hundred cables), while work grows with the lanes: a
/// ring search counts a link of `k` lanes as `k` parallel links, and schedulers book up to `k`
/// transfers per link direction and step. A typo such as `lanes: 4000000000` is refused
/// instead of making that work unbounded.
pub const MAX_LANES: u32 = 4096;

/// The rule [`MAX_LANES`] sets, in words.
pub const LANES_RULE: &str = "from 1 to 4096";

/// Whether `gbps` is an accepted rate ([`RATE_GBPS`]).
pub fn rate_accepted(gbps: f64) -> bool {
    RATE_GBPS.contains(&gbps)
}

/// Whether `us` is an accepted latency: zero or in [`LATENCY_US`].
pub fn latency_accepted(us: f64) -> bool {
    us == 0.0 || LATENCY_US.contains(&us)
}

/// The rule [`rate_accepted`] checks, in words.
pub const RATE_RULE: &str = "from 1e-6 to 1e9 Gbit/s (1 kbit/s to 10^9 Gbit/s)";

/// The rule [`latency_accepted`] checks, in words.
pub const LATENCY_RULE: &str = "0, or from 1e-6 to 1e9 µs (1 ps to 1000 s)";

/// [`MAX_VECTOR_BYTES`] in words: `2^48 bytes (256 TiB)`.
pub fn vector_bytes_phrase() -> String {
    let power = MAX_VECTOR_BYTES.trailing_zeros();
    format!("2^{power} bytes ({} TiB)", MAX_VECTOR_BYTES >> 40)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_in_words_state_the_ranges() {
        assert!(LANES_RULE.ends_with(&MAX_LANES.to_string()));
        let (rate, latency) = (format!("{:e}", RATE_GBPS.start()), LATENCY_US.end());
        assert!(RATE_RULE.starts_with(&format!("from {rate} to {:e}", RATE_GBPS.end())));
        assert!(LATENCY_RULE.contains(&format!("to {latency:e} µs")));
        assert!(rate_accepted(1e-6) && !rate_accepted(5e-324) && !rate_accepted(f64::NAN));
        assert!(latency_accepted(0.0) && !latency_accepted(1e-300) && !latency_accepted(-1.0));
    }
}
