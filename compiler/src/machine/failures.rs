//! Failed links and nodes: checked against the machine, taken out of its graph, and — when what
//! is left falls apart — explained by the failures that cut it.
//!
//! Any machine kind may list `failed_links` (link ids) and `failed_nodes` (node names). A failed
//! node takes its links with it. What is left keeps the declared order of nodes and links (ids
//! are renumbered densely), so the same file always gives the same machine. The compiler then
//! works on what is left as on any other machine; structural methods that need the intact
//! shape (the ladder's barley-twist rings) no longer apply, so [`Machine::shape`] becomes
//! [`Shape::Graph`].

use super::{Failed, LinkInfo, Machine, NodeInfo, Shape};
use crate::diag::{closest, Problem};
use crate::ids::IdVec;
use crate::path;
use crate::topology::spans::Path;
use petgraph::graph::NodeIndex;
use petgraph::unionfind::UnionFind;
use petgraph::visit::EdgeRef;
use schedule_ir::{LinkId, NodeId, NodeKind};
use std::collections::{BTreeMap, BTreeSet};

/// One failure as resolved against the machine: its id and where the file lists it.
#[derive(Clone, Debug)]
enum Cause {
    Link(LinkId, Path),
    Node(NodeId, Path),
}

/// Removes the failed links and nodes from `machine`, or reports every unknown or repeated id
/// and every part of the machine the failures cut off.
pub fn apply(
    machine: Machine,
    failed_links: &[String],
    failed_nodes: &[String],
) -> Result<Machine, Vec<Problem>> {
    if failed_links.is_empty() && failed_nodes.is_empty() {
        return Ok(machine);
    }
    let causes = resolve(&machine, failed_links, failed_nodes)?;
    let dead_links: BTreeSet<LinkId> = causes
        .iter()
        .filter_map(|c| match c {
            Cause::Link(l, _) => Some(*l),
            Cause::Node(..) => None,
        })
        .collect();
    let dead_nodes: BTreeSet<NodeId> = causes
        .iter()
        .filter_map(|c| match c {
            Cause::Node(n, _) => Some(*n),
            Cause::Link(..) => None,
        })
        .collect();

    // What is left, renumbered in declared order.
    let mut nodes: IdVec<NodeId, NodeInfo> = IdVec::new();
    let new_id: NewIds = IdVec::from_fn(machine.node_count(), |old| {
        (!dead_nodes.contains(&old)).then(|| nodes.push(machine.node(old).clone()))
    });
    let renamed = |n: NodeId| new_id.get(n).copied().flatten();
    let mut links: Vec<(usize, usize, LinkInfo)> = Vec::new();
    for j in 0..machine.link_count() {
        let id = LinkId::new(j);
        let (a, b) = machine.endpoints(id);
        if let (false, Some(a), Some(b)) = (dead_links.contains(&id), renamed(a), renamed(b)) {
            links.push((a.index(), b.index(), machine.link(id).clone()));
        }
    }
    let mut left = Machine::from_parts(&machine.name, nodes.into_raw(), links, Shape::Graph);
    left.devices = machine
        .devices
        .iter()
        .filter_map(|(&n, caps)| renamed(n).map(|i| (i, *caps)))
        .collect();
    left.failed = Failed {
        links: failed_links.to_vec(),
        nodes: failed_nodes.to_vec(),
        declared: Some(machine.shape.clone()),
    };

    let mut problems = cut_off(&machine, &left, &new_id, &causes);
    let compute = left.compute_nodes().len();
    if problems.is_empty() && compute < 2 {
        let mut p = Problem::at(
            cause_path(&causes[0]),
            format!(
                "with the failed nodes removed, {compute} compute node{} left; a collective needs at least two",
                if compute == 1 { " is" } else { "s are" }
            ),
            "fails too much",
        );
        for c in &causes[1..] {
            p = p.also(cause_path(c), "also failed");
        }
        problems.push(p);
    }
    if problems.is_empty() {
        Ok(left)
    } else {
        Err(problems)
    }
}

fn cause_path(c: &Cause) -> Path {
    match c {
        Cause::Link(_, p) | Cause::Node(_, p) => p.clone(),
    }
}

