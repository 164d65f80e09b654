//! `tree`: level-by-level allreduce on any `Tree` machine, asymmetric included.
//!
//! # Portions
//!
//! With `P` processors (in node id order), the vector is cut into `P` chunks ("segments"),
//! segment `q` being processor `q`'s final portion (its owner for reduce-scatter and
//! allgather). For every tree node `v` with processor set `S(v)`, a *holder map*
//! `φ_v : segments → S(v)` says which processor of `v`'s subtree holds segment `q` once the
//! reduction has covered `v`'s subtree. Maps are fixed top-down:
//!
//! - at the root, `φ(q) = q`: every processor holds its own final portion;
//! - for a child `c` of `u`, `φ_c(q) = φ_u(q)` when that processor is in `c`'s subtree (it
//!   keeps what it will own); the other segments are dealt to `c`'s processors as stand-ins,
//!   each to the one holding fewest so far (ties to the first in id order).
//!
//! So each processor of `c` holds about `P / |S(c)|` segments, and one level up it keeps about
//! `P / |S(u)|` of them: its portion is divided by `|S(u)| / |S(c)|` — in a symmetric tree,
//! exactly the branch's degree ("the current target portion divided by the degree").
//! In an asymmetric tree the holders still line up exactly: every segment has exactly one
//! holder in every child subtree, whatever the subtrees' sizes, so no fallback is needed.
//!
//! # Stages
//!
//! Each switch `u` with children `c₁ … c_k` is a **stage**. Its reduce-scatter: for every
//! segment `q`, each holder `φ_{cⱼ}(q)` other than the owner `φ_u(q)` sends `q` to the owner,
//! which reduces it in (the sender's chunk is reduced over `S(cⱼ)`, so the owner's becomes
//! reduced over `S(u)`). Transfers between the same two processors in a stage are one send
//! carrying all their segments. Its allgather is the same transfers reversed: the owner sends
//! the finished segment to every other holder, which stores it.
//!
//! Within a stage no transfer reads a chunk another writes (only owners are written, and they
//! send nothing they own), so its transfers may go in any order and in any grouping into BSP
//! steps. Stages of the same **height** (a processor has height 0, a switch one more than its
//! highest child) sit in disjoint subtrees and run together. The reduce-scatter runs heights
//! `1, 2, …` up to the root's; the allgather runs them back down. Allreduce is both.
//!
//! # Routes and links
//!
//! A transfer crosses every link on the tree path between its two processors (up to their
//! lowest common ancestor and down again), and occupies one direction of each. The transfers of
//! one height are packed first-fit into as many BSP steps as needed so that no link direction
//! carries more than its `lanes` in a step; they are offered in a shifted order (child `i`'s
//! holders first to child `i+1`'s owners, then to `i+2`'s, …), as a ring among the siblings
//! would pair them, so that each step spreads over different links.

use super::plan::{self, Move, Packing, Plan, Step};
use super::{data_buffer, even_chunks, Embedding, Job, Lowered, Lowering, PhaseSpec};
use crate::embed::EmbedError;
use crate::ids::IdVec;
use crate::limits::Estimate;
use crate::machine::{Machine, Shape};
use schedule_ir::{Chunk, ChunkId, Collective, LinkId, NodeId, NodeKind, Phase, RecvMode};
use std::collections::{BTreeMap, VecDeque};

/// `tree`: level-by-level reduce-scatter and gather on a `Tree` machine.
pub struct Tree;

impl Lowering for Tree {
    fn supports(&self, collective: Collective) -> bool {
        super::halves(collective).is_some()
    }
    fn applies(&self, job: &Job<'_>) -> Result<Embedding, EmbedError> {
        let machine = job.machine;
        let stages = stages_of(machine)?;
        Ok(Embedding {
            summary: format!("{} stage(s), level by level", stages.len()),
            parts: stages,
        })
    }
    /// `P` chunks, every one carried between the holders of each level: about `P²` chunk ids
    /// per half, in a few transfers per node and level. Other machines are estimated empty, and
    /// [`lower`] says why it does not apply.
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        if machine.shape != Shape::Tree {
            return Ok(Estimate::default());
        }
        let p = machine.compute_nodes().len() as u64;
        let halves = if spec.collective == Collective::AllReduce {
            2
        } else {
            1
        };
        let depth = crate::limits::hops_from(machine, NodeId(0))
            .into_iter()
            .filter(|&h| h != u64::MAX)
            .max()
            .unwrap_or(0)
            .max(1);
        let nodes = machine.node_count() as u64;
        let carried = halves * p.saturating_mul(p.saturating_sub(1));
        let mut estimate =
            Estimate::transfers(halves * nodes * depth, carried, p, 1).on(p as usize);
        estimate.steps = halves * depth * 2;
        Ok(estimate)
    }
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        lower(spec, machine).map(Lowered::described)
    }
}

