//! From a verified phase to MSCCL thread blocks: transfers and connections, thread-block pairing
//! and channels (one per logical ring), and which receives fuse with the next send.

use super::{Buf, Gpu, MscclError, StepKind, MAX_TBS_PER_CHANNEL};
use crate::emit::layout::{Layout, DATA};
use schedule_ir::{
    BufferId, ChunkId, ChunkIds, Instr, LinkId, Machine, NodeId, Phase, Ranks, RecvMode,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A moment of a BSP step, for ordering: (step, 0 = reads / 1 = writes, round, program index).
/// The round of a send or receive is the chunk's position in its transfer (its message's place
/// on the connection in that step); local operations take round 0. The writes of one step are
/// made round by round, as the thread blocks run them.
pub(super) type At = (u32, u8, usize, usize);

/// How each thread block orders the messages of one BSP step (a transfer of several chunks is
/// several messages on its connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Order {
    /// All of a step's sends, then its receives, and a receive fused with the next step's send
    /// of the same chunks wherever one transfer forwards another. The fewest steps, and what
    /// the runtimes' deeper FIFOs pipeline best; but thread blocks that send each other several
    /// messages of a step in a cycle wait forever on one-message FIFOs, so this order is kept
    /// only when the finished file runs with them.
    StepByStep,
    /// Message by message: in each step, the `r`-th send, then the `r`-th receive, then round
    /// `r + 1`; only one-chunk transfers that are their connection's next message fuse. Runs
    /// with one-message FIFOs whatever the schedule (`docs/msccl.md` gives the argument).
    MessageByMessage,
}

/// One matched send and receive.
pub(super) struct Transfer {
    pub(super) step: u32,
    pub(super) from: NodeId,
    pub(super) to: NodeId,
    pub(super) conn: usize,
    pub(super) recv_j: usize,
    pub(super) send_buf: BufferId,
    pub(super) recv_buf: BufferId,
    pub(super) chunks: ChunkIds,
}

/// A directed connection: one sender, one receiver, one route.
pub(super) struct Conn {
    pub(super) from: NodeId,
    pub(super) to: NodeId,
}

/// How an instruction uses a chunk, for liveness.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Use {
    /// Read, by the send of this transfer (or a local operation).
    Read(Option<usize>),
    /// Replaced.
    Store,
    /// Combined into (read and written).
    Update,
}

/// A send of the step being matched.
struct PendingSend<'p> {
    from: NodeId,
    /// Its index in the sender's step.
    j: usize,
    to: NodeId,
    /// Its first link, then `via`.
    route: Vec<LinkId>,
    buffer: BufferId,
    chunks: &'p ChunkIds,
    matched: bool,
}

/// What the planning passes know about a phase, built up pass by pass.
pub(super) struct Planner<'a> {
    pub(super) phase: &'a Phase,
    pub(super) order: Order,
    /// The first BSP step of every window but the first.
    pub(super) bounds: Vec<u32>,
    /// Node names, by node id.
    pub(super) names: Vec<String>,
    /// The GPUs: compute nodes by rank.
    pub(super) ranks: Ranks,
    pub(super) layout: Layout,
    pub(super) transfers: Vec<Transfer>,
    pub(super) conns: Vec<Conn>,
    /// The transfer of a send, by (sender, step, index in its step).
    pub(super) send_at: HashMap<(NodeId, u32, usize), usize>,
    /// The transfer of a receive, by (receiver, step, index in its step).
    pub(super) recv_at: HashMap<(NodeId, u32, usize), usize>,
    /// The transfers over a connection in a step.
    pub(super) on_conn: HashMap<(usize, u32), Vec<usize>>,
    /// Every use of every (node, buffer, chunk), in time order.
    pub(super) timeline: HashMap<(NodeId, BufferId, ChunkId), Vec<(At, Use)>>,
}

/// The instructions of `node` in step `k` (none for a switch).
pub(super) fn step_instrs(phase: &Phase, node: usize, k: u32) -> &[Instr] {
    phase
        .programs
        .get(node)
        .and_then(|p| p.steps.get(k as usize))
        .map_or(&[], Vec::as_slice)
}

