//! `Tree(root: …)`: a tree of switches and processors, any shape and depth.
//!
//! Inner nodes are switches (they forward, computing nothing); processors are compute nodes
//! and always leaves. Every node is named by the user; nodes are numbered in depth-first
//! preorder of the declaration (the root is node 0, then its first child's subtree, …). The
//! link between a node and its parent is named `parent-child` (`root-s0`, `s0-p1`), has the
//! tree's `link:` parameters with the child's `up:` fields over them, and links are laid out
//! in the same preorder (the link of node `i` is link `i - 1`).
//!
//! A tree declared by nesting cannot contain a cycle; what it can contain is a node listed
//! twice (which would give it two parents), a processor with children, or a switch with none —
//! each is refused, pointing at the node.

use super::build::{check_params, MAX_NODES};
use super::{LinkInfo, Machine, NodeInfo, Shape};
use crate::diag::Problem;
use crate::path;
use crate::topology::ast::{LinkParams, TreeNode};
use crate::topology::spans::Path;
use schedule_ir::NodeKind;
use std::collections::BTreeMap;

/// Builds a tree, reporting every problem in its declaration.
pub fn tree(name: &str, root: &TreeNode, link: LinkParams) -> Result<Machine, Vec<Problem>> {
    let mut walk = Walk {
        link,
        nodes: Vec::new(),
        links: Vec::new(),
        seen: BTreeMap::new(),
        problems: check_params(&path!["machine", "link"], &link),
        too_big: false,
    };
    let at = path!["machine", "root"];
    if let TreeNode::Switch { up: Some(_), .. } | TreeNode::Processor { up: Some(_), .. } = root {
        walk.problems.push(
            Problem::at(
                at.field("up"),
                format!(
                    "the root `{}` has no parent, so `up` does not apply",
                    root.name()
                ),
                "no parent link",
            )
            .hint("give the tree's default link parameters in `link:` instead"),
        );
    }
    walk.visit(root, None, &at);
    if walk.too_big {
        return Err(vec![Problem::at(
            path!["machine", "root"],
            format!("the tree has more than {MAX_NODES} nodes, more than the compiler supports"),
            "too large",
        )]);
    }
    if !walk.problems.is_empty() {
        return Err(walk.problems);
    }
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    let mut clashes = Vec::new();
    for (j, (_, _, info, at)) in walk.links.iter().enumerate() {
        if let Some(&first) = ids.get(info.name.as_str()) {
            clashes.push(
                Problem::at(
                    at.field("name"),
                    format!("two tree links would both be named `{}`", info.name),
                    "this node's link",
                )
                .also(walk.links[first].3.field("name"), "and this node's")
                .hint("links are named `parent-child`; a `-` in node names can make two such names equal, so rename one node"),
            );
        } else {
            ids.insert(&info.name, j);
        }
    }
    if !clashes.is_empty() {
        return Err(clashes);
    }
    let links = walk
        .links
        .into_iter()
        .map(|(a, b, info, _)| (a, b, info))
        .collect();
    Ok(Machine::from_parts(name, walk.nodes, links, Shape::Tree))
}

struct Walk {
    link: LinkParams,
    nodes: Vec<NodeInfo>,
    /// (parent, child, link, the child's path).
    links: Vec<(usize, usize, LinkInfo, Path)>,
    /// Names seen so far, with where.
    seen: BTreeMap<String, Path>,
    problems: Vec<Problem>,
    too_big: bool,
}

impl Walk {
    fn visit(&mut self, node: &TreeNode, parent: Option<usize>, at: &Path) {
        if self.nodes.len() as u64 >= MAX_NODES {
            self.too_big = true;
            return;
        }
        let (name, up, children, kind) = match node {
            TreeNode::Switch { name, up, children } => (name, up, children, NodeKind::Switch),
            TreeNode::Processor { name, up, children } => (name, up, children, NodeKind::Compute),
        };
        if name.trim().is_empty() {
            self.problems.push(Problem::at(
                at.field("name"),
                "a tree node's name is empty",
                "give the node a name",
            ));
        } else if let Some(first) = self.seen.get(name) {
            self.problems.push(
                Problem::at(
                    at.field("name"),
                    format!("node `{name}` appears twice in the tree"),
                    "listed again here",
                )
                .also(first.field("name"), "first listed here")
                .hint("a tree node has one parent; a node under two parents would close a cycle. Rename one of them"),
            );
        } else {
            self.seen.insert(name.clone(), at.clone());
        }
        match (kind, children.is_empty()) {
            (NodeKind::Compute, false) => self.problems.push(
                Problem::at(
                    at.field("children"),
                    format!("processor `{name}` has children"),
                    "processors are leaves",
                )
                .hint(format!(
                    "only switches forward; make `{name}` a `Switch`, or move its children under one"
                )),
            ),
            (NodeKind::Switch, true) => self.problems.push(
                Problem::at(
                    at.clone(),
                    format!("switch `{name}` has no children"),
                    "a switch with nothing below it",
                )
                .hint("a switch forwards between its children and its parent; give it children or remove it"),
            ),
            _ => {}
        }
        let id = self.nodes.len();
        self.nodes.push(NodeInfo {
            name: name.clone(),
            kind,
        });
        if let Some(p) = parent {
            let params = up.map_or(self.link, |u| u.over(self.link));
            if let Some(u) = up {
                // Check the fields given here (over valid defaults, so only they can fail).
                let own = u.over(LinkParams::default());
                self.problems.extend(check_params(&at.field("up"), &own));
            }
            let link_name = format!("{}-{}", self.nodes[p].name, name);
            self.links
                .push((p, id, LinkInfo::new(link_name, &params), at.clone()));
        }
        for (i, child) in children.iter().enumerate() {
            self.visit(child, Some(id), &at.field("children").index(i));
            if self.too_big {
                return;
            }
        }
    }
}
