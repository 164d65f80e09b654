//! Checks on a finished algorithm: the runtimes' limits, and that its thread blocks cannot get
//! stuck waiting for each other.

use super::{
    Algo, MscclError, StepKind, MAX_CHANNELS, MAX_DEPID, MAX_ELEMENTS_PER_RANK, MAX_STEPS,
    MAX_TBS_PER_CHANNEL,
};

/// Runs the thread blocks as MSCCL would, each connection holding at most one message, and
/// refuses the algorithm if they can get stuck. The blocks are fixed sequences of blocking
/// sends and receives, so whether they finish does not depend on the order they run in: one
/// run that finishes proves every run does.
pub(super) fn check_progress(algo: &Algo, phase: &str) -> Result<(), MscclError> {
    use std::collections::BTreeMap;
    let receives = |k: StepKind| {
        matches!(
            k,
            StepKind::Recv
                | StepKind::RecvCopySend
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
        )
    };
    let sends = |k: StepKind| {
        matches!(
            k,
            StepKind::Send
                | StepKind::RecvCopySend
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopySend
        )
    };
    // Messages waiting on each (from rank, to rank, channel).
    let mut queued: BTreeMap<(u32, u32, u32), usize> = BTreeMap::new();
    let mut done: Vec<Vec<usize>> = algo.gpus.iter().map(|g| vec![0; g.tbs.len()]).collect();
    // Whether the current step's receive has happened (a step receives before it sends).
    let mut received: Vec<Vec<bool>> = algo.gpus.iter().map(|g| vec![false; g.tbs.len()]).collect();
    loop {
        let mut progress = false;
        for (g, gpu) in algo.gpus.iter().enumerate() {
            for (t, tb) in gpu.tbs.iter().enumerate() {
                while let Some(step) = tb.steps.get(done[g][t]) {
                    if let Some(dep) = step.dep {
                        if done[g]
                            .get(dep.tb as usize)
                            .is_none_or(|&d| d <= dep.step as usize)
                        {
                            break;
                        }
                    }
                    let inbox = tb.recv.map(|from| (from, gpu.rank, tb.chan));
                    let outbox = tb.send.map(|to| (gpu.rank, to, tb.chan));
                    if receives(step.kind) && !received[g][t] {
                        let Some(k) = inbox else { break };
                        match queued.get_mut(&k) {
                            Some(n) if *n > 0 => *n -= 1,
                            _ => break,
                        }
                        received[g][t] = true;
                        progress = true;
                    }
                    if sends(step.kind) {
                        let Some(k) = outbox else { break };
                        let n = queued.entry(k).or_default();
                        if *n >= 1 {
                            break;
                        }
                        *n += 1;
                    }
                    received[g][t] = false;
                    done[g][t] += 1;
                    progress = true;
                }
            }
        }
        if !progress {
            break;
        }
    }
    let stuck: Vec<String> = algo
        .gpus
        .iter()
        .enumerate()
        .flat_map(|(g, gpu)| {
            let done = &done[g];
            gpu.tbs
                .iter()
                .enumerate()
                .filter(move |(t, tb)| done[*t] < tb.steps.len())
                .map(move |(t, _)| format!("gpu {} tb {t} at step {}", gpu.rank, done[t]))
        })
        .collect();
    if stuck.is_empty() {
        return Ok(());
    }
    let shown = stuck.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
    let more = if stuck.len() > 4 {
        format!(" and {} more", stuck.len() - 4)
    } else {
        String::new()
    };
    Err(MscclError::Deadlock {
        phase: phase.to_string(),
        stuck: format!("{shown}{more}"),
    })
}