/// The rooted tree of a `Tree` machine: parents, children, processors.
struct Rooted {
    /// `parent[v]`: `v`'s parent and the link to it; `None` for the root.
    parent: IdVec<NodeId, Option<(NodeId, LinkId)>>,
    /// `children[v]`, in link order (the declaration's order).
    children: IdVec<NodeId, Vec<NodeId>>,
    /// `depth[v]`: links from the root.
    depth: IdVec<NodeId, usize>,
    /// The processors in id order; processor index `q` is `procs[q]`.
    procs: Vec<NodeId>,
}

/// One pair of a stage, reduce-scatter direction: `from` sends `chunks` to `to`.
#[derive(Clone, Debug)]
struct Pair {
    from: NodeId,
    to: NodeId,
    chunks: Vec<ChunkId>,
    /// Sort key: (shift between the children, stage, sender, receiver).
    key: (usize, NodeId, NodeId, NodeId),
}

/// Lowers `spec` on a `Tree` machine. Returns the phase and one line per stage describing it,
/// or why the method does not apply.
pub fn lower(spec: &PhaseSpec, machine: &Machine) -> Result<(Phase, Vec<String>), EmbedError> {
    if machine.shape != Shape::Tree {
        let broke = machine.failed.broke(|s| *s == Shape::Tree);
        return Err(EmbedError::NotApplicable(format!(
            "`tree` runs on intact `Tree` machines only{broke}"
        )));
    }
    let tree = rooted(machine)?;
    let Some((reduce_scatter, allgather)) = super::halves(spec.collective) else {
        return Err(EmbedError::NotApplicable(format!(
            "`tree` does not lower {}",
            spec.collective
        )));
    };
    let p = tree.procs.len();
    let phi = holders(machine, &tree);
    let (levels, described) = stages(machine, &tree, &phi);

    let owners_needed = !matches!(spec.collective, Collective::AllReduce);
    let chunks: Vec<Chunk> = even_chunks(spec.elements, p)
        .into_iter()
        .enumerate()
        .map(|(q, (start, end))| Chunk {
            start,
            end,
            owner: owners_needed.then(|| tree.procs[q]),
        })
        .collect();

    // One plan step per height: up for the reduce-scatter, back down for the allgather. The
    // assembler packs each height first-fit into as many BSP steps as its links need.
    let level_step = |level: &[Pair], reduce: bool| {
        Step::of(
            level
                .iter()
                .map(|t| {
                    let (from, to, mode) = if reduce {
                        (t.from, t.to, RecvMode::Reduce)
                    } else {
                        (t.to, t.from, RecvMode::Store)
                    };
                    Move::data(from, to, path(&tree, from, to), t.chunks.clone(), mode)
                })
                .collect(),
        )
    };
    let mut steps: Vec<Step> = Vec::new();
    if reduce_scatter {
        steps.extend(levels.iter().map(|level| level_step(level, true)));
    }
    if allgather {
        steps.extend(levels.iter().rev().map(|level| level_step(level, false)));
    }
    let phase = plan::assemble(
        spec,
        "tree",
        machine,
        Plan {
            chunks,
            buffers: data_buffer(),
            steps,
            packing: Packing::FirstFit,
        },
    );
    Ok((phase, described))
}

/// Whether `tree` applies to `machine`: the stages it would run, one line each, or why not.
pub fn stages_of(machine: &Machine) -> Result<Vec<String>, EmbedError> {
    if machine.shape != Shape::Tree {
        let broke = machine.failed.broke(|s| *s == Shape::Tree);
        return Err(EmbedError::NotApplicable(format!(
            "`tree` runs on intact `Tree` machines only{broke}"
        )));
    }
    let tree = rooted(machine)?;
    let phi = holders(machine, &tree);
    Ok(stages(machine, &tree, &phi).1)
}

