//! Size-aware compilation: `compile --size` compiles every exchange phase at one size,
//! `compile --bands` once per size into a banded exchange that the runtime runs by the
//! buffer's size, and the MSCCL export writes one algorithm per band with its byte range.
#![allow(clippy::panic, clippy::unwrap_used)]

mod msccl_sim;

use runtime_lite::{bands, inputs, reference, run_phase};
use schedule_ir::serial::{self, Format};
use schedule_ir::{Band, DType, ProgramItem, VerifiedSchedule};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use topoc::compile::{compile_sized, Sizes};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn topoc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The 8-node ladder: its cheapest method is `matching` for small vectors and `ring` (its two
/// barley-twist rings, chunks meeting in the middle) for large ones.
fn ladder8(sizes: &Sizes) -> VerifiedSchedule {
    let text = std::fs::read_to_string(repo().join("examples/ladder8.ron")).unwrap();
    let loaded = topoc::load(&text).unwrap();
    compile_sized(&loaded, &topoc::Options::default(), sizes)
        .unwrap()
        .schedule
}

#[test]
fn one_size_sets_every_phase_s_elements_and_auto_decides_at_it() {
    let small = ladder8(&Sizes::One(1024));
    let phase = &small.schedule().phases[0];
    assert_eq!((phase.name.as_str(), phase.elements), ("grads", 256));
    assert_eq!(phase.algorithm, "matching");
    let large = ladder8(&Sizes::One(1 << 20));
    let phase = &large.schedule().phases[0];
    assert_eq!(
        (phase.elements, phase.algorithm.as_str()),
        (1 << 18, "ring")
    );
    // No bands: the program is the file's.
    assert_eq!(
        large.schedule().program,
        [
            ProgramItem::Compute("forward".into()),
            ProgramItem::Exchange("grads".into())
        ]
    );
}

#[test]
fn the_file_s_own_size_compiles_to_the_same_bytes_as_no_size() {
    // ladder8 declares 1048576 f32 elements: 4 MiB.
    let plain = topoc(&["compile", "examples/ladder8.ron"]);
    let sized = topoc(&["compile", "examples/ladder8.ron", "--size", "4MiB"]);
    assert!(
        plain.status.success() && sized.status.success(),
        "{}",
        stderr(&sized)
    );
    assert_eq!(plain.stdout, sized.stdout);
}

#[test]
fn bands_hold_one_phase_per_size_verify_run_by_size_and_repeat_byte_for_byte() {
    let sizes = Sizes::Bands(vec![1 << 20, 1024]);
    let verified = ladder8(&sizes);
    let schedule = verified.schedule();
    assert_eq!(
        schedule.program,
        vec![
            ProgramItem::Compute("forward".into()),
            ProgramItem::Bands {
                name: "grads".into(),
                bands: vec![
                    Band {
                        min_bytes: 0,
                        max_bytes: Some(32768),
                        phase: "grads@1KiB".into()
                    },
                    Band {
                        min_bytes: 32768,
                        max_bytes: None,
                        phase: "grads@1MiB".into()
                    },
                ],
            },
        ]
    );
    let methods: Vec<&str> = schedule
        .phases
        .iter()
        .map(|p| p.algorithm.as_str())
        .collect();
    assert_eq!(methods, ["matching", "ring"]);
    // The text reads back and verifies again, and a second compile writes the same bytes.
    let text = serial::to_string(schedule, Format::Ron);
    schedule_ir::verify(serial::from_str(&text).unwrap()).unwrap();
    assert_eq!(
        text,
        serial::to_string(ladder8(&sizes).schedule(), Format::Ron)
    );
    // Lengths inside each band run that band's method, and match the reference (i32: exact).
    for (elements, method) in [
        (1, "matching"),
        (100, "matching"),
        (8191, "matching"),
        (8192, "ring"),
        (100_003, "ring"),
    ] {
        let sized = bands::select(&verified, "grads", DType::I32, elements).unwrap();
        let phase = sized.phase();
        assert_eq!(phase.algorithm, method, "{elements} elements");
        let ins: Vec<Vec<i32>> = inputs::generate_all(phase.op, 7, 8, elements as usize);
        let out = run_phase(sized.schedule(), &phase.name, ins.clone()).unwrap();
        let machine = &sized.schedule().schedule().machine;
        assert_eq!(out, reference(machine, phase, &ins).unwrap(), "{elements}");
    }
}

#[test]
fn topoc_run_runs_the_band_that_holds_the_size() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("banded.ron");
    let file = file.to_str().unwrap();
    let out = topoc(&[
        "compile",
        "examples/ladder8.ron",
        "--bands",
        "1KiB,1MiB",
        "-o",
        file,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    for (elements, phase, method) in [
        ("100", "grads@1KiB", "matching"),
        ("9000", "grads@1MiB", "ring"),
    ] {
        let run = topoc(&[
            "run",
            file,
            "--phase",
            "grads",
            "--elements",
            elements,
            "--dtype",
            "i32",
            "--format",
            "json",
        ]);
        assert!(run.status.success(), "{}", stderr(&run));
        let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        let ran = &report["phases"][0];
        assert_eq!(ran["phase"], phase);
        assert_eq!(ran["algorithm"], method);
        assert_eq!(ran["elements"], elements.parse::<u64>().unwrap());
        assert_eq!(ran["mismatch"], serde_json::Value::Null);
        assert_eq!(report["ok"], true);
    }
}

#[test]
fn bad_sizes_are_refused_naming_the_option_the_phase_and_the_size() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["--size", "1001"],
            "error: --size: 1001 bytes is not a whole number of phase `grads`'s f32 elements",
        ),
        (
            &["--bands", "1KiB,1002"],
            "error: --bands: 1002 bytes is not a whole number of phase `grads`'s f32 elements",
        ),
        (
            &["--size", "300000GiB"],
            "= the size comes from --size 300000GiB",
        ),
        (
            &["--bands", "1KiB,lots"],
            "error: invalid value '1KiB,lots' for '--bands <SIZES>': `lots` is not a size",
        ),
        (
            &["--bands", "1KiB,1MiB", "--emit", "chakra", "-o", "x"],
            "error: --bands writes a schedule with one algorithm per size band",
        ),
        (
            &["--bands", "1KiB,1MiB", "--emit", "msccl-xml"],
            "error: --emit msccl-xml with --bands writes one algorithm file per band: give their \
             directory with -o DIR",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["compile", "examples/ladder8.ron"];
        all.extend_from_slice(args);
        let out = topoc(&all);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            stderr(&out).contains(message),
            "{args:?}:\n{}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "{args:?} wrote a schedule");
    }
    // A size that does not parse is a usage error, as every other bad value is.
    let unparsed = topoc(&["compile", "examples/ladder8.ron", "--size", "1TiB"]);
    assert_eq!(unparsed.status.code(), Some(2), "{}", stderr(&unparsed));
    let both = topoc(&[
        "compile",
        "examples/ladder8.ron",
        "--size",
        "1KiB",
        "--bands",
        "1KiB",
    ]);
    assert!(
        stderr(&both).contains("cannot be used with"),
        "{}",
        stderr(&both)
    );
}

