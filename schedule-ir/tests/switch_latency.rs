//! The machine's `switch_latency_us`: refused by the verifier when negative or not finite,
//! written only when set, and charged by the estimate for every switch a route crosses.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use schedule_ir::serial::{self, Format};
use schedule_ir::verify::ErrorKind;
use schedule_ir::{verify, VerifyError};

#[test]
fn a_negative_or_infinite_switch_latency_is_refused() {
    for bad in [-1.0, f64::INFINITY, f64::NAN] {
        let mut s = ring_allreduce(4, 64);
        s.machine.switch_latency_us = bad;
        let errors = verify(s).expect_err("refused").errors;
        assert!(
            errors.iter().any(|e| matches!(
                e,
                VerifyError {
                    kind: ErrorKind::InvalidSwitchLatency { machine, value },
                    ..
                } if machine == "ring-4" && *value == bad.to_string()
            )),
            "{bad}: {errors:?}"
        );
        let text = errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(text.contains("switch_latency_us"), "{text}");
    }
}

#[test]
fn the_field_is_written_only_when_set() {
    let mut s = ring_allreduce(4, 64);
    for format in [Format::Ron, Format::Json] {
        let text = serial::to_string(&s, format);
        assert!(!text.contains("switch_latency_us"), "{format:?}");
    }
    s.machine.switch_latency_us = 0.25;
    for format in [Format::Ron, Format::Json] {
        let text = serial::to_string(&s, format);
        assert!(text.contains("switch_latency_us"), "{format:?}");
        let back = serial::from_str(&text).unwrap();
        assert_eq!(back, s);
    }
    verify(s).expect("a positive switch latency is fine");
}
