//! Property tests over generated machines (see `gen/mod.rs`).
//!
//! 1. **Every method compiles what it must, and what it compiles is right.** For a random
//!    machine (a graph with a Hamiltonian cycle plus extra links, a ring, a ladder) and a
//!    random phase (collective, op, element type, length — 0, 1, fewer than the chunks, more),
//!    every method of [`Method::ALL`] is forced in turn, and `auto` too: a method the machine
//!    must support compiles; every schedule produced verifies again after a trip through its
//!    RON text, and runs in the runtime on random data matching the reference reduction, bit
//!    for bit the same on a second run.
//! 2. **A single mutation of a valid schedule is rejected or harmless.** One instruction of a
//!    compiled integer phase is dropped, duplicated, moved to another step, or has a chunk id,
//!    its link, its peer or its receive mode changed. The verifier must reject the mutant — or,
//!    if it accepts it, the runtime's result on random integers must equal the reference
//!    exactly: the verifier never accepts a wrong schedule.
//!
//! Case counts are set explicitly ([`COMPILE_CASES`], [`MUTATION_CASES`]) and recorded in
//! `RELIABILITY.md`.
#![allow(clippy::panic, clippy::unwrap_used)]

mod gen;

use gen::{GenMachine, GenPhase, Pick};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use schedule_ir::{serial, ChunkId, Instr, LinkId, NodeId, Phase, RecvMode, Schedule};
use std::sync::atomic::{AtomicUsize, Ordering};
use topoc::lower::Method;
use topoc::{trial, Error, Options};

/// Cases of property 1 (each compiles up to three times and runs every schedule twice).
const COMPILE_CASES: u32 = 600;
/// Cases of property 2 (each compiles once, mutates, verifies, and runs the mutant if it
/// verifies).
const MUTATION_CASES: u32 = 3000;

fn config(cases: u32) -> Config {
    Config {
        cases,
        source_file: Some(file!()),
        ..Config::default()
    }
}

/// Compiles `text` with `algorithm`, checks the result (verifies after a RON round trip, runs
/// and matches the reference, reproduces) and says whether it compiled.
fn compile_and_check(
    text: &str,
    algorithm: Option<&str>,
    seed: u64,
) -> Result<bool, TestCaseError> {
    let options = Options {
        algorithm: algorithm.and_then(|name| name.parse().ok()),
        ..Options::default()
    };
    let compiled = match topoc::compile_source(text, &options) {
        Ok(c) => c,
        Err(Error::Topology(problems)) => {
            prop_assert!(!problems.is_empty());
            return Ok(false);
        }
        Err(e @ Error::Unverified(_)) => {
            return Err(TestCaseError::fail(format!("{algorithm:?}: {e}")))
        }
    };
    let schedule = compiled.schedule.schedule();
    if let Some(name) = algorithm {
        for phase in &schedule.phases {
            prop_assert_eq!(phase.algorithm.as_str(), name);
        }
    }
    let text = serial::to_string(schedule, serial::Format::Ron);
    let back = serial::from_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let verified = schedule_ir::verify(back)
        .map_err(|e| TestCaseError::fail(format!("{algorithm:?}: does not verify again: {e:?}")))?;
    for phase in &verified.schedule().phases {
        let run = trial::run_phase(&verified, phase, seed).map_err(TestCaseError::fail)?;
        prop_assert!(run.ok(), "{:?}: {:?}", algorithm, run);
    }
    Ok(true)
}