/// Looks every failed id up; unknown and repeated ids are problems pointing at them.
fn resolve(
    machine: &Machine,
    failed_links: &[String],
    failed_nodes: &[String],
) -> Result<Vec<Cause>, Vec<Problem>> {
    let link_names: BTreeMap<&str, LinkId> = (0..machine.link_count())
        .map(|j| (machine.link(LinkId::new(j)).name.as_str(), LinkId::new(j)))
        .collect();
    let node_names: BTreeMap<&str, NodeId> = (0..machine.node_count())
        .map(|i| (machine.node(NodeId::new(i)).name.as_str(), NodeId::new(i)))
        .collect();
    let mut problems = Vec::new();
    let mut causes = Vec::new();
    let lists: [(&str, &[String], &str); 2] = [
        ("failed_links", failed_links, "link"),
        ("failed_nodes", failed_nodes, "node"),
    ];
    for (field, list, what) in lists {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, name) in list.iter().enumerate() {
            let at = path!["machine", field, i];
            if let Some(&first) = seen.get(name.as_str()) {
                problems.push(
                    Problem::at(
                        at,
                        format!("{what} `{name}` is listed as failed twice"),
                        "listed again here",
                    )
                    .also(path!["machine", field, first], "first listed here")
                    .hint("remove one of them"),
                );
                continue;
            }
            seen.insert(name, i);
            let found = if what == "link" {
                link_names
                    .get(name.as_str())
                    .map(|&l| Cause::Link(l, at.clone()))
            } else {
                node_names
                    .get(name.as_str())
                    .map(|&n| Cause::Node(n, at.clone()))
            };
            match found {
                Some(c) => causes.push(c),
                None => {
                    let names: Vec<&str> = if what == "link" {
                        link_names.keys().copied().collect()
                    } else {
                        node_names.keys().copied().collect()
                    };
                    let mut p = Problem::at(
                        at,
                        format!("failed {what} `{name}` is not a {what} of this machine"),
                        format!(
                            "no {what} has this {}",
                            if what == "link" { "id" } else { "name" }
                        ),
                    );
                    p = match closest(name, names.iter().copied()) {
                        Some(near) => p.hint(format!("did you mean `{near}`?")),
                        None => p.hint(format!(
                            "the machine's {what}s are named like {}; see docs/topology.md for each kind's naming",
                            examples(&names)
                        )),
                    };
                    problems.push(p);
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(causes)
    } else {
        Err(problems)
    }
}

fn examples(names: &[&str]) -> String {
    let shown: Vec<String> = names.iter().take(4).map(|n| format!("`{n}`")).collect();
    let more = if names.len() > 4 { ", …" } else { "" };
    format!("{}{more}", shown.join(", "))
}

/// The id of every node of the whole machine in what is left of it, by old id; `None` for a
/// failed node.
type NewIds = IdVec<NodeId, Option<NodeId>>;

/// The parts of `left` other than its largest, each explained by the failures around it.
fn cut_off(whole: &Machine, left: &Machine, new_id: &NewIds, causes: &[Cause]) -> Vec<Problem> {
    let parts = components(left);
    if parts.len() <= 1 {
        return Vec::new();
    }
    // Old ids of each part, to compare with the failures in the whole machine.
    let old_of: BTreeMap<NodeId, NodeId> = new_id
        .iter_enumerated()
        .filter_map(|(old, new)| new.map(|n| (n, old)))
        .collect();
    // Parts cut off by the same failures are reported together.
    let mut groups: BTreeMap<Vec<usize>, Vec<&Vec<NodeId>>> = BTreeMap::new();
    for part in &parts[1..] {
        let members: BTreeSet<NodeId> =
            part.iter().filter_map(|n| old_of.get(n)).copied().collect();
        // A failure cuts this part off if it is a link with one end in the part, or a node
        // next to the part.
        let touching: Vec<usize> = causes
            .iter()
            .enumerate()
            .filter(|(_, c)| match c {
                Cause::Link(l, _) => {
                    let (a, b) = whole.endpoints(*l);
                    members.contains(&a) != members.contains(&b)
                }
                Cause::Node(n, _) => whole.links_at(*n).iter().any(|(_, m)| members.contains(m)),
            })
            .map(|(i, _)| i)
            .collect();
        if !touching.is_empty() {
            groups.entry(touching).or_default().push(part);
        }
    }
    let mut problems = Vec::new();
    for (touching, cut) in groups {
        let names: Vec<String> = touching
            .iter()
            .map(|&i| match &causes[i] {
                Cause::Link(l, _) => whole.link(*l).name.clone(),
                Cause::Node(n, _) => whole.node(*n).name.clone(),
            })
            .collect();
        let shown: Vec<String> = cut.iter().map(|p| show(left, p)).collect();
        let mut p = Problem::at(
            cause_path(&causes[touching[0]]),
            format!(
                "removing {} disconnects {} from the rest of the machine",
                and_list(&names),
                and_list(&shown)
            ),
            "this failure cuts the machine",
        );
        for &i in &touching[1..] {
            p = p.also(cause_path(&causes[i]), "and this one");
        }
        let cut_compute = cut
            .iter()
            .flat_map(|p| p.iter())
            .any(|&n| left.node(n).kind == NodeKind::Compute);
        let all: Vec<NodeId> = cut.iter().flat_map(|p| p.iter().copied()).collect();
        p = p.note(format!("the rest: {}", show(left, &parts[0])));
        p = if cut_compute {
            p.hint(format!(
                "every compute node must reach every other; if {} are out of service too, list them in `failed_nodes`",
                show(left, &all)
            ))
        } else {
            p.hint(format!(
                "{} reach no compute node any more; list them in `failed_nodes` as well",
                show(left, &all)
            ))
        };
        problems.push(p);
    }
    problems
}

/// The connected parts of a machine, largest first (ties: the one with the lowest node id).
pub fn components(machine: &Machine) -> Vec<Vec<NodeId>> {
    let n = machine.node_count();
    let mut uf = UnionFind::<usize>::new(n);
    for e in machine.graph.edge_references() {
        uf.union(e.source().index(), e.target().index());
    }
    let labels = uf.into_labeling();
    let mut parts: BTreeMap<usize, Vec<NodeId>> = BTreeMap::new();
    for (i, label) in labels.iter().enumerate() {
        parts.entry(*label).or_default().push(NodeId::new(i));
    }
    let mut parts: Vec<Vec<NodeId>> = parts.into_values().collect();
    parts.sort_by_key(|p| (std::cmp::Reverse(p.len()), p[0]));
    parts
}

/// `{a, b, c}` with at most eight names.
pub fn show(machine: &Machine, part: &[NodeId]) -> String {
    let names: Vec<&str> = part
        .iter()
        .take(8)
        .map(|&n| machine.graph[NodeIndex::new(n.index())].name.as_str())
        .collect();
    let more = if part.len() > 8 {
        format!(", … ({} nodes)", part.len())
    } else {
        String::new()
    };
    format!("{{{}{more}}}", names.join(", "))
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