/// Roots the machine at node 0 and checks it is a tree whose leaves are the processors.
fn rooted(machine: &Machine) -> Result<Rooted, EmbedError> {
    let n = machine.node_count();
    let not_tree = |why: String| EmbedError::NotApplicable(format!("`tree`: {why}"));
    if n == 0 || machine.link_count() + 1 != n {
        return Err(not_tree(format!(
            "{n} nodes and {} links do not form a tree",
            machine.link_count()
        )));
    }
    // Every table has a slot per node of the machine, and the walk meets its nodes only.
    let mut parent: IdVec<NodeId, Option<(NodeId, LinkId)>> = IdVec::filled(None, n);
    let mut children: IdVec<NodeId, Vec<NodeId>> = IdVec::filled(Vec::new(), n);
    let mut depth: IdVec<NodeId, usize> = IdVec::filled(0, n);
    let mut seen: IdVec<NodeId, bool> = IdVec::filled(false, n);
    let root = NodeId::new(0);
    seen[root] = true;
    let mut queue = VecDeque::from([root]);
    while let Some(v) = queue.pop_front() {
        for (link, w) in machine.links_at(v) {
            if seen[w] {
                continue;
            }
            seen[w] = true;
            parent[w] = Some((v, link));
            depth[w] = depth[v] + 1;
            children[v].push(w);
            queue.push_back(w);
        }
    }
    if let Some((v, _)) = seen.iter_enumerated().find(|(_, s)| !**s) {
        return Err(not_tree(format!(
            "`{}` is not connected to the root",
            machine.node(v).name
        )));
    }
    for (id, kids) in children.iter_enumerated() {
        let kind = machine.node(id).kind;
        if kind == NodeKind::Compute && !kids.is_empty() {
            return Err(not_tree(format!(
                "processor `{}` is not a leaf",
                machine.node(id).name
            )));
        }
    }
    Ok(Rooted {
        parent,
        children,
        depth,
        procs: machine.compute_nodes(),
    })
}

/// The holder maps `φ_v` (see the module doc), by node: `phi[v][q]` is the processor of `v`'s
/// subtree holding segment `q`.
fn holders(machine: &Machine, tree: &Rooted) -> IdVec<NodeId, Vec<NodeId>> {
    let n = machine.node_count();
    let in_subtree = subtree_sets(tree, n);
    let mut phi: IdVec<NodeId, Vec<NodeId>> = IdVec::filled(Vec::new(), n);
    let root = NodeId::new(0);
    phi[root] = tree.procs.clone();
    // Breadth-first from the root: a parent's map is made before its children's.
    let mut queue = VecDeque::from([root]);
    while let Some(u) = queue.pop_front() {
        for &c in &tree.children[u] {
            let members = &in_subtree[c];
            let mut load: BTreeMap<NodeId, usize> = members.iter().map(|&m| (m, 0)).collect();
            let mut map: Vec<Option<NodeId>> = phi[u]
                .iter()
                .map(|h| members.binary_search(h).ok().map(|_| *h))
                .collect();
            for h in map.iter().flatten() {
                *load.entry(*h).or_default() += 1;
            }
            for slot in map.iter_mut().filter(|s| s.is_none()) {
                // Fewest held so far; ties to the first in id order.
                let best = members.iter().copied().min_by_key(|m| load.get(m).copied());
                if let Some(m) = best {
                    *load.entry(m).or_default() += 1;
                    *slot = Some(m);
                }
            }
            phi[c] = map.into_iter().flatten().collect();
            queue.push_back(c);
        }
    }
    phi
}

/// The processors of every node's subtree, sorted.
fn subtree_sets(tree: &Rooted, n: usize) -> IdVec<NodeId, Vec<NodeId>> {
    let mut sets: IdVec<NodeId, Vec<NodeId>> = IdVec::filled(Vec::new(), n);
    for &q in &tree.procs {
        let mut at = Some(q);
        while let Some(v) = at {
            sets[v].push(q);
            at = tree.parent[v].map(|(p, _)| p);
        }
    }
    for s in &mut sets {
        s.sort();
    }
    sets
}

