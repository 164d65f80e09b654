//! The 16-bit float element types through the compiler: named in a topology file, chosen with
//! `topoc run --dtype`, and exported to MSCCL, which takes the element type from the
//! collective call and so writes the same XML for every dtype.
#![allow(clippy::panic, clippy::unwrap_used)]

use schedule_ir::DType;
use std::path::Path;
use std::process::{Command, Output};
use topoc::emit::msccl::{self, Options};

fn topoc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
        .output()
        .expect("topoc runs")
}

fn ring4(dtype: &str) -> String {
    format!(
        "Topology(name: \"ring-4\", machine: Ring(nodes: 4, link: (bandwidth_gbps: 100.0, \
         latency_us: 1.0)), phases: [Exchange(name: \"grads\", collective: AllReduce, op: Sum, \
         dtype: {dtype}, elements: 4096)])"
    )
}

#[test]
fn a_topology_names_f16_and_bf16_and_they_size_the_chunks() {
    let f32_bytes = {
        let c = topoc::compile_source(&ring4("F32"), &topoc::Options::default()).unwrap();
        c.schedule.schedule().phases[0].chunk_bytes(schedule_ir::ChunkId(0))
    };
    for (name, dtype) in [("F16", DType::F16), ("BF16", DType::BF16)] {
        let compiled = topoc::compile_source(&ring4(name), &topoc::Options::default())
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let phase = &compiled.schedule.schedule().phases[0];
        assert_eq!(phase.dtype, dtype);
        assert_eq!(
            2 * phase.chunk_bytes(schedule_ir::ChunkId(0)),
            f32_bytes,
            "{name}"
        );
    }
}

#[test]
fn run_takes_f16_and_bf16_on_the_command_line() {
    for dtype in ["f16", "bf16"] {
        for example in ["examples/ring8.ron", "examples/mean-ladder8.ron"] {
            let args = [
                "run",
                example,
                "--dtype",
                dtype,
                "--elements",
                "999",
                "--format",
                "json",
            ];
            let out = topoc(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{example} {dtype}: {stderr}");
            let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(json["ok"], true, "{json}");
            for phase in json["phases"].as_array().unwrap() {
                assert_eq!(phase["dtype"], dtype, "{json}");
                assert_eq!(phase["reproducible"], true, "{json}");
            }
            // The same command gives the same report, byte for byte.
            assert_eq!(topoc(&args).stdout, out.stdout, "{example} {dtype}");
        }
    }
    let out = topoc(&["run", "examples/ring8.ron", "--dtype", "f8"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("f16") && stderr.contains("bf16"),
        "{stderr}"
    );
}

#[test]
fn msccl_xml_does_not_depend_on_the_dtype() {
    let xml = |dtype: &str| {
        let compiled = topoc::compile_source(&ring4(dtype), &topoc::Options::default()).unwrap();
        msccl::to_xml(&compiled.schedule, &Options::default()).unwrap()
    };
    let f32_xml = xml("F32");
    // MSCCL's parser reads no element type: the call's datatype (ncclHalf, ncclBfloat16)
    // applies to whichever algorithm the file holds.
    assert!(!f32_xml.contains("dtype") && !f32_xml.contains("datatype"));
    assert_eq!(xml("F16"), f32_xml);
    assert_eq!(xml("BF16"), f32_xml);
}
