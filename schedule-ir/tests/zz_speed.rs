mod common;
#[test]
fn speed() {
    let t = std::time::Instant::now();
    let s = common::bidir_ring_allreduce(256, 2, 1 << 20);
    let built = t.elapsed();
    let instrs: usize = s.phases[0].programs.iter().map(|p| p.steps.iter().map(Vec::len).sum::<usize>()).sum();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let s2 = s.clone();
        let t = std::time::Instant::now();
        let v = schedule_ir::verify(s2).unwrap();
        let e = t.elapsed().as_secs_f64();
        best = best.min(e);
        std::hint::black_box(&v);
    }
    let t = std::time::Instant::now();
    let v = schedule_ir::verify(s.clone()).unwrap();
    let text = v.report().to_string();
    let json = serde_json::to_string(v.report()).unwrap();
    let t_all = t.elapsed();
    // a broken one: last step dropped -> 512 wrong-result errors
    let mut bad = s.clone();
    for p in &mut bad.phases[0].programs { p.steps.pop(); }
    bad.phases[0].steps -= 1;
    let t = std::time::Instant::now();
    let n = schedule_ir::verify(bad).unwrap_err().errors.len();
    let t_bad = t.elapsed();
    println!("SPEED built {built:?}, {instrs} instrs, chunks {}, steps {}, verify best {:.1} ms, verify+display+json {t_all:?} (text {} B, json {} B), bad {n} errors in {t_bad:?}", s.phases[0].chunks.len(), s.phases[0].steps, best*1e3, text.len(), json.len());
}
