//! An independent reader and simulator of MSCCL++ execution plans, written from the v0.7.0
//! loader (`src/executor/execution_plan.cc`), executor and kernel
//! (`src/include/execution_kernel.hpp`), not from topoc's exporter or schedule IR.
//!
//! - [`parse`] reads the JSON into this reader's own structures, failing where the loader
//!   would: a missing key, a wrong type, an unknown operation, buffer or channel type.
//! - [`check_structure`] checks what the loader and executor rely on: GPU and thread-block
//!   ids, chunk counts, channels declared alike on both ends (the executor pairs their
//!   semaphores by order), channel ids in range, at most 64 operations and 16 channels per
//!   thread block and 8 per operation, operation fields, every chunk offset inside the
//!   declared counts (the peer's, for a put), barriers reached by as many thread blocks as
//!   they wait for, a `nop` wherever a thread block's threads must meet, and every scratch
//!   chunk that receives a put receiving exactly one.
//! - [`simulate`] runs every thread block of every GPU, each in order, under a [`Policy`]: a
//!   put writes the peer's scratch, but the data may only be read once the sender's next
//!   signal on that channel has been waited for (a counting semaphore per channel pair); a
//!   barrier holds until all its thread blocks arrive. A value is the chunk of the full vector
//!   it belongs to and the set of ranks whose inputs it adds; adding different chunks, or a
//!   rank twice, reading an undefined chunk, reading a put's data before its signal was
//!   waited for, or two thread blocks of one GPU using a chunk (one writing) with no barrier
//!   ordering them (vector clocks joined at barriers) is an error, and so is a run where no
//!   thread block can go on.
//! - [`check_result`] checks every rank's output against the collective.
#![allow(dead_code)]

mod read;
mod rules;

pub use read::{check_structure, parse, Plan};

use read::{At, Gpu, Op};
use std::collections::{BTreeSet, HashMap, HashSet};

/// Orders in which ready thread blocks run.
#[derive(Clone, Copy, Debug)]
pub enum Policy {
    /// One operation per thread block per round, GPUs in order.
    Lockstep,
    /// Each thread block as far as it can go, GPUs and thread blocks in reverse order.
    RunAheadReversed,
}

/// A chunk's symbolic content: which chunk of the full vector, summed over which ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Val {
    pub chunk: u64,
    pub ranks: BTreeSet<usize>,
}

/// A semaphore: from one GPU's channel to a peer, by the channel's ordinal among those to the
/// peer.
type Sem = (usize, usize, usize);

/// Every buffer of every GPU at the end of a run.
pub struct Outcome {
    pub bufs: Vec<HashMap<At, Val>>,
}

/// Reads, checks and runs a plan under every policy, and checks its result. Returns the plan
/// or the first thing wrong, prefixed by `case`.
pub fn check_plan(case: &str, text: &str) -> Result<Plan, String> {
    let plan = parse(text).map_err(|e| format!("{case}: unreadable: {e}"))?;
    let problems = check_structure(&plan);
    if !problems.is_empty() {
        return Err(format!("{case}: {problems:#?}"));
    }
    for policy in [Policy::Lockstep, Policy::RunAheadReversed] {
        let out = simulate(&plan, policy).map_err(|e| format!("{case} {policy:?}: {e}"))?;
        let wrong = check_result(&plan, &out);
        if !wrong.is_empty() {
            return Err(format!("{case} {policy:?}: {wrong:#?}"));
        }
    }
    Ok(plan)
}

/// What the input of `rank` holds at chunk `j`.
fn initial(plan: &Plan, g: &Gpu, j: u64) -> Val {
    let chunk = if plan.collective == "allgather" {
        g.id as u64 * g.input_chunks + j
    } else {
        j
    };
    Val {
        chunk,
        ranks: BTreeSet::from([g.id]),
    }
}

