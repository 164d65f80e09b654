//! Running a banded exchange by the size of its buffers: the band that holds the size runs,
//! re-cut to the buffers' length, and its result is the reference reduction bit for bit; a
//! size no band holds is refused with the exchange, the size and the bands.
#![allow(clippy::unwrap_used, clippy::panic)]

use runtime_lite::{bands, inputs, reference, run_phase, Error};
use schedule_ir::{serial, verify, DType, VerifiedSchedule};

/// The schedule-ir crate's banded ring: `grads` is `grads@120B` (compiled for 30 elements)
/// below 1000 bytes and `grads@12000B` (3000 elements) from 1000 bytes on.
fn banded() -> VerifiedSchedule {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../schedule-ir/tests/good/bands-ring3.ron"
    );
    let text = std::fs::read_to_string(path).unwrap();
    verify(serial::from_str(&text).unwrap()).unwrap()
}

/// Runs exchange `grads` on `len` i32 elements per node and checks it against the reference
/// bit for bit; returns the name of the phase that ran.
fn run(schedule: &VerifiedSchedule, len: u64) -> String {
    let sized = bands::select(schedule, "grads", DType::I32, len).unwrap();
    let phase = sized.phase();
    assert_eq!(phase.elements, len);
    let machine = &sized.schedule().schedule().machine;
    let ins: Vec<Vec<i32>> = inputs::generate_all(phase.op, len, 3, len as usize);
    let out = run_phase(sized.schedule(), &phase.name, ins.clone()).unwrap();
    assert_eq!(
        out,
        reference(machine, phase, &ins).unwrap(),
        "{len} elements"
    );
    phase.name.clone()
}

#[test]
fn the_band_holding_the_size_runs_at_every_length_and_matches_the_reference() {
    let schedule = banded();
    // i32: 4 bytes, so the first band (below 1000 bytes) holds lengths up to 249, fewer than
    // the three chunks included.
    for len in 0..250 {
        assert_eq!(run(&schedule, len), "grads@120B", "{len} elements");
    }
    for len in [250, 251, 299, 1000, 2999, 3000, 3001, 10_007] {
        assert_eq!(run(&schedule, len), "grads@12000B", "{len} elements");
    }
}

#[test]
fn the_band_is_chosen_by_bytes_not_elements() {
    let schedule = banded();
    // 200 f64 elements are 1600 bytes: the second band, though 200 i32 would be the first.
    let sized = bands::select(&schedule, "grads", DType::F64, 200).unwrap();
    assert_eq!(sized.phase().name, "grads@12000B");
    assert_eq!(sized.phase().dtype, DType::F64);
    let sized = bands::select(&schedule, "grads", DType::I32, 200).unwrap();
    assert_eq!(sized.phase().name, "grads@120B");
}

#[test]
fn a_size_no_band_holds_is_refused_with_the_exchange_the_size_and_the_bands() {
    let mut schedule = banded().into_schedule();
    let schedule_ir::ProgramItem::Bands { bands, .. } = &mut schedule.program[1] else {
        panic!("the program's second item is the banded exchange");
    };
    bands[1].max_bytes = Some(20_000);
    let schedule = verify(schedule).unwrap();
    let e = bands::select(&schedule, "grads", DType::I32, 5000).unwrap_err();
    assert!(matches!(e, Error::NoBand { bytes: 20_000, .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "exchange `grads` has no band for buffers of 20000 bytes (its bands: 0..1000 bytes \
         (grads@120B), 1000..20000 bytes (grads@12000B))"
    );
    // The last byte below the end still runs.
    assert_eq!(run(&schedule, 4999), "grads@12000B");
}

#[test]
fn an_unknown_exchange_is_refused_naming_what_can_run() {
    let e = bands::select(&banded(), "grad", DType::I32, 10).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the schedule has no phase named `grad` (its phases: `grads` (banded))"
    );
}

#[test]
fn a_band_phase_runs_by_its_own_name_too() {
    let schedule = banded();
    let sized = bands::select(&schedule, "grads@12000B", DType::I32, 40).unwrap();
    assert_eq!(sized.phase().name, "grads@12000B");
    assert_eq!(sized.phase().elements, 40);
}

#[test]
fn a_banded_exchange_run_by_name_alone_points_at_the_band_selection() {
    // A runner that takes a phase, not a size, cannot know which band to run.
    let schedule = banded();
    let ins: Vec<Vec<i32>> = inputs::generate_all(schedule_ir::ReduceOp::Sum, 1, 3, 30);
    let e = run_phase(&schedule, "grads", ins).unwrap_err();
    assert!(matches!(e, Error::Banded { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "`grads` is a banded exchange: which phase runs depends on the buffer's size; pick it \
         with `bands::select` (its bands: 0..1000 bytes (grads@120B), 1000.. bytes \
         (grads@12000B))"
    );
}
