//! `docs/ir.md` shows real output: its example schedule is the test builder's, and the report
//! printed beside it is what the verifier says about it.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use schedule_ir::{serial, verify};

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/ir.md");
    std::fs::read_to_string(path).unwrap()
}

/// The body of the first fenced block with the given language after `after`.
fn block(text: &str, after: &str, lang: &str) -> String {
    let start = text
        .find(after)
        .unwrap_or_else(|| panic!("no `{after}` in docs/ir.md"));
    let rest = &text[start..];
    let open = format!("```{lang}\n");
    let body = &rest[rest.find(&open).unwrap() + open.len()..];
    body[..body.find("```").unwrap()].to_string()
}

#[test]
fn example_schedule_is_the_builders() {
    let text = doc();
    let ron = block(&text, "<!-- example:ring3 -->", "ron");
    let from_doc = serial::from_str(&ron).unwrap();
    assert_eq!(from_doc, common::ring_allreduce(3, 6));
    // And it is exactly what the writer prints (regenerate with `serial::to_string` if not).
    assert_eq!(
        ron,
        serial::to_string(&from_doc, serial::Format::Ron),
        "docs/ir.md's example is stale: paste the writer's output"
    );
}

#[test]
fn example_report_is_the_verifiers() {
    let text = doc();
    let report = block(&text, "<!-- example:ring3-report -->", "text");
    let v = verify(common::ring_allreduce(3, 6)).unwrap();
    assert_eq!(report, v.report().to_string());
}

#[test]
fn example_error_json_is_the_verifiers() {
    let text = doc();
    let json = block(&text, "<!-- example:verify-error-json -->", "json");
    let from_doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut s = common::ring_allreduce(4, 1024);
    common::at(&mut s, 2, 3).retain(|i| !matches!(i, schedule_ir::Instr::Recv { .. }));
    let errors = verify(s).unwrap_err().errors;
    assert_eq!(errors.len(), 1);
    assert_eq!(from_doc, serde_json::to_value(&errors[0]).unwrap());
}