struct Run<'p> {
    plan: &'p Plan,
    bufs: Vec<HashMap<At, Val>>,
    /// Scratch chunks written by a put: the semaphore and count that make them readable.
    landed: HashMap<(usize, At), (Sem, u64)>,
    /// Scratch chunks written by a put and not read since.
    unread: HashSet<(usize, At)>,
    signals: HashMap<Sem, u64>,
    /// Waits begun (expected) and completed, per semaphore.
    expected: HashMap<Sem, u64>,
    waited: HashMap<Sem, u64>,
    arrivals: HashMap<(usize, u64), u64>,
    /// Per GPU, per thread block, a vector clock over the GPU's thread blocks: only barriers
    /// order the thread blocks of one GPU.
    clocks: Vec<Vec<Vec<u64>>>,
    /// Per barrier, the join of its arrivals' clocks.
    barrier_clocks: HashMap<(usize, u64), Vec<u64>>,
    /// Per local chunk, its last write and the reads since, as (thread block, its clock).
    accesses: HashMap<(usize, At), Access>,
}

#[derive(Default)]
struct Access {
    write: Option<(usize, u64)>,
    reads: Vec<(usize, u64)>,
}

/// Where a thread block is.
#[derive(Clone, Default)]
struct Pc {
    next: usize,
    /// A wait begun: the semaphores and counts it needs.
    waiting: Option<Vec<(Sem, u64)>>,
    /// Arrived at the barrier of the current operation.
    arrived: bool,
}

