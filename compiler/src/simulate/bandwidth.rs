//! Algorithm and bus bandwidth as nccl-tests reports them, so that `topoc simulate` can be
//! read beside a measured `*_perf` table.
//!
//! The size is the whole vector in bytes (for allgather the gathered result, for reduce-scatter
//! the scattered input, as nccl-tests counts them). Algorithm bandwidth is size / time. Bus
//! bandwidth scales it by the share of the vector each rank must move over its links in an
//! ideal schedule, which makes it comparable across collectives and rank counts with the
//! hardware's link bandwidth: allreduce 2(n−1)/n, reduce-scatter and allgather (n−1)/n,
//! broadcast and reduce 1.

use schedule_ir::Collective;

/// Bytes per GB: nccl-tests reports decimal gigabytes per second.
const GB: f64 = 1e9;

/// The factor from algorithm to bus bandwidth for `collective` over `ranks` compute nodes.
pub fn bus_factor(collective: Collective, ranks: usize) -> f64 {
    let n = ranks.max(1) as f64;
    match collective {
        Collective::AllReduce => 2.0 * (n - 1.0) / n,
        Collective::ReduceScatter | Collective::AllGather => (n - 1.0) / n,
        Collective::Broadcast { .. } | Collective::Reduce { .. } => 1.0,
    }
}

/// The formula of [`bus_factor`] in words, for table headers.
pub fn bus_formula(collective: Collective) -> &'static str {
    match collective {
        Collective::AllReduce => "2(n-1)/n",
        Collective::ReduceScatter | Collective::AllGather => "(n-1)/n",
        Collective::Broadcast { .. } | Collective::Reduce { .. } => "1",
    }
}

/// Algorithm bandwidth in GB/s of moving `bytes` in `seconds`; 0 when nothing takes time (an
/// empty vector), so the tables never hold an infinity.
pub fn algbw_gbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds / GB
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedule_ir::NodeId;

    #[test]
    fn factors_follow_nccl_tests() {
        assert_eq!(bus_factor(Collective::AllReduce, 8), 1.75);
        assert_eq!(bus_factor(Collective::ReduceScatter, 8), 0.875);
        assert_eq!(bus_factor(Collective::AllGather, 4), 0.75);
        let root = NodeId::new(0);
        assert_eq!(bus_factor(Collective::Broadcast { root }, 8), 1.0);
        assert_eq!(bus_factor(Collective::Reduce { root }, 8), 1.0);
    }

    #[test]
    fn algorithm_bandwidth_is_decimal_and_finite() {
        assert_eq!(algbw_gbps(2_000_000_000, 1.0), 2.0);
        assert_eq!(algbw_gbps(0, 0.0), 0.0);
    }
}