/// `minBytes` and `maxBytes` of an algorithm file.
fn byte_range(xml: &str) -> (String, String) {
    let attr = |name: &str| {
        let start = xml.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        xml[start..].split('"').next().unwrap().to_string()
    };
    (attr("minBytes"), attr("maxBytes"))
}

#[test]
fn msccl_export_writes_one_checked_algorithm_per_band_with_its_byte_range() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("algos");
    let args = [
        "compile",
        "examples/ladder8.ron",
        "--bands",
        "1KiB,1MiB",
        "--emit",
        "msccl-xml",
        "-o",
        out_dir.to_str().unwrap(),
    ];
    let out = topoc(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["00-1KiB.xml", "01-1MiB.xml"]);
    // MSCCL takes an algorithm for n bytes when minBytes <= n <= maxBytes, maxBytes 0 meaning
    // no upper end: the bands 0..32768 and 32768.. exactly.
    let expected = [("0", "32767", "matching"), ("32768", "0", "ring")];
    for (name, (min, max, method)) in names.iter().zip(expected) {
        let xml = std::fs::read_to_string(out_dir.join(name)).unwrap();
        assert_eq!(
            byte_range(&xml),
            (min.to_string(), max.to_string()),
            "{name}"
        );
        assert!(
            xml.starts_with("<algo name=\"topoc ladder-8 grads@"),
            "{name}"
        );
        assert!(xml.lines().next().unwrap().contains(method), "{name}");
        msccl_sim::check_file(name, &xml).unwrap_or_else(|e| panic!("{e}"));
    }
    // Exported twice, the files are the same bytes.
    let again = dir.path().join("again");
    let mut args2 = args;
    args2[7] = again.to_str().unwrap();
    assert!(topoc(&args2).status.success());
    for name in &names {
        assert_eq!(
            std::fs::read(out_dir.join(name)).unwrap(),
            std::fs::read(again.join(name)).unwrap()
        );
    }
}

#[test]
fn simulate_prices_a_banded_schedule_by_the_band_of_each_size() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("banded.ron");
    let file = file.to_str().unwrap();
    assert!(topoc(&[
        "compile",
        "examples/ladder8.ron",
        "--bands",
        "1KiB,1MiB",
        "-o",
        file
    ])
    .status
    .success());
    let out = topoc(&[
        "simulate",
        file,
        "--sizes",
        "1KiB,16KiB,64KiB,1MiB",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = table["rows"].as_array().unwrap();
    let seen: Vec<(u64, &str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["bytes"].as_u64().unwrap(),
                r["phase"].as_str().unwrap(),
                r["algorithm"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (1024, "grads", "matching"),
            (16384, "grads", "matching"),
            (65536, "grads", "ring"),
            (1 << 20, "grads", "ring"),
        ]
    );
}

#[test]
fn the_help_example_for_bands_runs_as_written() {
    let help = String::from_utf8(topoc(&["compile", "--help"]).stdout).unwrap();
    let example = help
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Example: topoc "))
        .find(|l| l.contains("--bands"))
        .expect("compile --help has a --bands example");
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = example.split_whitespace().map(str::to_string).collect();
    let o = args.iter().position(|a| a == "-o").unwrap();
    args[o + 1] = dir.path().join(&args[o + 1]).to_string_lossy().into_owned();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = topoc(&args);
    assert!(out.status.success(), "{example}: {}", stderr(&out));
    let text = std::fs::read_to_string(args[o + 1]).unwrap();
    let schedule = schedule_ir::verify(serial::from_str(&text).unwrap()).unwrap();
    assert_eq!(
        schedule.schedule().bands("grads").map(<[Band]>::len),
        Some(3)
    );
}
