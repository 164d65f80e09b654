//! Groups: machines built from equal groups of compute nodes, each joined inside by a fast
//! fabric (one switch, or a link between every two members), the groups joined by a slower
//! network (NICs and switches). Found from the links' speeds and ends, never from names.
//!
//! A link is *fast* when its bandwidth is at least half that of the fastest link at any compute
//! node (where that finds no groups, from a faster bandwidth up, or when it joins two compute
//! nodes: see [`find`]). The groups are the compute nodes of the components of the fast links. A machine has
//! group structure when there are at least two groups, all of the same size (at least two),
//! each group's fabric is a clique of fast links or a switch with a fast link to every member,
//! and the member with local index `i` of every group (its *rail*) reaches the one of the next
//! group through switches only: over slow links where it can, otherwise also through its
//! group's switch (ranks that reach the network only through their host's NIC).

use super::EmbedError;
use crate::ids::IdVec;
use crate::machine::Machine;
use schedule_ir::{LinkId, NodeId, NodeKind};
use std::collections::VecDeque;

/// The fraction of the fastest compute-node link's bandwidth from which a link counts as fast.
const FAST_FRACTION: f64 = 0.5;

/// The most faster bandwidths [`find`] tries after the first rule: each try walks the whole
/// machine, and a file may give every link its own speed. Machines built from groups have a
/// few speeds (fabric, link to the NIC, network, spine).
const MAX_THRESHOLDS: usize = 8;

/// A machine's groups and the routes the hierarchical method uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Groups {
    /// `members[g][i]`: the member with local index `i` of group `g`, groups in order of their
    /// first compute node, members in node order.
    pub members: Vec<Vec<NodeId>>,
    /// `inner[g][i][j]`: the route from member `i` to member `j` of group `g` inside its
    /// fabric (empty for `i == j`).
    pub inner: Vec<Vec<Vec<Vec<LinkId>>>>,
    /// `rail[g][i]`: the route from member `i` of group `g` to member `i` of group `g + 1`
    /// (the next group, cyclically) over the slow network.
    pub rail: Vec<Vec<Vec<LinkId>>>,
    /// Which links are the groups' fabric (fast), by link: the other routes between groups
    /// keep to the slow ones where they can, as the rails do.
    pub fast: Fast,
}

impl Groups {
    /// The number of groups.
    pub fn count(&self) -> usize {
        self.members.len()
    }

    /// The members per group.
    pub fn size(&self) -> usize {
        self.members.first().map_or(0, Vec::len)
    }

    /// One line per group, with user-facing names, for `topoc check`.
    pub fn describe(&self, machine: &Machine) -> Vec<String> {
        self.members
            .iter()
            .enumerate()
            .map(|(g, members)| {
                let names: Vec<&str> = members
                    .iter()
                    .map(|&n| machine.node(n).name.as_str())
                    .collect();
                format!("group {g}: {}", names.join(" "))
            })
            .collect()
    }
}

/// Finds the groups of `machine`, or says which part of the structure is missing.
///
/// Links count as fast from half the fastest compute-node link's bandwidth up
/// ([`FAST_FRACTION`]). Where that finds no groups, each faster bandwidth at a compute node is
/// tried in turn, slowest first (at most [`MAX_THRESHOLDS`]), and the first that finds groups
/// is kept: a host fabric less than twice as fast as its NICs' links (an MI300X host's
/// 512 Gbit/s links beside 400 Gbit/s NICs) would otherwise join every host into one group,
/// and the machine would have no hierarchy. Last, the links that join two compute nodes directly are taken as the fabric,
/// whatever their speed: hosts whose chips are linked to each other and reach other hosts
/// through switches at the same bandwidth (chips with Ethernet ports of one kind for both).
/// Where nothing finds groups, the reason given is the first rule's.
pub fn find(machine: &Machine) -> Result<Groups, EmbedError> {
    let mut thresholds = fast_thresholds(machine).into_iter();
    let first = thresholds.next().unwrap_or(0.0);
    let found = find_with(machine, fast_links(machine, first));
    if found.is_ok() {
        return found;
    }
    thresholds
        .map(|threshold| fast_links(machine, threshold))
        .chain(std::iter::once(direct_links(machine)))
        .map(|fast| find_with(machine, fast))
        .find(Result::is_ok)
        .unwrap_or(found)
}