impl Run<'_> {
    /// Records that thread block `t` of GPU `g` reads and writes these chunks, failing when an
    /// access of another thread block to the same chunk is not ordered before it by barriers.
    fn touch(&mut self, g: usize, t: usize, reads: &[At], writes: &[At]) -> Result<(), String> {
        let clock = self.clocks[g][t].clone();
        // This operation is event `clock[t] + 1` of its thread block; thread block `u` has
        // seen, through barriers, thread block `u`'s events up to `clock[u]`.
        let stamp = clock[t] + 1;
        let unordered = |&(u, stamp): &(usize, u64)| u != t && stamp > clock[u];
        for (list, writing) in [(reads, false), (writes, true)] {
            for &at in list {
                let a = self.accesses.entry((g, at)).or_default();
                let clash = a.write.iter().find(|w| unordered(w)).copied().or_else(|| {
                    writing
                        .then(|| a.reads.iter().find(|r| unordered(r)).copied())
                        .flatten()
                });
                if let Some((u, _)) = clash {
                    return Err(format!(
                        "gpu {g}: thread blocks {u} and {t} both use {}[{}] with no barrier \
                         ordering them",
                        at.0, at.1
                    ));
                }
                if writing {
                    *a = Access {
                        write: Some((t, stamp)),
                        reads: Vec::new(),
                    };
                } else {
                    a.reads.push((t, stamp));
                }
            }
        }
        Ok(())
    }

    fn read(&mut self, g: usize, at: At) -> Result<Val, String> {
        if let Some(&(sem, needed)) = self.landed.get(&(g, at)) {
            if self.waited.get(&sem).copied().unwrap_or(0) < needed {
                return Err(format!(
                    "gpu {g} reads {}[{}] before the put that wrote it was signalled and waited for",
                    at.0, at.1
                ));
            }
            self.unread.remove(&(g, at));
        }
        if let Some(v) = self.bufs[g].get(&at) {
            return Ok(v.clone());
        }
        let gpu = &self.plan.gpus[g];
        if at.0 == 'i' && at.1 < gpu.input_chunks {
            return Ok(initial(self.plan, gpu, at.1));
        }
        Err(format!(
            "gpu {g} reads {}[{}], which holds nothing",
            at.0, at.1
        ))
    }

    /// Runs one step of thread block `t` of GPU `g`; `Ok(false)` when it must wait.
    fn step(&mut self, g: usize, t: usize, pc: &mut Pc) -> Result<bool, String> {
        let plan = self.plan;
        let gpu = &plan.gpus[g];
        let tb = &gpu.tbs[t];
        let op: &Op = &tb.ops[pc.next];
        let (reads, writes) = rules::touches(op);
        if op.name != "barrier" {
            self.touch(g, t, &reads, &writes)?;
        }
        let at = |(b, o): At, x: u64| (b, o + x);
        let cnt = op.cnt.unwrap_or(0);
        let ctype = op.ctype.clone().unwrap_or_default();
        let resolve = |key, id| {
            gpu.resolve(tb, key, &ctype, id)
                .ok_or_else(|| format!("gpu {g} tb {t}: channel {id} unresolved"))
        };
        match op.name.as_str() {
            "put" => {
                let key = op.o_buff.unwrap_or(('i', 's'));
                for (i, &(id, off)) in op.o_cids.iter().enumerate() {
                    let (peer, ord) = resolve(key, id)?;
                    let sem = (g, peer, ord);
                    let needed = self.signals.get(&sem).copied().unwrap_or(0) + 1;
                    for x in 0..cnt {
                        let v = self.read(g, at(op.srcs[i], x))?;
                        let dst = (key.1, off + x);
                        if !self.unread.insert((peer, dst)) {
                            return Err(format!(
                                "gpu {g}'s put overwrites gpu {peer} {}[{}] before it was read",
                                dst.0, dst.1
                            ));
                        }
                        self.bufs[peer].insert(dst, v);
                        self.landed.insert((peer, dst), (sem, needed));
                    }
                }
            }
            "signal" => {
                for &(id, _) in &op.o_cids {
                    let (peer, ord) = resolve(op.o_buff.unwrap_or(('i', 's')), id)?;
                    *self.signals.entry((g, peer, ord)).or_default() += 1;
                }
            }
            "wait" => {
                if pc.waiting.is_none() {
                    let mut need = Vec::new();
                    for &(id, _) in &op.i_cids {
                        let (peer, ord) = resolve(op.i_buff.unwrap_or(('i', 's')), id)?;
                        let sem = (peer, g, ord);
                        let e = self.expected.entry(sem).or_default();
                        *e += 1;
                        need.push((sem, *e));
                    }
                    pc.waiting = Some(need);
                }
                let need = pc.waiting.clone().unwrap_or_default();
                if need
                    .iter()
                    .any(|(sem, n)| self.signals.get(sem).copied().unwrap_or(0) < *n)
                {
                    return Ok(false);
                }
                for (sem, n) in need {
                    let w = self.waited.entry(sem).or_default();
                    *w = (*w).max(n);
                }
                pc.waiting = None;
            }
            "copy" | "re" => {
                let (Some(src), Some(dst)) = (op.src, op.dst) else {
                    return Err(format!("gpu {g} tb {t}: {} without buffers", op.name));
                };
                let mut out = Vec::new();
                for x in 0..cnt {
                    let mut v = self.read(g, at(src, x))?;
                    if op.name == "re" {
                        for &s in &op.srcs {
                            let w = self.read(g, at(s, x))?;
                            if w.chunk != v.chunk || !v.ranks.is_disjoint(&w.ranks) {
                                return Err(format!(
                                    "gpu {g} tb {t} op {}: adds chunk {} of ranks {:?} to chunk {} \
                                     of ranks {:?}",
                                    pc.next, w.chunk, w.ranks, v.chunk, v.ranks
                                ));
                            }
                            v.ranks.extend(w.ranks);
                        }
                    }
                    out.push((at(dst, x), v));
                }
                for (d, v) in out {
                    self.landed.remove(&(g, d));
                    self.bufs[g].insert(d, v);
                }
            }
            "barrier" => {
                let (id, n) = op.barrier.unwrap_or((0, 1));
                if !pc.arrived {
                    *self.arrivals.entry((g, id)).or_default() += 1;
                    let own = self.clocks[g][t].clone();
                    let joined = self
                        .barrier_clocks
                        .entry((g, id))
                        .or_insert_with(|| vec![0; own.len()]);
                    for (j, o) in joined.iter_mut().zip(own) {
                        *j = (*j).max(o);
                    }
                    pc.arrived = true;
                }
                if self.arrivals[&(g, id)] < n {
                    return Ok(false);
                }
                let joined = self.barrier_clocks[&(g, id)].clone();
                for (c, j) in self.clocks[g][t].iter_mut().zip(joined) {
                    *c = (*c).max(j);
                }
                pc.arrived = false;
            }
            _ => {}
        }
        self.clocks[g][t][t] += 1;
        pc.next += 1;
        Ok(true)
    }
}