#[test]
fn every_method_compiles_what_it_must_and_the_result_runs_correctly() {
    let strategy = (gen::machine(), gen::phase(), any::<u64>());
    let mut runner = TestRunner::new(config(COMPILE_CASES));
    let result = runner.run(&strategy, |(machine, phase, seed)| {
        let text = gen::topology(&machine, &phase);
        for method in Method::ALL {
            let compiled = compile_and_check(&text, Some(method.name()), seed)?;
            prop_assert!(
                compiled || !machine.must.contains(&method),
                "{} must compile:\n{}",
                method,
                text
            );
        }
        let compiled = compile_and_check(&text, None, seed)?;
        prop_assert!(
            compiled || machine.must.is_empty(),
            "auto must compile:\n{}",
            text
        );
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// One way to damage a schedule.
#[derive(Clone, Copy, Debug)]
enum Mutation {
    Drop,
    Duplicate,
    MoveToAnotherStep,
    ChangeChunk,
    ChangeLink,
    ChangePeer,
    FlipRecvMode,
}

const MUTATIONS: [Mutation; 7] = [
    Mutation::Drop,
    Mutation::Duplicate,
    Mutation::MoveToAnotherStep,
    Mutation::ChangeChunk,
    Mutation::ChangeLink,
    Mutation::ChangePeer,
    Mutation::FlipRecvMode,
];

/// Applies `mutation` to one instruction of `phase`, chosen by `pick`; returns a description,
/// or `None` when the mutation does not apply (nothing to pick, or no other value to pick).
fn mutate(
    phase: &mut Phase,
    links: usize,
    compute: &[NodeId],
    mutation: Mutation,
    (which, to, at): Pick,
) -> Option<String> {
    let places: Vec<(usize, usize, usize)> = phase
        .programs
        .iter()
        .enumerate()
        .flat_map(|(n, program)| {
            program
                .steps
                .iter()
                .enumerate()
                .flat_map(move |(k, step)| step.iter().enumerate().map(move |(i, _)| (n, k, i)))
        })
        .filter(|&(n, k, i)| {
            !matches!(mutation, Mutation::FlipRecvMode)
                || matches!(phase.programs[n].steps[k][i], Instr::Recv { .. })
        })
        .collect();
    if places.is_empty() {
        return None;
    }
    let (n, k, i) = places[which.index(places.len())];
    let steps = phase.programs[n].steps.len();
    let chunks = phase.chunks.len();
    // A value other than `current` below `count`, chosen by `to`.
    let other = |current: usize, count: usize| -> Option<usize> {
        (count > 1).then(|| (current + 1 + to.index(count - 1)) % count)
    };
    let step = &mut phase.programs[n].steps[k];
    let at_text = format!("node#{n} step {k} instruction {i} ({:?})", step[i]);
    match mutation {
        Mutation::Drop => {
            step.remove(i);
        }
        Mutation::Duplicate => {
            let copy = step[i].clone();
            step.insert(i + 1, copy);
        }
        Mutation::MoveToAnotherStep => {
            let target = other(k, steps)?;
            let instr = step.remove(i);
            let into = &mut phase.programs[n].steps[target];
            let pos = at.index(into.len() + 1);
            into.insert(pos, instr);
            return Some(format!("move {at_text} to step {target}"));
        }
        Mutation::ChangeChunk => {
            let list = match &mut step[i] {
                Instr::Send { chunks, .. }
                | Instr::Recv { chunks, .. }
                | Instr::Reduce { chunks, .. }
                | Instr::Copy { chunks, .. }
                | Instr::Scale { chunks, .. } => chunks,
            };
            let slot = at.index(list.len());
            let mut ids = list.to_vec();
            let new = other(ids[slot].index(), chunks)?;
            ids[slot] = ChunkId::new(new);
            *list = ids.into();
            return Some(format!("set chunk {slot} of {at_text} to {new}"));
        }
        Mutation::ChangeLink => match &mut step[i] {
            Instr::Send { link, .. } | Instr::Recv { link, .. } => {
                let new = other(link.index(), links)?;
                *link = LinkId::new(new);
                return Some(format!("set the link of {at_text} to link#{new}"));
            }
            _ => return None,
        },
        Mutation::ChangePeer => match &mut step[i] {
            Instr::Send { to: peer, .. } | Instr::Recv { from: peer, .. } => {
                let now = compute.iter().position(|c| c == peer)?;
                let new = compute[other(now, compute.len())?];
                *peer = new;
                return Some(format!("set the peer of {at_text} to {new}"));
            }
            _ => return None,
        },
        Mutation::FlipRecvMode => {
            if let Instr::Recv { mode, .. } = &mut step[i] {
                *mode = match mode {
                    RecvMode::Store => RecvMode::Reduce,
                    RecvMode::Reduce => RecvMode::Store,
                };
            }
        }
    }
    Some(format!("{mutation:?} {at_text}"))
}

#[test]
fn a_single_mutation_is_rejected_by_the_verifier_or_harmless() {
    static REJECTED: AtomicUsize = AtomicUsize::new(0);
    static HARMLESS: AtomicUsize = AtomicUsize::new(0);
    static NOT_APPLICABLE: AtomicUsize = AtomicUsize::new(0);
    let strategy = (
        gen::machine(),
        gen::integer_phase(),
        prop::sample::select(MUTATIONS.to_vec()),
        any::<Pick>(),
        any::<u64>(),
    );
    let mut runner = TestRunner::new(config(MUTATION_CASES));
    let result = runner.run(&strategy, |(machine, phase, mutation, pick, seed)| {
        check_mutant(
            &machine,
            &phase,
            mutation,
            pick,
            seed,
            &REJECTED,
            &HARMLESS,
            &NOT_APPLICABLE,
        )
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (rejected, harmless, skipped) = (
        REJECTED.load(Ordering::Relaxed),
        HARMLESS.load(Ordering::Relaxed),
        NOT_APPLICABLE.load(Ordering::Relaxed),
    );
    eprintln!("mutants: {rejected} rejected by the verifier, {harmless} accepted and harmless, {skipped} not applicable");
    assert!(
        rejected > harmless,
        "most single mutations break a schedule: {rejected} rejected, {harmless} harmless"
    );
}

#[allow(clippy::too_many_arguments)]
fn check_mutant(
    machine: &GenMachine,
    phase: &GenPhase,
    mutation: Mutation,
    pick: Pick,
    seed: u64,
    rejected: &AtomicUsize,
    harmless: &AtomicUsize,
    not_applicable: &AtomicUsize,
) -> Result<(), TestCaseError> {
    let text = gen::topology(machine, phase);
    let compiled = topoc::compile_source(&text, &Options::default())
        .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    let original = compiled.schedule.into_schedule();
    let mut mutant: Schedule = original.clone();
    let compute: Vec<NodeId> = mutant.machine.compute_nodes().collect();
    let links = mutant.machine.links.len();
    let Some(what) = mutate(&mut mutant.phases[0], links, &compute, mutation, pick) else {
        not_applicable.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    };
    let verified = match schedule_ir::verify(mutant) {
        Err(errors) => {
            prop_assert!(!errors.errors.is_empty());
            rejected.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        Ok(v) => v,
    };
    // Accepted: the result must still be exactly the reference.
    let p = &verified.schedule().phases[0];
    let len = usize::try_from(p.elements).unwrap();
    let inputs = trial::random_inputs(p.dtype, p.op, compute.len(), len, seed);
    let outputs = runtime_lite::run_phase_any(&verified, &p.name, inputs.clone())
        .map_err(|e| TestCaseError::fail(format!("{what}: accepted but does not run: {e}")))?;
    let machine_ir = &verified.schedule().machine;
    let expected = runtime_lite::reference_any(machine_ir, p, &inputs)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    runtime_lite::compare_any(machine_ir, p, &inputs, &expected, &outputs).map_err(|e| {
        TestCaseError::fail(format!(
            "{what}: the verifier accepts the mutant but it computes a wrong result: {e}\n{text}"
        ))
    })?;
    harmless.fetch_add(1, Ordering::Relaxed);
    Ok(())
}