/// Thread-block channels, by (connection, window).
pub(super) type Channels = HashMap<(usize, u32), u32>;

/// Plans every GPU of `phase`. `bounds` cuts the BSP steps into windows (a window starts at
/// each bound): every thread block works in one window, so a long plan becomes several shorter
/// thread blocks, each on its own channel.
pub(super) fn plan(
    machine: &Machine,
    phase: &Phase,
    order: Order,
    bounds: &[u32],
) -> Result<Vec<Gpu>, MscclError> {
    let ranks = Ranks::new(machine);
    let names: Vec<String> = machine.nodes.iter().map(|n| n.name.clone()).collect();
    let layout = Layout::new(phase, &ranks, &names, super::MAX_OFFSET)
        .map_err(|e| MscclError::from_layout(phase, e))?;
    let mut planner = Planner {
        phase,
        order,
        bounds: bounds.to_vec(),
        names,
        ranks,
        layout,
        transfers: Vec::new(),
        conns: Vec::new(),
        send_at: HashMap::new(),
        recv_at: HashMap::new(),
        on_conn: HashMap::new(),
        timeline: HashMap::new(),
    };
    planner.collect_transfers()?;
    planner.collect_timeline();
    let mut forward = planner.pair_connections();
    let active = planner.active_windows();
    let chan = planner.channels(&mut forward, &active);
    let fused = planner.fuse(&forward);
    let mut gpus = Vec::new();
    for (r, n) in planner.ranks.iter() {
        gpus.push(planner.gpu(n, r.0, &forward, (&chan, &active), &fused)?);
    }
    for gpu in &mut gpus {
        gpu.s_chunks = gpu
            .tbs
            .iter()
            .flat_map(|t| t.steps.iter())
            .filter(|s| s.kind != StepKind::Nop)
            .flat_map(|s| [s.src, s.dst])
            .filter(|l| l.buf == Buf::Scratch)
            .map(|l| l.off + 1)
            .max()
            .unwrap_or(0);
    }
    Ok(gpus)
}

