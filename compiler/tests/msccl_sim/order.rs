//! The happens-before order of an algorithm file, and the cycle that makes it hang.
//!
//! A step comes after the step before it in its thread block, after the step its `depid`/`deps`
//! names, and — if it receives — after the send it receives: the k-th send on a FIFO (sender,
//! receiver, channel) meets the k-th receive. If these edges close a cycle, no interleaving can
//! run the file to its end, however large the runtime's buffers are.

use super::read::{kind, Algo};
use std::collections::HashMap;

/// A step: (gpu index, thread-block index, step index).
type At = (usize, usize, usize);

/// The first dependency cycle found, in words; `None` when the order is acyclic.
pub fn cycle(algo: &Algo) -> Option<String> {
    let mut index: HashMap<At, usize> = HashMap::new();
    let mut nodes: Vec<At> = Vec::new();
    for (g, gpu) in algo.gpus.iter().enumerate() {
        for (t, tb) in gpu.tbs.iter().enumerate() {
            for s in 0..tb.steps.len() {
                index.insert((g, t, s), nodes.len());
                nodes.push((g, t, s));
            }
        }
    }
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut sends: HashMap<(i64, i64, i64), Vec<usize>> = HashMap::new();
    let mut receives: HashMap<(i64, i64, i64), Vec<usize>> = HashMap::new();
    for (g, gpu) in algo.gpus.iter().enumerate() {
        for (t, tb) in gpu.tbs.iter().enumerate() {
            for (s, st) in tb.steps.iter().enumerate() {
                let me = index[&(g, t, s)];
                if s > 0 {
                    after[index[&(g, t, s - 1)]].push(me);
                }
                if st.depid >= 0 && st.deps >= 0 {
                    if let Some(&d) = index.get(&(g, st.depid as usize, st.deps as usize)) {
                        after[d].push(me);
                    }
                }
                let Some(k) = kind(&st.ty) else { continue };
                if k.sends {
                    sends
                        .entry((gpu.id, tb.send, tb.chan))
                        .or_default()
                        .push(me);
                }
                if k.receives {
                    receives
                        .entry((tb.recv, gpu.id, tb.chan))
                        .or_default()
                        .push(me);
                }
            }
        }
    }
    for (key, list) in &receives {
        for (k, &r) in list.iter().enumerate() {
            if let Some(&s) = sends.get(key).and_then(|l| l.get(k)) {
                after[s].push(r);
            }
        }
    }
    // Depth-first search with colours; a grey successor closes a cycle.
    let mut colour = vec![0u8; nodes.len()];
    let mut parent = vec![usize::MAX; nodes.len()];
    for root in 0..nodes.len() {
        if colour[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        colour[root] = 1;
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if let Some(&w) = after[v].get(*next) {
                *next += 1;
                match colour[w] {
                    0 => {
                        colour[w] = 1;
                        parent[w] = v;
                        stack.push((w, 0));
                    }
                    1 => {
                        let mut path = vec![w];
                        let mut x = v;
                        while x != w {
                            path.push(x);
                            x = parent[x];
                        }
                        path.push(w);
                        path.reverse();
                        let words: Vec<String> = path
                            .iter()
                            .map(|&i| {
                                let (g, t, s) = nodes[i];
                                format!("gpu {g} tb {t} step {s}")
                            })
                            .collect();
                        return Some(format!("dependency cycle: {}", words.join(" → ")));
                    }
                    _ => {}
                }
            } else {
                colour[v] = 2;
                stack.pop();
            }
        }
    }
    None
}