/// Runs the plan to the end under `policy`.
pub fn simulate(plan: &Plan, policy: Policy) -> Result<Outcome, String> {
    let mut run = Run {
        plan,
        bufs: vec![HashMap::new(); plan.gpus.len()],
        landed: HashMap::new(),
        unread: HashSet::new(),
        signals: HashMap::new(),
        expected: HashMap::new(),
        waited: HashMap::new(),
        arrivals: HashMap::new(),
        clocks: plan
            .gpus
            .iter()
            .map(|g| vec![vec![0; g.tbs.len()]; g.tbs.len()])
            .collect(),
        barrier_clocks: HashMap::new(),
        accesses: HashMap::new(),
    };
    let mut pcs: Vec<Vec<Pc>> = plan
        .gpus
        .iter()
        .map(|g| vec![Pc::default(); g.tbs.len()])
        .collect();
    let mut order: Vec<(usize, usize)> = plan
        .gpus
        .iter()
        .enumerate()
        .flat_map(|(g, gpu)| (0..gpu.tbs.len()).map(move |t| (g, t)))
        .collect();
    if matches!(policy, Policy::RunAheadReversed) {
        order.reverse();
    }
    loop {
        let mut progress = false;
        for &(g, t) in &order {
            let len = plan.gpus[g].tbs[t].ops.len();
            while pcs[g][t].next < len {
                if !run.step(g, t, &mut pcs[g][t])? {
                    break;
                }
                progress = true;
                if matches!(policy, Policy::Lockstep) {
                    break;
                }
            }
        }
        if !progress {
            break;
        }
    }
    let stuck: Vec<String> = order
        .iter()
        .filter(|&&(g, t)| pcs[g][t].next < plan.gpus[g].tbs[t].ops.len())
        .map(|&(g, t)| {
            let op = &plan.gpus[g].tbs[t].ops[pcs[g][t].next];
            format!("gpu {g} tb {t} op {} ({})", pcs[g][t].next, op.name)
        })
        .collect();
    if !stuck.is_empty() {
        return Err(format!("deadlock: {}", stuck.join(", ")));
    }
    Ok(Outcome { bufs: run.bufs })
}

/// Every way the outputs differ from the collective's result.
pub fn check_result(plan: &Plan, out: &Outcome) -> Vec<String> {
    let n = plan.gpus.len();
    let all: BTreeSet<usize> = (0..n).collect();
    let mut wrong = Vec::new();
    for g in &plan.gpus {
        let k = g.input_chunks;
        let expected_chunks = match plan.collective.as_str() {
            "allreduce" => k,
            "reducescatter" => k / n as u64,
            _ => k * n as u64,
        };
        if g.output_chunks != expected_chunks {
            wrong.push(format!(
                "gpu {}: {} output chunks for {} input chunks of a {}",
                g.id, g.output_chunks, k, plan.collective
            ));
            continue;
        }
        for j in 0..g.output_chunks {
            let want = match plan.collective.as_str() {
                "allreduce" => Val {
                    chunk: j,
                    ranks: all.clone(),
                },
                "reducescatter" => Val {
                    chunk: g.id as u64 * g.output_chunks + j,
                    ranks: all.clone(),
                },
                _ => Val {
                    chunk: j,
                    ranks: BTreeSet::from([(j / k.max(1)) as usize]),
                },
            };
            let got = out.bufs[g.id].get(&('o', j));
            if got != Some(&want) {
                wrong.push(format!("gpu {} o[{j}]: {got:?}, want {want:?}", g.id));
            }
        }
    }
    wrong
}