/// [`find`] with the links `fast` marks as the groups' fabric.
fn find_with(machine: &Machine, fast: Fast) -> Result<Groups, EmbedError> {
    let refuse = |why: String| Err(EmbedError::NotApplicable(why));
    let compute = machine.compute_nodes();
    let members = components(machine, &compute, &fast);
    if members.len() < 2 {
        return refuse("the machine is one group: no slower network joins groups".to_string());
    }
    let k = members[0].len();
    if let Some(other) = members.iter().find(|m| m.len() != k) {
        let count = |n: usize| match n {
            1 => "1 member".to_string(),
            n => format!("{n} members"),
        };
        return refuse(format!(
            "the groups are unequal: the group of {} has {}, that of {} has {}",
            name_of(machine, members[0][0]),
            count(k),
            name_of(machine, other[0]),
            count(other.len())
        ));
    }
    if k < 2 {
        return refuse(
            "every group is a single compute node: there is nothing inside to use".to_string(),
        );
    }
    let inner = members
        .iter()
        .map(|group| fabric_routes(machine, group, &fast))
        .collect::<Result<Vec<_>, _>>()?;
    let g_count = members.len();
    let rail = rail_routes(machine, &members, &fast, |g| (g + 1) % g_count)?;
    Ok(Groups {
        members,
        inner,
        rail,
        fast,
    })
}

/// The most work [`partner_routes`] may spend: its `G · log2 G · k` routes are each a search
/// of the machine, so their number times the machine's nodes and links is kept below this. A
/// machine of 128 eight-GPU hosts on a leaf/spine network costs under a quarter of it; without
/// halving along its rails, only rings (`G - 1` steps each way) were left, and a flat halving
/// and doubling beat the hierarchy.
pub const PARTNER_SEARCH_BUDGET: u64 = 1 << 28;

/// `routes[r][g][i]`: the route of rail `i` from group `g` to its partner in round `r` of a
/// halving and doubling across groups, group `g XOR 2^r`; `None` unless the group count is a
/// power of two from 4 on and the searches fit [`PARTNER_SEARCH_BUDGET`].
pub fn partner_routes(machine: &Machine, groups: &Groups) -> Option<Vec<Vec<Vec<Vec<LinkId>>>>> {
    let g_count = groups.count();
    let searches = (g_count * groups.size()) as u64 * u64::from(g_count.trailing_zeros());
    let work = searches.saturating_mul((machine.node_count() + machine.link_count()) as u64);
    if !g_count.is_power_of_two() || g_count < 4 || work > PARTNER_SEARCH_BUDGET {
        return None;
    }
    let fast = &groups.fast;
    (0..g_count.trailing_zeros())
        .map(|r| rail_routes(machine, &groups.members, fast, |g| g ^ (1 << r)).ok())
        .collect()
}

/// The most groups for which [`exchange_routes`] routes the rails of a direct exchange. Its
/// routes number `G · k · (G - 1)`, a search each, growing with the square of the groups, and
/// each member's `G - 1` sends per half share its NIC; 16 covers the grouped machines measured
/// (up to 16 hosts), and larger ones keep rings and halving along the rails.
pub const MAX_EXCHANGE_GROUPS: usize = 16;