/// The runtimes' limits, checked on the finished algorithm.
pub(super) fn check_limits(algo: &Algo, phase: &str) -> Result<(), MscclError> {
    if algo.nchannels > MAX_CHANNELS {
        if let Some(gpu) = algo
            .gpus
            .iter()
            .find(|g| g.tbs.iter().any(|t| t.chan + 1 == algo.nchannels))
        {
            return Err(MscclError::TooManyChannels {
                phase: phase.to_string(),
                needed: algo.nchannels,
                node: gpu.node.clone(),
                rank: gpu.rank,
            });
        }
    }
    for gpu in &algo.gpus {
        let node = || gpu.node.clone();
        for (id, tb) in gpu.tbs.iter().enumerate() {
            if tb.steps.len() > MAX_STEPS {
                return Err(MscclError::TooManySteps {
                    phase: phase.to_string(),
                    node: node(),
                    rank: gpu.rank,
                    tb: id,
                    chan: tb.chan,
                    steps: tb.steps.len(),
                });
            }
            for step in &tb.steps {
                if let Some(dep) = step.dep {
                    if dep.tb as usize > MAX_DEPID {
                        return Err(MscclError::DependencyTooFar {
                            phase: phase.to_string(),
                            node: node(),
                            rank: gpu.rank,
                            tb: dep.tb as usize,
                        });
                    }
                }
            }
        }
        for chan in 0..algo.nchannels {
            for (direction, count) in [
                (
                    "send",
                    gpu.tbs
                        .iter()
                        .filter(|t| t.chan == chan && t.send.is_some())
                        .count(),
                ),
                (
                    "receive",
                    gpu.tbs
                        .iter()
                        .filter(|t| t.chan == chan && t.recv.is_some())
                        .count(),
                ),
            ] {
                if count > MAX_TBS_PER_CHANNEL {
                    return Err(MscclError::TooManyThreadBlocks {
                        phase: phase.to_string(),
                        node: node(),
                        rank: gpu.rank,
                        chan,
                        direction,
                        count,
                    });
                }
            }
        }
        let count = 1
            + algo.gpus.len()
            + gpu.tbs.len()
            + gpu.tbs.iter().map(|t| t.steps.len()).sum::<usize>();
        if count > MAX_ELEMENTS_PER_RANK {
            return Err(MscclError::TooManyElements {
                phase: phase.to_string(),
                node: node(),
                rank: gpu.rank,
                count,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::msccl::{Buf, Gpu, Loc, Step, ThreadBlock};

    /// Two GPUs, each with one thread block that sends to and receives from the other, running
    /// `kinds` in order (chunk offsets do not matter to progress).
    fn pair(kinds: &[StepKind]) -> Algo {
        let at = Loc {
            buf: Buf::Output,
            off: 0,
        };
        let gpu = |rank: u32| Gpu {
            rank,
            node: format!("N{rank}"),
            i_chunks: 2,
            o_chunks: 2,
            s_chunks: 0,
            tbs: vec![ThreadBlock {
                send: Some(1 - rank),
                recv: Some(1 - rank),
                chan: 0,
                steps: kinds
                    .iter()
                    .map(|&kind| Step {
                        kind,
                        src: at,
                        dst: at,
                        cnt: 1,
                        dep: None,
                        has_dep: false,
                    })
                    .collect(),
            }],
        };
        Algo {
            name: "pair".to_string(),
            coll: "allgather",
            nchunksperloop: 2,
            nchannels: 1,
            gpus: vec![gpu(0), gpu(1)],
            min_bytes: 0,
            max_bytes: 0,
        }
    }

    #[test]
    fn two_sends_before_a_receive_deadlock_on_one_message_connections() {
        use StepKind::{Recv, Send};
        assert_eq!(
            check_progress(&pair(&[Send, Send, Recv, Recv]), "x"),
            Err(MscclError::Deadlock {
                phase: "x".to_string(),
                stuck: "gpu 0 tb 0 at step 1, gpu 1 tb 0 at step 1".to_string(),
            })
        );
        assert_eq!(
            check_progress(&pair(&[Recv, Send]), "x"),
            Err(MscclError::Deadlock {
                phase: "x".to_string(),
                stuck: "gpu 0 tb 0 at step 0, gpu 1 tb 0 at step 0".to_string(),
            })
        );
        assert_eq!(
            check_progress(&pair(&[Send, Recv, Send, Recv]), "x"),
            Ok(())
        );
    }
}
