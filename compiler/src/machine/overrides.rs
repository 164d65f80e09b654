//! `link_overrides`: per-link parameters on any machine kind, so that every machine can have
//! heterogeneous links (a slow cable in a torus, a fat uplink in a full mesh).
//!
//! `link_overrides: [(links: ["L02", "L13"], bandwidth_gbps: 50.0, latency_us: 2.0, lanes: 2)]`
//! replaces the given fields for the named links and keeps the others. Ids are the kind's own
//! (see each kind's naming); an id that does not exist, or a link named by two overrides, is a
//! diagnostic pointing at it.

use super::build::check_params;
use super::Machine;
use crate::diag::{closest, Problem};
use crate::path;
use crate::topology::ast::{LinkParams, LinkSetting};
use petgraph::graph::EdgeIndex;
use schedule_ir::LinkId;
use std::collections::BTreeMap;

/// Applies `settings` to `machine`'s links, or reports every problem with them.
pub fn apply(mut machine: Machine, settings: &[LinkSetting]) -> Result<Machine, Vec<Problem>> {
    if settings.is_empty() {
        return Ok(machine);
    }
    let ids: BTreeMap<String, LinkId> = (0..machine.link_count())
        .map(|j| (machine.link(LinkId::new(j)).name.clone(), LinkId::new(j)))
        .collect();
    let mut problems = Vec::new();
    let mut seen: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut changes: Vec<(LinkId, usize)> = Vec::new();
    for (i, setting) in settings.iter().enumerate() {
        let at = path!["machine", "link_overrides", i];
        // Only the fields given can be wrong: check them over valid defaults.
        problems.extend(check_params(
            &at,
            &setting.change().over(LinkParams::default()),
        ));
        if setting.links.is_empty() {
            problems.push(
                Problem::at(
                    at.field("links"),
                    "this override names no link",
                    "empty list",
                )
                .hint("list the link ids it applies to, e.g. `links: [\"L02\"]`"),
            );
        }
        for (k, name) in setting.links.iter().enumerate() {
            let here = at.field("links").index(k);
            if let Some(&(fi, fk)) = seen.get(name.as_str()) {
                problems.push(
                    Problem::at(
                        here,
                        format!("link `{name}` is overridden twice"),
                        "named again here",
                    )
                    .also(
                        path!["machine", "link_overrides", fi, "links", fk],
                        "first named here",
                    )
                    .hint("name each link in one override"),
                );
                continue;
            }
            seen.insert(name, (i, k));
            match ids.get(name) {
                Some(&l) => changes.push((l, i)),
                None => {
                    let p = Problem::at(
                        here,
                        format!("link `{name}` in `link_overrides` is not a link of this machine"),
                        "no link has this id",
                    );
                    problems.push(match closest(name, ids.keys().map(String::as_str)) {
                        Some(near) => p.hint(format!("did you mean `{near}`?")),
                        None => p.hint("see docs/topology.md for each kind's link ids"),
                    });
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    for (l, i) in changes {
        let info = &mut machine.graph[EdgeIndex::new(l.index())];
        let now = LinkParams {
            bandwidth_gbps: info.bandwidth_gbps,
            latency_us: info.latency_us,
            lanes: info.lanes,
        };
        let new = settings[i].change().over(now);
        info.bandwidth_gbps = new.bandwidth_gbps;
        info.latency_us = new.latency_us;
        info.lanes = new.lanes;
    }
    Ok(machine)
}