/// `routes[d - 1][g][i]`: the route of rail `i` from group `g` to group `g + d` (cyclically),
/// for every offset `d` from 1 to `G - 1`: the routes of a direct exchange along the rails,
/// every member sending to each other group's member on its rail, for `G` from 3 to
/// [`MAX_EXCHANGE_GROUPS`], and beyond while the searches, `G · k · (G - 1)`, fit
/// [`PARTNER_SEARCH_BUDGET`] for a prime `G`, which has no grid ([`grid_digits`]; on 31
/// eight-GPU hosts, rings along the rails priced at 51% of the bound), and where `rooted` (a
/// broadcast or reduce, whose shards are scattered along the rails from the root's group and
/// exchanged directly: the grid serves an allreduce and its halves only; on 32 eight-GPU hosts
/// a broadcast of 256 MiB passed along the rails' chains priced at 38.9% of the bound, its
/// pipeline filling through 31 hosts, and scattered at 75.7%). The rails of every offset are
/// spread over the network together, since a direct exchange sends them all at once.
pub fn exchange_routes(
    machine: &Machine,
    groups: &Groups,
    rooted: bool,
) -> Option<Vec<Vec<Vec<Vec<LinkId>>>>> {
    let g_count = groups.count();
    let searches = (g_count * groups.size() * g_count.saturating_sub(1)) as u64;
    let work = searches.saturating_mul((machine.node_count() + machine.link_count()) as u64);
    let beyond = g_count > MAX_EXCHANGE_GROUPS && (rooted || grid_digits(g_count).is_none());
    if !((3..=MAX_EXCHANGE_GROUPS).contains(&g_count) || beyond && work <= PARTNER_SEARCH_BUDGET) {
        return None;
    }
    let fast = &groups.fast;
    let mut load: Load = IdVec::filled(0, machine.link_count());
    (1..g_count)
        .map(|d| {
            let to = |g: usize| (g + d) % g_count;
            rail_routes_loaded(machine, &groups.members, fast, to, &mut load).ok()
        })
        .collect()
}

/// `routes[d - 1][g][i]`: rail `i`'s route from group `g` to a group `d` further on, for each
/// offset `d` of one exchange along the rails.
pub type RailRoutes = Vec<Vec<Vec<Vec<LinkId>>>>;

/// The two digits of a grid exchange along the rails among `g` groups, `(radix, stride)` each:
/// the groups as an `a × b` grid, `a` the largest divisor of `g` not above `√g` (at least 2),
/// exchanging first along one side and then along the other. A member sends `a + b - 2`
/// transfers per half instead of a direct exchange's `g - 1`, in two rounds instead of one.
/// `None` for a prime count.
pub fn grid_digits(g: usize) -> Option<[(usize, usize); 2]> {
    let a = (2..=g)
        .take_while(|a| a * a <= g)
        .filter(|a| g % a == 0)
        .last()?;
    Some([(a, 1), (g / a, a)])
}

/// The group `d` further on than group `g` in the digit of weight `stride` and base `radix`
/// (cyclically in that digit, the others kept): the peers of one round of an exchange along
/// the rails.
pub fn peer(g: usize, (radix, stride): (usize, usize), d: usize) -> usize {
    let digit = (g / stride) % radix;
    g - digit * stride + (digit + d) % radix * stride
}

/// `routes[r][d - 1][g][i]`: the routes of a grid exchange along the rails ([`grid_digits`]),
/// round `r`, from group `g` to the group `d` further on in that round's digit; for more than
/// [`MAX_EXCHANGE_GROUPS`] groups (fewer exchange directly), while the searches, `G · k · (a +
/// b - 2)`, fit [`PARTNER_SEARCH_BUDGET`] as [`partner_routes`]'s do. Each round's routes are
/// spread over the network together, since its sends leave at once.
pub fn grid_routes(machine: &Machine, groups: &Groups) -> Option<Vec<RailRoutes>> {
    let g_count = groups.count();
    let digits = grid_digits(g_count).filter(|_| g_count > MAX_EXCHANGE_GROUPS)?;
    let peers: usize = digits.iter().map(|&(radix, _)| radix - 1).sum();
    let searches = (g_count * groups.size() * peers) as u64;
    let work = searches.saturating_mul((machine.node_count() + machine.link_count()) as u64);
    if work > PARTNER_SEARCH_BUDGET {
        return None;
    }
    let fast = &groups.fast;
    digits
        .iter()
        .map(|&(radix, stride)| {
            let mut load: Load = IdVec::filled(0, machine.link_count());
            (1..radix)
                .map(|d| {
                    let to = |g: usize| peer(g, (radix, stride), d);
                    rail_routes_loaded(machine, &groups.members, fast, to, &mut load).ok()
                })
                .collect()
        })
        .collect()
}

