//! Tests of the search's bounds: what lets it skip a shape, and `auto` a whole method.
#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::lower::testing::{machine, spec};
use schedule_ir::DType;

/// Machines whose links differ in count (corners, parallel links), speed and latency.
fn machines() -> Vec<Machine> {
    [
        r#"Topology(name: "t", machine: Torus(dims: [4, 4]))"#,
        r#"Topology(name: "m", machine: Mesh(dims: [3, 5], link: (bandwidth_gbps: 50.0, latency_us: 0.2)))"#,
        r#"Topology(name: "l", machine: Ladder(pairs: 4))"#,
        r#"Topology(name: "g", machine: Graph(nodes: ["a", "b", "c", "d"], links: [
            (id: "ab", between: ("a", "b"), bandwidth_gbps: 400.0, latency_us: 0.3),
            (id: "bc", between: ("b", "c"), bandwidth_gbps: 100.0),
            (id: "cd", between: ("c", "d"), bandwidth_gbps: 100.0, latency_us: 2.0),
            (id: "da", between: ("d", "a"), bandwidth_gbps: 200.0),
            (id: "ac", between: ("a", "c"), bandwidth_gbps: 50.0)]))"#,
    ]
    .iter()
    .map(|text| machine(text))
    .collect()
}

/// Every shape the search may try prices its all-gather at no less than [`least_price`]: the
/// bound that lets the search skip a shape without changing what it keeps.
#[test]
fn no_synthesis_is_priced_below_its_least_price() {
    for m in machines() {
        let links = Links::of(&m).unwrap();
        let p = links.nodes.len();
        for elements in [256, 1 << 16, 1 << 24] {
            let spec = spec(Collective::AllGather, DType::F32, elements);
            for (per_node, grains) in shapes(p, elements, spec.collective) {
                for tier in links.tiers() {
                    let diameter = links.diameter(tier).unwrap();
                    for &grain in &grains {
                        let (dirs, index) = links.at(tier, grain);
                        let least = least_price(&links, (&dirs, &index, diameter), &spec, per_node);
                        for pick in [Pick::Rarest, Pick::Any] {
                            let chunks = per_node * p;
                            let gather =
                                synth::gather(p, chunks, |c| c / per_node, &dirs, pick, 5, 1 << 20)
                                    .unwrap();
                            let priced = price(&links, &index, &gather, &spec, chunks);
                            assert!(
                                least <= priced,
                                "{}: {per_node} per node, grain {grain}, {tier:?}: \
                                 least {least} above the price {priced}",
                                m.name
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Skipping the shapes that cannot beat the best so far keeps the search's pick: the same
/// shape and price as a search that synthesises every shape within the same budget.
#[test]
fn skipping_shapes_keeps_the_pick() {
    for m in machines() {
        let links = Links::of(&m).unwrap();
        for collective in [Collective::AllGather, Collective::ReduceScatter] {
            for elements in [1 << 10, 1 << 18, 1 << 26] {
                let spec = spec(collective, DType::F32, elements);
                let kept = search(&links, &spec, &Scope::ALL).unwrap().kept;
                let every = search_every(&links, &spec);
                let (a, b) = (&kept[0], &every);
                assert_eq!(
                    (a.per_node, a.grain, a.pick, a.seconds, &a.gather),
                    (b.per_node, b.grain, b.pick, b.seconds, &b.gather),
                    "{} {collective} at {elements}",
                    m.name
                );
            }
        }
    }
}

/// Running syntheses ahead of their turn on a second core changes nothing the search keeps or
/// rules out, whatever its scope: every synthesis run ahead (from the first reception) against
/// none.
#[test]
fn running_ahead_keeps_what_the_search_keeps() {
    for m in machines() {
        let links = Links::of(&m).unwrap();
        for collective in [Collective::AllGather, Collective::AllReduce] {
            for elements in [1 << 10, 1 << 26] {
                let spec = spec(collective, DType::F32, elements);
                let out = |least: f64| least > 2e-5;
                let scopes = [
                    Scope::ALL,
                    Scope {
                        until_plateau: true,
                        ..Scope::ALL
                    },
                    Scope {
                        out: &out,
                        ..Scope::ALL
                    },
                ];
                for scope in scopes {
                    let found = |ahead_from| {
                        let found = search(
                            &links,
                            &spec,
                            &Scope {
                                ahead_from,
                                ..scope
                            },
                        );
                        found.map(|f| {
                            let kept = f
                                .kept
                                .into_iter()
                                .map(|b| (b.per_node, b.grain, b.pick, b.seconds, b.gather));
                            (kept.collect::<Vec<_>>(), f.outpriced.to_bits())
                        })
                    };
                    let (ahead, one_at_a_time) = (found(0), found(u64::MAX));
                    assert!(ahead.is_ok(), "{}: {collective} found nothing", m.name);
                    assert_eq!(ahead.ok(), one_at_a_time.ok(), "{} {collective}", m.name);
                }
            }
        }
    }
}

/// The search without skipping: every shape within the budget synthesised, in the search's
/// order (every grain under one rule, then the next rule), the cheapest kept (of equal prices,
/// the first tried). The machines above are small enough that the budget never runs out, so
/// the shapes skipped without charge leave nothing more for the search to try.
fn search_every(links: &Links, spec: &PhaseSpec) -> Best {
    let p = links.nodes.len();
    let mut spent = 0u64;
    let mut best: Option<Best> = None;
    for (per_node, grains) in shapes(p, spec.elements, spec.collective) {
        let chunks = per_node * p;
        let receptions = chunks as u64 * p.saturating_sub(1) as u64;
        for tier in links.tiers() {
            for pick in RULES {
                for &grain in &grains {
                    let (dirs, index) = links.at(tier, grain);
                    if best.is_some() && spent.saturating_add(receptions) > SEARCH_RECEPTIONS {
                        continue;
                    }
                    spent = spent.saturating_add(receptions);
                    let max_steps = usize::try_from(receptions).unwrap_or(usize::MAX).max(1);
                    let Some(gather) =
                        synth::gather(p, chunks, |c| c / per_node, &dirs, pick, SEED, max_steps)
                    else {
                        continue;
                    };
                    let seconds = price(links, &index, &gather, spec, chunks);
                    if best.as_ref().is_none_or(|b| seconds < b.seconds) {
                        best = Some(Best {
                            gather,
                            dirs: index.clone(),
                            capacity: dirs.iter().map(|d| d.capacity).collect(),
                            per_node,
                            grain,
                            tier,
                            pick,
                            seconds,
                        });
                    }
                }
            }
        }
    }
    best.unwrap()
}

/// Every overlapped allreduce the search may place is priced at no less than its
/// [`least_price_load`], and skipping the depths it rules out keeps the depth and price that
/// placing every depth gives: the bound that lets `matching` skip a pipeline depth.
#[test]
fn no_overlapped_allreduce_is_priced_below_its_bound() {
    for m in machines() {
        let links = Links::of(&m).unwrap();
        let p = links.nodes.len();
        let link_count = links.dirs.iter().map(|d| d.link.index() + 1).max().unwrap();
        for elements in [1 << 10, 1 << 18, 1 << 26] {
            let spec = spec(Collective::AllReduce, DType::F32, elements);
            let shapes = search(&links, &spec, &Scope::ALL).unwrap().kept;
            for (shape, trees) in shapes
                .iter()
                .flat_map(|s| [(s, Trees::Synthesised), (s, Trees::Balanced)])
            {
                let k = shape.per_node;
                let list = receptions(&links, shape, trees);
                let mut every: Option<(usize, f64)> = None;
                for pieces in PIECES {
                    let chunks = k * p * pieces;
                    if chunks as u64 > elements || (list.len() * pieces) as u64 > MAX_RECEPTIONS {
                        break;
                    }
                    let demand = overlap::demand(&list, pieces, link_count);
                    let least = least_price_load(&links, &spec, chunks, &demand);
                    let mut placed = 0;
                    let load = overlap::place(
                        p,
                        k * p,
                        |c| c / k,
                        &list,
                        pieces,
                        link_count,
                        |_| {
                            placed += 1;
                        },
                    );
                    assert_eq!(placed, 2 * list.len() * pieces);
                    let priced = price_load(&links, &spec, chunks, &load);
                    assert!(
                        least <= priced && least > 0.0,
                        "{}: {k} per node, {pieces} pieces: bound {least} above {priced}",
                        m.name
                    );
                    // And at no less than its shape's least price, rounded: the bound that
                    // lets the search skip a shape that cannot beat the halves in turn.
                    let (dirs, index) = links.at(shape.tier, shape.grain);
                    let diameter = links.diameter(shape.tier).unwrap();
                    let shape_least = Rounding::of(p, &spec).least_estimate(least_price(
                        &links,
                        (&dirs, &index, diameter),
                        &spec,
                        k,
                    ));
                    assert!(
                        shape_least <= priced,
                        "{}: {k} per node, {pieces} pieces: shape bound {shape_least} above \
                         {priced}",
                        m.name
                    );
                    if every.is_none_or(|(_, s)| priced < s) {
                        every = Some((pieces, priced));
                    }
                }
                let mut budget = u64::MAX;
                let skipping = overlapped(&links, &spec, shape, &list, f64::INFINITY, &mut budget);
                assert_eq!(
                    skipping, every,
                    "{} {k} per node at {elements}, {trees:?}",
                    m.name
                );
            }
        }
    }
}

/// The overlap's shapes that the search skips against the halves in turn could not have won:
/// each, synthesised all the same, is priced above the cheapest half, and its overlapped
/// allreduce at every pipeline depth no lower than the halves in turn.
#[test]
fn shapes_skipped_against_the_halves_in_turn_could_not_win() {
    let mut skipped = 0;
    for m in machines() {
        let links = Links::of(&m).unwrap();
        for elements in [1 << 10, 1 << 18, 1 << 26] {
            let spec = spec(Collective::AllReduce, DType::F32, elements);
            let halves = halves_in_turn(&links, &spec).unwrap();
            let in_turn = 2.0 * halves.kept[0].seconds;
            let scope = Scope {
                beat: in_turn,
                ..Scope::ALL
            };
            let kept: Vec<_> = search(&links, &spec, &scope)
                .map(|found| found.kept.iter().map(|b| b.per_node).collect())
                .unwrap_or_default();
            for shape in search(&links, &spec, &Scope::ALL).unwrap().kept {
                if kept.contains(&shape.per_node) {
                    continue;
                }
                skipped += 1;
                let what = format!("{} at {elements}, {} per node", m.name, shape.per_node);
                assert!(shape.seconds >= in_turn / 2.0, "{what}: a cheaper half");
                for trees in [Trees::Synthesised, Trees::Balanced] {
                    let list = receptions(&links, &shape, trees);
                    let mut budget = u64::MAX;
                    let overlap = overlapped(&links, &spec, &shape, &list, in_turn, &mut budget);
                    assert_eq!(overlap, None, "{what}, {trees:?}: beats the halves in turn");
                }
            }
        }
    }
    // Somewhere a shape was skipped.
    assert!(skipped > 0);
}

/// What `auto` sees of `matching` when it already holds a schedule priced `best`: the schedule
/// lowering gives, to the byte, or, only where that schedule's estimate is ruled out, a price
/// that `best` rules out and that is no more than the estimate. For every collective `matching`
/// lowers, thresholds on both sides of its estimate and on it.
#[test]
fn ruling_out_keeps_every_schedule_that_could_win() {
    use crate::lower::{Knobs, Method, Unless};
    let mut declined = 0;
    for m in machines() {
        let ir = m.to_ir();
        for collective in [
            Collective::AllGather,
            Collective::ReduceScatter,
            Collective::AllReduce,
        ] {
            for elements in [1 << 10, 1 << 18, 1 << 24] {
                let spec = spec(collective, DType::F32, elements);
                let knobs = Knobs::default();
                let lowered = Method::Matching.lower(&m, &spec, &knobs).unwrap();
                let estimate = schedule_ir::cost::estimate(&ir, &lowered.phase).seconds;
                for factor in [0.5, 0.9, 0.999, 1.0, 1.001, 1.1, 2.0] {
                    let best = estimate * factor;
                    let out = |x: f64| x >= best;
                    let what = format!(
                        "{} {collective} at {elements}, best {factor} × estimate",
                        m.name
                    );
                    match Method::Matching
                        .lower_unless(&m, &spec, &knobs, &out)
                        .unwrap()
                    {
                        Unless::Lowered(again) => assert_eq!(again.phase, lowered.phase, "{what}"),
                        Unless::Outpriced(least) => {
                            declined += 1;
                            assert!(out(estimate), "{what}: declined a schedule that wins");
                            assert!(
                                out(least) && least <= estimate,
                                "{what}: {least} > {estimate}"
                            );
                        }
                    }
                }
            }
        }
    }
    // Somewhere every shape was ruled out.
    assert!(declined > 0);
}

/// The balanced trees are shortest-path trees from every chunk's owner, each node receiving
/// each chunk it lacks once from a neighbour one hop nearer the owner, listed before it passes
/// the chunk on; and on a mesh, where the first neighbour nearer the owner would pile the
/// trees on some links, their busiest link carries within a tenth of the average.
#[test]
fn balanced_trees_are_shortest_and_spread_over_the_links() {
    let m = machine(
        r#"Topology(name: "m", machine: Mesh(dims: [6, 6], link: (bandwidth_gbps: 100.0, latency_us: 0.5)))"#,
    );
    let links = Links::of(&m).unwrap();
    let p = links.nodes.len();
    let dirs = || {
        links
            .dirs
            .iter()
            .map(|d| (d.from, d.to, d.link, 1, d.bandwidth_gbps))
    };
    // Hops between compute nodes, by breadth-first search from each.
    let hops = |from: usize| {
        let mut seen = vec![usize::MAX; p];
        seen[from] = 0;
        let mut queue = std::collections::VecDeque::from([from]);
        while let Some(u) = queue.pop_front() {
            for d in links.dirs.iter().filter(|d| d.from == u) {
                if seen[d.to] == usize::MAX {
                    seen[d.to] = seen[u] + 1;
                    queue.push_back(d.to);
                }
            }
        }
        seen
    };
    for per_node in [1, 3] {
        let list = overlap::balanced(p, per_node, dirs());
        assert_eq!(list.len(), per_node * p * (p - 1));
        let mut got = vec![false; p * per_node * p];
        let mut carried = vec![0u32; links.count()];
        for r in &list {
            let (from, to, c) = (r.from as usize, r.to as usize, r.chunk as usize);
            let owner = hops(c / per_node);
            assert_eq!(
                owner[from] + 1,
                owner[to],
                "chunk {c}: {from} → {to} is not nearer"
            );
            assert!(
                from == c / per_node || got[from * per_node * p + c],
                "sent before held"
            );
            assert!(
                !std::mem::replace(&mut got[to * per_node * p + c], true),
                "twice"
            );
            carried[r.link.index()] += 1;
        }
        let used: Vec<u32> = carried.into_iter().filter(|&n| n > 0).collect();
        let average = f64::from(used.iter().sum::<u32>()) / used.len() as f64;
        let busiest = f64::from(*used.iter().max().unwrap());
        assert!(busiest <= 1.1 * average, "{busiest} against {average}");
    }
}