/// The transfers of every stage, grouped by height (index 0 is height 1), and a line per
/// stage for humans.
fn stages(
    machine: &Machine,
    tree: &Rooted,
    phi: &IdVec<NodeId, Vec<NodeId>>,
) -> (Vec<Vec<Pair>>, Vec<String>) {
    let mut height: IdVec<NodeId, usize> = IdVec::filled(0, tree.depth.len());
    // Deepest nodes first, so children are done before their parents.
    let mut order: Vec<NodeId> = tree.depth.ids().collect();
    order.sort_by_key(|&v| std::cmp::Reverse(tree.depth[v]));
    for &v in &order {
        if let Some((p, _)) = tree.parent[v] {
            height[p] = height[p].max(height[v] + 1);
        }
    }
    let top = height.iter().copied().max().unwrap_or(0);
    let mut levels: Vec<Vec<Pair>> = vec![Vec::new(); top];
    let mut described = Vec::new();
    for (u, kids) in tree.children.iter_enumerated() {
        if kids.len() < 2 || height[u] == 0 {
            continue;
        }
        let k = kids.len();
        let mut grouped: BTreeMap<(NodeId, NodeId), (usize, Vec<ChunkId>)> = BTreeMap::new();
        for (q, &owner) in phi[u].iter().enumerate() {
            let Some(oi) = kids.iter().position(|&c| phi[c].get(q) == Some(&owner)) else {
                continue;
            };
            for (i, &c) in kids.iter().enumerate() {
                let Some(&h) = phi[c].get(q) else {
                    continue;
                };
                if h != owner {
                    let shift = (oi + k - i) % k;
                    grouped
                        .entry((h, owner))
                        .or_insert_with(|| (shift, Vec::new()))
                        .1
                        .push(ChunkId::new(q));
                }
            }
        }
        let names = |v: &[NodeId]| -> Vec<String> {
            v.iter().map(|&c| machine.node(c).name.clone()).collect()
        };
        described.push((
            height[u],
            format!(
                "height {}: `{}` combines its children {} in {} transfer(s)",
                height[u],
                machine.node(u).name,
                names(kids).join(", "),
                grouped.len()
            ),
        ));
        levels[height[u] - 1].extend(grouped.into_iter().map(|((from, to), (shift, chunks))| {
            Pair {
                from,
                to,
                chunks,
                key: (shift, u, from, to),
            }
        }));
    }
    for level in &mut levels {
        level.sort_by_key(|t| t.key);
    }
    described.sort_by_key(|(h, _)| *h);
    (
        levels,
        described.into_iter().map(|(_, line)| line).collect(),
    )
}

/// The tree path from `from` to `to`: links up to the lowest common ancestor, then down.
fn path(tree: &Rooted, from: NodeId, to: NodeId) -> Vec<LinkId> {
    let (mut a, mut b) = (from, to);
    let mut up = Vec::new();
    let mut down = Vec::new();
    while a != b {
        let (da, db) = (tree.depth[a], tree.depth[b]);
        if da >= db {
            let Some((p, l)) = tree.parent[a] else {
                break;
            };
            up.push(l);
            a = p;
        } else {
            let Some((p, l)) = tree.parent[b] else {
                break;
            };
            down.push(l);
            b = p;
        }
    }
    down.reverse();
    up.extend(down);
    up
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    use crate::lower::testing::machine;

    fn spec() -> PhaseSpec {
        crate::lower::testing::spec(Collective::AllReduce, schedule_ir::DType::I32, 100)
    }

    /// Two switches of two processors each: the seed's symmetric case. Each processor first
    /// holds half the segments (its own and its counterpart's in the other branch), then
    /// its own; the counterparts `a`/`c` and `b`/`d` exchange one level up.
    #[test]
    fn symmetric_tree_halves_portions_by_the_degree() {
        let m = machine(
            r#"Topology(name: "sym", machine: Tree(root: Switch(name: "r", children: [
                Switch(name: "s0", children: [Processor(name: "a"), Processor(name: "b")]),
                Switch(name: "s1", children: [Processor(name: "c"), Processor(name: "d")]),
            ])))"#,
        );
        let tree = rooted(&m).unwrap_or_else(|e| panic!("{e}"));
        let phi = holders(&m, &tree);
        let name =
            |v: &[NodeId]| -> Vec<String> { v.iter().map(|&n| m.node(n).name.clone()).collect() };
        let s0 = m.node_by_name("s0").unwrap_or_else(|| panic!("s0"));
        let s1 = m.node_by_name("s1").unwrap_or_else(|| panic!("s1"));
        assert_eq!(name(&phi[s0]), ["a", "b", "a", "b"]);
        assert_eq!(name(&phi[s1]), ["c", "d", "c", "d"]);
        let (phase, stages) = match lower(&spec(), &m) {
            Ok(x) => x,
            _ => panic!("lowers"),
        };
        assert_eq!(stages.len(), 3);
        // Leaves: one step (four disjoint directions); root: a→c and b→d share s0→r.
        assert_eq!(phase.steps, 2 * (1 + 2));
    }

    #[test]
    fn other_machines_are_refused() {
        let m = machine(r#"Topology(name: "r", machine: Ring(nodes: 4))"#);
        assert!(lower(&spec(), &m).is_err());
    }
}