/// `routes[g][i]`: a route from member `i` of group `g` to member `i + 1` (cyclically)
/// through switches only, off its group's fabric (the links of the routes inside the groups):
/// the way `hierarchical` moves part of a group's own traffic through its NICs, beside the
/// fabric. A member's link to its NIC may be as fast as the fabric (on an MI300X host both are
/// 512 Gbit/s) and still lead off it. `None` where some member has no such route (its NIC is
/// reached only over the group's fabric, or it has none).
pub fn offload_routes(machine: &Machine, groups: &Groups) -> Option<Vec<Vec<Vec<LinkId>>>> {
    let mut fabric: Fast = IdVec::filled(false, machine.link_count());
    for &l in groups.inner.iter().flatten().flatten().flatten() {
        fabric[l] = true;
    }
    let load: Load = IdVec::filled(0, machine.link_count());
    groups
        .members
        .iter()
        .map(|group| {
            let k = group.len();
            (0..k)
                .map(|i| slow_route(machine, group[i], group[(i + 1) % k], Some(&fabric), &load))
                .collect::<Option<Vec<_>>>()
        })
        .collect()
}

/// The bandwidths from which [`find`] counts a link as fast, in the order it tries them:
/// [`FAST_FRACTION`] of the fastest link at a compute node, then the faster bandwidths of links
/// at compute nodes, slowest first, at most [`MAX_THRESHOLDS`] of them.
fn fast_thresholds(machine: &Machine) -> Vec<f64> {
    let mut at_compute: Vec<f64> = machine
        .compute_nodes()
        .iter()
        .flat_map(|&n| machine.links_at(n))
        .map(|(l, _)| machine.link(l).bandwidth_gbps)
        .collect();
    at_compute.sort_by(f64::total_cmp);
    at_compute.dedup();
    let fastest = at_compute.last().copied().unwrap_or(0.0);
    let first = FAST_FRACTION * fastest;
    std::iter::once(first)
        .chain(
            at_compute
                .into_iter()
                .filter(|&b| b > first)
                .take(MAX_THRESHOLDS),
        )
        .collect()
}

/// Whether each link joins two compute nodes.
fn direct_links(machine: &Machine) -> Fast {
    IdVec::from_fn(machine.link_count(), |l| {
        let (a, b) = machine.endpoints(l);
        machine.node(a).kind == NodeKind::Compute && machine.node(b).kind == NodeKind::Compute
    })
}

/// Whether each link is fast: of at least `threshold` Gbit/s.
fn fast_links(machine: &Machine, threshold: f64) -> Fast {
    IdVec::from_fn(machine.link_count(), |l| {
        machine.link(l).bandwidth_gbps >= threshold
    })
}

/// `routes[g][i]`: the route of rail `i` from group `g` to group `to(g)` over the network.
/// Rails routed so far count on each link: where several shortest routes cross the network
/// (leaves under several spines), each rail takes the least loaded, so that the rails spread
/// over the spines instead of all crossing the first.
fn rail_routes(
    machine: &Machine,
    members: &[Vec<NodeId>],
    fast: &Fast,
    to: impl Fn(usize) -> usize,
) -> Result<Vec<Vec<Vec<LinkId>>>, EmbedError> {
    let mut load: Load = IdVec::filled(0, machine.link_count());
    rail_routes_loaded(machine, members, fast, to, &mut load)
}

