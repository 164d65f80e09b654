//! `Graph(nodes, switches, links)`: an explicit machine with user-chosen node names and link
//! ids. `nodes` are compute nodes, `switches` forward transfers and compute nothing; node `i`
//! is `nodes[i]`, then the switches follow in their order.

use super::{LinkInfo, Machine, NodeInfo, Shape};
use crate::diag::{closest, Problem};
use crate::path;
use crate::topology::ast::{LinkDecl, LinkParams};
use schedule_ir::NodeKind;
use std::collections::BTreeMap;

/// Builds an explicit graph, reporting every problem in its declaration.
pub fn graph(
    name: &str,
    nodes: &[String],
    switches: &[String],
    links: &[LinkDecl],
    defaults: LinkParams,
) -> Result<Machine, Vec<Problem>> {
    let mut problems = Vec::new();
    if nodes.is_empty() {
        problems.push(
            Problem::at(
                path!["machine", "nodes"],
                "the graph has no nodes",
                "empty list",
            )
            .hint("list the compute nodes, e.g. `nodes: [\"a\", \"b\", \"c\"]`"),
        );
    }
    // Every declared name with its kind and where it was written.
    let declared: Vec<(&String, NodeKind, crate::topology::spans::Path)> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n, NodeKind::Compute, path!["machine", "nodes", i]))
        .chain(
            switches
                .iter()
                .enumerate()
                .map(|(i, n)| (n, NodeKind::Switch, path!["machine", "switches", i])),
        )
        .collect();
    let all_names: Vec<&str> = declared.iter().map(|(n, _, _)| n.as_str()).collect();
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (n, _, at)) in declared.iter().enumerate() {
        if n.trim().is_empty() {
            problems.push(Problem::at(
                at.clone(),
                "a node name is empty",
                "give the node a name",
            ));
        } else if let Some(&first) = index.get(n.as_str()) {
            problems.push(
                Problem::at(
                    at.clone(),
                    format!("node `{n}` is declared twice"),
                    "declared again here",
                )
                .also(declared[first].2.clone(), "first declared here")
                .hint("node names must be unique among compute nodes and switches; rename or remove one"),
            );
        } else {
            index.insert(n, i);
        }
    }
    let edges = declare_links(links, &index, &all_names, defaults, &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }

    let nodes = declared
        .iter()
        .map(|(n, kind, _)| NodeInfo {
            name: (*n).clone(),
            kind: *kind,
        })
        .collect();
    let links = edges
        .into_iter()
        .map(|(a, b, id, p)| (a, b, LinkInfo::new(id, &p)))
        .collect();
    Ok(Machine::from_parts(name, nodes, links, Shape::Graph))
}

/// A checked link: its two end nodes' indexes, its id and its figures.
type Edge = (usize, usize, String, LinkParams);

/// Checks each declared link (unique id, known and distinct ends, sane figures) against the
/// node `index`, adding what is wrong to `problems`; returns the links that are well formed.
fn declare_links(
    links: &[LinkDecl],
    index: &BTreeMap<&str, usize>,
    all_names: &[&str],
    defaults: LinkParams,
    problems: &mut Vec<Problem>,
) -> Vec<Edge> {
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    let mut edges = Vec::new();
    for (j, l) in links.iter().enumerate() {
        let at = path!["machine", "links", j];
        if l.id.trim().is_empty() {
            problems.push(Problem::at(
                at.field("id"),
                "a link id is empty",
                "give the link an id",
            ));
        } else if let Some(&first) = ids.get(l.id.as_str()) {
            problems.push(
                Problem::at(
                    at.field("id"),
                    format!("link id `{}` is declared twice", l.id),
                    "declared again here",
                )
                .also(
                    path!["machine", "links", first, "id"],
                    "first declared here",
                )
                .hint("link ids must be unique in a machine; rename one"),
            );
        } else {
            ids.insert(&l.id, j);
        }
        let mut end = |k: usize, who: &String| -> Option<usize> {
            match index.get(who.as_str()) {
                Some(&i) => Some(i),
                None => {
                    let mut p = Problem::at(
                        at.field("between").index(k),
                        format!("link `{}` names an unknown node `{who}`", l.id),
                        "no node has this name",
                    );
                    p = match closest(who, all_names.iter().copied()) {
                        Some(near) => p.hint(format!("did you mean `{near}`?")),
                        None => p.hint("declare the node in `nodes: […]` or `switches: […]` first"),
                    };
                    problems.push(p);
                    None
                }
            }
        };
        let a = end(0, &l.between.0);
        let b = end(1, &l.between.1);
        if let (Some(a), Some(b)) = (a, b) {
            if a == b {
                problems.push(
                    Problem::at(
                        at.field("between"),
                        format!("link `{}` joins node `{}` to itself", l.id, all_names[a]),
                        "both ends are the same node",
                    )
                    .hint("a link must join two different nodes"),
                );
                continue;
            }
            let params = LinkParams {
                bandwidth_gbps: l.bandwidth_gbps.unwrap_or(defaults.bandwidth_gbps),
                latency_us: l.latency_us.unwrap_or(defaults.latency_us),
                lanes: l.lanes.unwrap_or(defaults.lanes),
            };
            problems.extend(super::build::check_params(&at, &params));
            edges.push((a, b, l.id.clone(), params));
        }
    }
    edges
}