impl Planner<'_> {
    /// The round of the `i`-th chunk of a transfer: its message's turn among its connection's
    /// messages of the step.
    pub(super) fn round(&self, i: usize) -> usize {
        match self.order {
            Order::StepByStep => 0,
            Order::MessageByMessage => i,
        }
    }

    /// The window of BSP step `k`.
    pub(super) fn window(&self, k: u32) -> u32 {
        self.bounds.partition_point(|&b| b <= k) as u32
    }

    /// Per connection, the windows in which it carries something.
    pub(super) fn active_windows(&self) -> Vec<BTreeSet<u32>> {
        let mut active = vec![BTreeSet::new(); self.conns.len()];
        for t in &self.transfers {
            active[t.conn].insert(self.window(t.step));
        }
        active
    }

    pub(super) fn internal(&self, detail: String) -> MscclError {
        MscclError::Internal {
            phase: self.phase.name.clone(),
            detail,
        }
    }

    pub(super) fn lookup<K: std::hash::Hash + Eq + std::fmt::Debug, V: Copy>(
        &self,
        map: &HashMap<K, V>,
        key: K,
    ) -> Result<V, MscclError> {
        map.get(&key)
            .copied()
            .ok_or_else(|| self.internal(format!("no entry for {key:?}")))
    }

    /// Pairs every receive with its send, as the verifier does, and names the connections.
    fn collect_transfers(&mut self) -> Result<(), MscclError> {
        let phase = self.phase;
        // A connection is a sender, a receiver, a route and a lane: the `i`-th transfer over the
        // same route in a step takes lane `i`, so that rings sharing a link of several lanes
        // keep a connection each, as they would on parallel links.
        let mut conn_of: HashMap<(NodeId, NodeId, Vec<LinkId>, u32), usize> = HashMap::new();
        for k in 0..phase.steps {
            let mut lanes: HashMap<(NodeId, NodeId, Vec<LinkId>), u32> = HashMap::new();
            let mut sends: Vec<PendingSend> = Vec::new();
            for n in 0..phase.programs.len() {
                for (j, instr) in step_instrs(phase, n, k).iter().enumerate() {
                    if let Instr::Send {
                        link,
                        via,
                        to,
                        buffer,
                        chunks,
                    } = instr
                    {
                        sends.push(PendingSend {
                            from: NodeId::new(n),
                            j,
                            to: *to,
                            route: std::iter::once(*link).chain(via.iter().copied()).collect(),
                            buffer: *buffer,
                            chunks,
                            matched: false,
                        });
                    }
                }
            }
            for n in 0..phase.programs.len() {
                let node = NodeId::new(n);
                for (j, instr) in step_instrs(phase, n, k).iter().enumerate() {
                    let Instr::Recv {
                        link,
                        from,
                        buffer,
                        chunks,
                        ..
                    } = instr
                    else {
                        continue;
                    };
                    let Some(send) = sends.iter_mut().find(|s| {
                        !s.matched
                            && s.from == *from
                            && s.to == node
                            && s.route.last() == Some(link)
                            && s.chunks == chunks
                    }) else {
                        return Err(self.internal(format!(
                            "step {k}: the receive of {} has no send",
                            self.names[n]
                        )));
                    };
                    send.matched = true;
                    let lane = lanes
                        .entry((send.from, node, send.route.clone()))
                        .or_default();
                    let key = (send.from, node, send.route.clone(), *lane);
                    *lane += 1;
                    let conn = match conn_of.get(&key) {
                        Some(&c) => c,
                        None => {
                            self.conns.push(Conn {
                                from: send.from,
                                to: node,
                            });
                            conn_of.insert(key, self.conns.len() - 1);
                            self.conns.len() - 1
                        }
                    };
                    let t = self.transfers.len();
                    self.send_at.insert((send.from, k, send.j), t);
                    self.recv_at.insert((node, k, j), t);
                    self.on_conn.entry((conn, k)).or_default().push(t);
                    self.transfers.push(Transfer {
                        step: k,
                        from: send.from,
                        to: node,
                        conn,
                        recv_j: j,
                        send_buf: send.buffer,
                        recv_buf: *buffer,
                        chunks: chunks.clone(),
                    });
                }
            }
            if let Some(s) = sends.iter().find(|s| !s.matched) {
                return Err(self.internal(format!(
                    "step {k}: a send of {} has no receive",
                    self.names[s.from.index()]
                )));
            }
        }
        Ok(())
    }

    /// Every use of every (node, buffer, chunk), in time order.
    fn collect_timeline(&mut self) {
        self.collect_uses();
        for uses in self.timeline.values_mut() {
            uses.sort_by_key(|&(at, _)| at);
        }
    }

    /// Every use of every (node, buffer, chunk), step by step.
    fn collect_uses(&mut self) {
        let phase = self.phase;
        for k in 0..phase.steps {
            for part in [0u8, 1] {
                for n in 0..phase.programs.len() {
                    let node = NodeId::new(n);
                    for (j, instr) in step_instrs(phase, n, k).iter().enumerate() {
                        let (buf, chunks, use_) = match (part, instr) {
                            (0, Instr::Send { buffer, chunks, .. }) => (
                                *buffer,
                                chunks,
                                Use::Read(self.send_at.get(&(node, k, j)).copied()),
                            ),
                            (0, Instr::Copy { src, chunks, .. })
                            | (0, Instr::Reduce { src, chunks, .. }) => {
                                (*src, chunks, Use::Read(None))
                            }
                            (
                                1,
                                Instr::Recv {
                                    buffer,
                                    chunks,
                                    mode,
                                    ..
                                },
                            ) => (
                                *buffer,
                                chunks,
                                match mode {
                                    RecvMode::Store => Use::Store,
                                    RecvMode::Reduce => Use::Update,
                                },
                            ),
                            (1, Instr::Copy { dst, chunks, .. }) => (*dst, chunks, Use::Store),
                            (1, Instr::Reduce { dst, chunks, .. }) => (*dst, chunks, Use::Update),
                            _ => continue,
                        };
                        let message = matches!(instr, Instr::Send { .. } | Instr::Recv { .. });
                        for (i, c) in chunks.iter().enumerate() {
                            let round = if message { self.round(i) } else { 0 };
                            self.timeline
                                .entry((node, buf, c))
                                .or_default()
                                .push(((k, part, round, j), use_));
                        }
                    }
                }
            }
        }
    }

    /// At every node, pairs an incoming connection with the outgoing one that most often sends
    /// on, one step later, what it received. Returns incoming → outgoing.
    fn pair_connections(&self) -> BTreeMap<usize, usize> {
        let mut by_sender: HashMap<(NodeId, u32), Vec<usize>> = HashMap::new();
        for (i, t) in self.transfers.iter().enumerate() {
            by_sender.entry((t.from, t.step)).or_default().push(i);
        }
        let mut weight: BTreeMap<(usize, usize), usize> = BTreeMap::new();
        for t in &self.transfers {
            for &u in by_sender.get(&(t.to, t.step + 1)).into_iter().flatten() {
                let u = &self.transfers[u];
                if u.chunks == t.chunks && u.send_buf == t.recv_buf {
                    *weight.entry((t.conn, u.conn)).or_default() += 1;
                }
            }
        }
        let mut candidates: Vec<((usize, usize), usize)> = weight.into_iter().collect();
        candidates.sort_by_key(|&((x, y), w)| (Reverse(w), x, y));
        let mut forward = BTreeMap::new();
        let mut taken = BTreeSet::new();
        for ((x, y), _) in candidates {
            if !forward.contains_key(&x) && !taken.contains(&y) {
                forward.insert(x, y);
                taken.insert(y);
            }
        }
        forward
    }

    /// Channels for the chains of paired connections (our logical rings). A chain that would
    /// give a GPU two thread blocks with the same peer on one channel is first split into its
    /// connections. Then, chain by chain in order of their first connection, each chain takes
    /// the lowest channel on which none of its thread blocks meets another with the same peer
    /// and direction, and no GPU gets more than [`MAX_TBS_PER_CHANNEL`] thread blocks sending
    /// (or receiving) on it: the runtimes' rules, and nothing more, so that the file asks for
    /// as few channels as it can.
    fn channels(&self, forward: &mut BTreeMap<usize, usize>, active: &[BTreeSet<u32>]) -> Channels {
        let roots = loop {
            let mut parent: Vec<usize> = (0..self.conns.len()).collect();
            fn find(parent: &mut [usize], mut x: usize) -> usize {
                while parent[x] != x {
                    parent[x] = parent[parent[x]];
                    x = parent[x];
                }
                x
            }
            for (&x, &y) in forward.iter() {
                let (a, b) = (find(&mut parent, x), find(&mut parent, y));
                parent[a.max(b)] = a.min(b);
            }
            let roots: Vec<usize> = (0..self.conns.len())
                .map(|c| find(&mut parent, c))
                .collect();
            let mut seen: HashMap<(usize, NodeId, NodeId), usize> = HashMap::new();
            let mut bad = BTreeSet::new();
            for (c, conn) in self.conns.iter().enumerate() {
                if seen.insert((roots[c], conn.from, conn.to), c).is_some() {
                    bad.insert(roots[c]);
                }
            }
            if bad.is_empty() {
                break roots;
            }
            forward.retain(|x, _| !bad.contains(&roots[*x]));
        };
        let mut chains: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (c, &r) in roots.iter().enumerate() {
            chains.entry(r).or_default().push(c);
        }
        // (gpu, sends?, peer, channel) taken; (gpu, sends?, channel) → thread blocks.
        let mut taken: BTreeSet<(NodeId, bool, NodeId, u32)> = BTreeSet::new();
        let mut count: HashMap<(NodeId, bool, u32), usize> = HashMap::new();
        let mut chan: Channels = HashMap::new();
        let mut fresh = 0u32;
        for conns in chains.values() {
            let windows: BTreeSet<u32> = conns.iter().flat_map(|&c| &active[c]).copied().collect();
            for w in windows {
                let ends = |ch: u32| {
                    conns.iter().flat_map(move |&c| {
                        let conn = &self.conns[c];
                        [
                            (conn.from, true, conn.to, ch),
                            (conn.to, false, conn.from, ch),
                        ]
                    })
                };
                let fits = |ch: u32| {
                    let mut extra: HashMap<(NodeId, bool, u32), usize> = HashMap::new();
                    ends(ch).all(|(gpu, sends, _, ch)| {
                        let n = extra.entry((gpu, sends, ch)).or_default();
                        *n += 1;
                        count.get(&(gpu, sends, ch)).copied().unwrap_or(0) + *n
                            <= MAX_TBS_PER_CHANNEL
                    }) && ends(ch).all(|key| !taken.contains(&key))
                };
                // A fresh channel fits unless the chain alone is too much for a GPU; the
                // limit check then refuses the file with the reason.
                let ch = (0..fresh).find(|&ch| fits(ch)).unwrap_or(fresh);
                fresh = fresh.max(ch + 1);
                for key in ends(ch).collect::<Vec<_>>() {
                    taken.insert(key);
                    *count.entry((key.0, key.1, ch)).or_default() += 1;
                }
                for &c in conns {
                    chan.insert((c, w), ch);
                }
            }
        }
        chan
    }

    /// For each transfer, the transfer it is fused with: its receiver sends the same chunks on
    /// in the next step, from the same thread block, and nothing else writes them in between;
    /// message by message, only a one-chunk transfer whose forward is its connection's next
    /// message.
    fn fuse(&self, forward: &BTreeMap<usize, usize>) -> Vec<Option<usize>> {
        let mut fused = vec![None; self.transfers.len()];
        for (i, t) in self.transfers.iter().enumerate() {
            let Some(&y) = forward.get(&t.conn) else {
                continue;
            };
            if self.window(t.step) != self.window(t.step + 1) {
                continue;
            }
            if self.on_conn.get(&(t.conn, t.step)).map_or(0, Vec::len) != 1 {
                continue;
            }
            // Message by message: one message, and none after it on the forward connection in
            // this step. A fused
            // step sends its chunk of step `k + 1` right after its receive of step `k`, so that
            // send must be the forward connection's next message, and the thread block must not
            // send a second message of step `k + 1` before its peer could take the first.
            if self.order == Order::MessageByMessage
                && (t.chunks.len() != 1 || self.messages(y, t.step) > 1)
            {
                continue;
            }
            let Some([u]) = self.on_conn.get(&(y, t.step + 1)).map(Vec::as_slice) else {
                continue;
            };
            let next = &self.transfers[*u];
            if next.chunks != t.chunks || next.send_buf != t.recv_buf {
                continue;
            }
            let last_write = t.chunks.iter().all(|c| {
                self.timeline
                    .get(&(t.to, t.recv_buf, c))
                    .into_iter()
                    .flatten()
                    .all(|&((k, part, round, j), _)| {
                        !(k == t.step && part == 1 && (round, j) > (0, t.recv_j))
                    })
            });
            if last_write {
                fused[i] = Some(*u);
            }
        }
        fused
    }

    /// Messages (chunks, one MSCCL step each) that connection `conn` carries in BSP step `k`.
    fn messages(&self, conn: usize, k: u32) -> usize {
        self.on_conn
            .get(&(conn, k))
            .into_iter()
            .flatten()
            .map(|&t| self.transfers[t].chunks.len())
            .sum()
    }

    /// Whether the value transfer `t` leaves in chunk `c` is never read again once fused
    /// transfer `u` has sent it on (so `rrs` need not store it).
    pub(super) fn dead_after(&self, t: &Transfer, u: usize, c: ChunkId, rank: u32) -> bool {
        // A fused transfer is one chunk: round 0.
        let at: At = (t.step, 1, 0, t.recv_j);
        for &(when, use_) in self
            .timeline
            .get(&(t.to, t.recv_buf, c))
            .into_iter()
            .flatten()
        {
            if when <= at {
                continue;
            }
            match use_ {
                Use::Read(Some(x)) if x == u => {}
                Use::Store => return true,
                Use::Read(_) | Use::Update => return false,
            }
        }
        !(t.recv_buf == DATA && self.layout.output(rank, c).is_some())
    }
}