/// [`rail_routes`], counting on each link the rails `load` already has there as well.
fn rail_routes_loaded(
    machine: &Machine,
    members: &[Vec<NodeId>],
    fast: &Fast,
    to: impl Fn(usize) -> usize,
    load: &mut Load,
) -> Result<Vec<Vec<Vec<LinkId>>>, EmbedError> {
    let mut rail = Vec::with_capacity(members.len());
    for (g, group) in members.iter().enumerate() {
        let mut routes = Vec::with_capacity(group.len());
        for (&a, &b) in group.iter().zip(&members[to(g)]) {
            let route = slow_route(machine, a, b, Some(fast), load)
                .or_else(|| slow_route(machine, a, b, None, load))
                .ok_or_else(|| {
                    EmbedError::NotApplicable(format!(
                        "no route from {} to {} over the network between groups",
                        name_of(machine, a),
                        name_of(machine, b)
                    ))
                })?;
            for &l in &route {
                load[l] += 1;
            }
            routes.push(route);
        }
        rail.push(routes);
    }
    Ok(rail)
}

/// Whether each link is fast, by link.
type Fast = IdVec<LinkId, bool>;

/// How many rail routes cross each link, by link.
type Load = IdVec<LinkId, u32>;

fn name_of(machine: &Machine, n: NodeId) -> &str {
    machine.node(n).name.as_str()
}

/// The compute nodes of each component of the fast links, in order of first node.
fn components(machine: &Machine, compute: &[NodeId], fast: &Fast) -> Vec<Vec<NodeId>> {
    // Nodes and links come from the machine: in range of its tables.
    let mut seen: IdVec<NodeId, bool> = IdVec::filled(false, machine.node_count());
    let mut groups = Vec::new();
    for &start in compute {
        if seen[start] {
            continue;
        }
        seen[start] = true;
        let mut queue = VecDeque::from([start]);
        let mut group = Vec::new();
        while let Some(v) = queue.pop_front() {
            if machine.node(v).kind == NodeKind::Compute {
                group.push(v);
            }
            for (l, w) in machine.links_at(v) {
                if fast[l] && !seen[w] {
                    seen[w] = true;
                    queue.push_back(w);
                }
            }
        }
        group.sort();
        groups.push(group);
    }
    groups
}

/// The fast link joining `a` and `b`, lowest id first.
fn fast_link(machine: &Machine, a: NodeId, b: NodeId, fast: &Fast) -> Option<LinkId> {
    machine
        .links_at(a)
        .into_iter()
        .find(|&(l, w)| w == b && fast[l])
        .map(|(l, _)| l)
}

/// Routes between every two members of `group`: direct links when the group is a clique,
/// otherwise through one switch with a fast link to every member.
fn fabric_routes(
    machine: &Machine,
    group: &[NodeId],
    fast: &Fast,
) -> Result<Vec<Vec<Vec<LinkId>>>, EmbedError> {
    let k = group.len();
    let mut direct = vec![vec![Vec::new(); k]; k];
    let mut clique = true;
    for (i, &a) in group.iter().enumerate() {
        for (j, &b) in group.iter().enumerate() {
            if i != j {
                match fast_link(machine, a, b, fast) {
                    Some(l) => direct[i][j] = vec![l],
                    None => clique = false,
                }
            }
        }
    }
    if clique {
        return Ok(direct);
    }
    let hub = machine
        .links_at(group[0])
        .into_iter()
        .filter(|&(l, s)| fast[l] && machine.node(s).kind != NodeKind::Compute)
        .map(|(_, s)| s)
        .find(|&s| {
            group
                .iter()
                .all(|&n| fast_link(machine, n, s, fast).is_some())
        });
    let Some(hub) = hub else {
        return Err(EmbedError::NotApplicable(format!(
            "the group of {} is neither fully connected nor joined by one switch",
            name_of(machine, group[0])
        )));
    };
    let up: Vec<LinkId> = group
        .iter()
        .filter_map(|&n| fast_link(machine, n, hub, fast))
        .collect();
    Ok((0..k)
        .map(|i| {
            (0..k)
                .map(|j| {
                    if i == j {
                        Vec::new()
                    } else {
                        vec![up[i], up[j]]
                    }
                })
                .collect()
        })
        .collect())
}

