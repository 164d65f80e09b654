//! A ring schedule walked around, for the tests that pin MSCCL's own ring shape: `ring` itself
//! takes the cheaper walk, which on a ring is its chunks meeting in the middle.

/// `source` compiled, its one phase replaced by its rings walked around (`ring` itself takes the
/// cheaper walk, chunks meeting in the middle): MSCCL's own ring allreduce, whose structure
/// these tests pin.
pub fn walked_around(source: &str) -> schedule_ir::VerifiedSchedule {
    use topoc::lower::ring;
    let compiled = topoc::compile_source(source, &topoc::Options::default())
        .unwrap_or_else(|e| panic!("does not compile: {e:?}"));
    let machine = topoc::compile::load(source).unwrap().machine;
    let mut schedule = compiled.schedule.schedule().clone();
    let old = &schedule.phases[0];
    let spec = topoc::lower::PhaseSpec {
        name: old.name.clone(),
        collective: old.collective,
        op: old.op,
        dtype: old.dtype,
        elements: old.elements,
    };
    let logical = ring::Logical::of(&machine, &ring::rings(&machine).unwrap());
    let phase = ring::lower(&spec, "ring", &machine, &logical, ring::Walk::Around).unwrap();
    schedule.phases = vec![phase];
    schedule_ir::verify(schedule).unwrap_or_else(|e| panic!("{e}"))
}