/// The shortest route from `a` to `b` whose inner nodes are all switches, off the links
/// `fast` marks when it is given (the fast links, or a group's fabric; breadth-first, links
/// tried in id order, so the route is the same every run). Without `fast`, any link may be
/// taken: where a member reaches the network only
/// through its group's switch (a host's ranks behind its NIC), the route leaves and enters
/// the groups over their fast links; it still crosses the slow network between them, since
/// the groups are the components of the fast links. Among shortest routes, walking back from
/// `b`, each hop takes the link with the fewest routes already on it per unit of bandwidth
/// (`load`), the breadth-first search's own link on a tie.
fn slow_route(
    machine: &Machine,
    a: NodeId,
    b: NodeId,
    fast: Option<&Fast>,
    load: &Load,
) -> Option<Vec<LinkId>> {
    let allowed = |l: LinkId| fast.is_none_or(|fast| !fast[l]);
    // A node is passed through when it is the start or not a compute node.
    let through = |v: NodeId| v == a || machine.node(v).kind != NodeKind::Compute;
    let mut came: IdVec<NodeId, Option<(LinkId, NodeId)>> =
        IdVec::filled(None, machine.node_count());
    let mut dist: IdVec<NodeId, Option<usize>> = IdVec::filled(None, machine.node_count());
    *dist.get_mut(a)? = Some(0);
    let mut queue = VecDeque::from([a]);
    while let Some(v) = queue.pop_front() {
        if v == b {
            break;
        }
        if !through(v) {
            continue;
        }
        let d = dist[v].unwrap_or(0);
        for (l, w) in machine.links_at(v) {
            if allowed(l) && dist[w].is_none() {
                dist[w] = Some(d + 1);
                came[w] = Some((l, v));
                queue.push_back(w);
            }
        }
    }
    dist[b]?;
    let weight = |l: LinkId| f64::from(load[l] + 1) / machine.link(l).bandwidth_gbps;
    let mut route = Vec::new();
    let mut at = b;
    while let Some((own, prev)) = came[at] {
        let before = dist[at].map(|d| d.saturating_sub(1));
        let lightest = machine
            .links_at(at)
            .into_iter()
            .filter(|&(l, u)| allowed(l) && through(u) && dist[u] == before)
            .fold(None, |best: Option<(LinkId, NodeId)>, (l, u)| match best {
                Some((k, _)) if weight(k) <= weight(l) => best,
                _ => Some((l, u)),
            });
        let hop = match lightest {
            Some((l, _)) if weight(l) < weight(own) => lightest,
            _ => Some((own, prev)),
        };
        let (l, u) = hop?;
        route.push(l);
        at = u;
    }
    route.reverse();
    Some(route)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine whose every link has its own speed is tried at no more than
    /// [`MAX_THRESHOLDS`] faster bandwidths: each try walks the whole machine, and a ring of
    /// 20 000 such links took `topoc check` 13.6 s instead of 1.3 s without the cap.
    #[test]
    fn a_machine_of_many_speeds_is_tried_at_a_few() {
        let n = 40;
        let nodes: Vec<String> = (0..n).map(|i| format!("\"n{i}\"")).collect();
        let links: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "(id: \"l{i}\", between: (\"n{i}\", \"n{}\"), bandwidth_gbps: {}.0)",
                    (i + 1) % n,
                    100 + i
                )
            })
            .collect();
        let machine = crate::lower::testing::machine(&format!(
            "Topology(name: \"speeds\", machine: Graph(nodes: [{}], \
             link: (bandwidth_gbps: 100.0), links: [{}]))",
            nodes.join(", "),
            links.join(", ")
        ));
        let thresholds = fast_thresholds(&machine);
        assert_eq!(thresholds.len(), 1 + MAX_THRESHOLDS);
        // Half the fastest first, then the slowest speeds above it, in order.
        assert_eq!(thresholds[0], 0.5 * 139.0);
        assert_eq!(
            thresholds[1..],
            [100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0]
        );
        assert_eq!(
            find(&machine).map(|_| ()),
            Err(EmbedError::NotApplicable(
                "the machine is one group: no slower network joins groups".to_string()
            ))
        );
    }
}
