//! `topoc import`: every file in `examples/import/` (NCCL topology dumps `*.xml`, `nvidia-smi
//! topo -m` matrices `*.smi.txt`; the folder is the list of cases) becomes a topology file that
//! compiles to a verified schedule, with the links the machine has; every file in
//! `tests/data/import/bad/` is refused with a diagnostic pinned under
//! `tests/data/import/snapshots/`.
#![allow(clippy::panic, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use topoc::import::{self, nvidia_smi::Generations, Figures, LinkKind, Machine};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn stem(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    name.split('.').next().unwrap().to_string()
}

/// The generations `nvidia-smi topo -m` does not state, for the machines of the examples.
fn generations(name: &str) -> Generations {
    if name.starts_with("dgx1") {
        Generations {
            nvlink: LinkKind::NvLink2,
            pcie: LinkKind::Pcie3,
        }
    } else {
        Generations::default()
    }
}

fn read(path: &Path) -> Result<Machine, Vec<topoc::diag::Problem>> {
    let text = std::fs::read_to_string(path).unwrap();
    let name = stem(path);
    if path.to_string_lossy().ends_with(".xml") {
        import::nccl_xml::read(&text, &name, "test")
    } else {
        import::nvidia_smi::read(&text, &name, "test", generations(&name))
    }
}

/// The GPU-to-GPU interconnect: for each GPU, its bonds (peer or switch → links).
fn fabric(m: &Machine) -> BTreeMap<String, BTreeMap<String, u32>> {
    let mut out: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
    for l in &m.links {
        if l.kind.links_per_gpu().is_none() && !l.kind.key().starts_with("xgmi") {
            continue;
        }
        out.entry(l.a.clone())
            .or_default()
            .insert(l.b.clone(), l.count);
        out.entry(l.b.clone())
            .or_default()
            .insert(l.a.clone(), l.count);
    }
    out
}

#[test]
fn every_example_imports_compiles_and_verifies() {
    let cases = files(&repo().join("examples/import"));
    assert!(
        cases.len() >= 6,
        "the DGX-1, DGX A100, DGX H100 and MI250X inputs"
    );
    for path in cases {
        let case = path.display().to_string();
        let machine = read(&path).unwrap_or_else(|p| panic!("{case}: {p:#?}"));
        let ron = machine.to_ron(&Figures::default());
        assert_eq!(
            ron,
            read(&path).unwrap().to_ron(&Figures::default()),
            "{case}: deterministic"
        );
        let compiled = topoc::compile_source(&ron, &topoc::Options::default())
            .unwrap_or_else(|e| panic!("{case}: the import does not compile: {e}\n{ron}"));
        let schedule = compiled.schedule.schedule();
        assert_eq!(schedule.phases.len(), 1, "{case}");
        let gpus = schedule
            .machine
            .nodes
            .iter()
            .filter(|n| n.kind == schedule_ir::NodeKind::Compute)
            .count();
        assert_eq!(gpus, 8, "{case}: eight GPUs");
        // Verified again from the written schedule, as `topoc verify` would.
        let text = schedule_ir::serial::to_string(schedule, schedule_ir::serial::Format::Ron);
        let back = schedule_ir::serial::from_str(&text).unwrap();
        schedule_ir::verify(back).unwrap_or_else(|e| panic!("{case}: {e:?}"));
    }
}

#[test]
fn the_machines_have_the_links_their_vendors_document() {
    let dir = repo().join("examples/import");
    // DGX-1: the hybrid cube-mesh, six NVLink2 links per GPU, bonds of one or two.
    for file in ["dgx1-v100.xml", "dgx1-v100.smi.txt"] {
        let m = read(&dir.join(file)).unwrap();
        let f = fabric(&m);
        assert_eq!(f.len(), 8, "{file}");
        for (gpu, bonds) in &f {
            assert_eq!(bonds.values().sum::<u32>(), 6, "{file} {gpu}");
            assert_eq!(bonds.len(), 4, "{file} {gpu}: four peers");
        }
        assert_eq!(f["gpu0"]["gpu4"], 2, "{file}");
        assert_eq!(f["gpu0"]["gpu1"], 1, "{file}");
        assert!(m.links.iter().all(|l| l.kind != LinkKind::NvLink3));
        assert_eq!(
            m.switches.iter().filter(|s| s.starts_with("cpu")).count(),
            2
        );
    }
    assert_eq!(
        fabric(&read(&dir.join("dgx1-v100.xml")).unwrap()),
        fabric(&read(&dir.join("dgx1-v100.smi.txt")).unwrap()),
        "the dump and the matrix describe the same NVLinks"
    );
    // DGX A100 and H100: every GPU bonded to the NVSwitches with all its links.
    for (file, links) in [
        ("dgx-a100.xml", 12),
        ("dgx-a100.smi.txt", 12),
        ("dgx-h100.xml", 18),
    ] {
        let m = read(&dir.join(file)).unwrap();
        let f = fabric(&m);
        assert_eq!(f["nvswitch"].len(), 8, "{file}");
        assert!(f["nvswitch"].values().all(|&c| c == links), "{file}: {f:?}");
    }
    // MI250X-style: four links inside a package, then two and one to other packages.
    let m = read(&dir.join("mi250x.xml")).unwrap();
    let f = fabric(&m);
    assert!(m.links.iter().any(|l| l.kind == LinkKind::Xgmi3));
    for (gpu, bonds) in &f {
        let mut counts: Vec<u32> = bonds.values().copied().collect();
        counts.sort();
        assert_eq!(counts, [1, 2, 4], "{gpu}");
    }
    assert_eq!(f["gpu0"]["gpu1"], 4);
    // NICs are leaf switches named after their ports, with their speed noted.
    let m = read(&dir.join("dgx-h100.xml")).unwrap();
    assert_eq!(
        m.switches.iter().filter(|s| s.starts_with("nic-")).count(),
        8
    );
    assert!(m
        .notes
        .iter()
        .any(|n| n == "nic-mlx5_0: network port mlx5_0, 400 Gbit/s"));
}

#[test]
fn figures_are_documented_defaults_and_can_be_overridden() {
    let m = read(&repo().join("examples/import/dgx1-v100.xml")).unwrap();
    let ron = m.to_ron(&Figures::default());
    // Two NVLink2 links of 25 GB/s each way: 400 Gbit/s, two lanes.
    assert!(
        ron.contains(
            "(id: \"L20\", between: (\"gpu0\", \"gpu4\"), bandwidth_gbps: 400.0, latency_us: 0.7, lanes: 2), // nvlink2 ×2"
        ),
        "{ron}"
    );
    assert!(ron.contains("//   nvlink2: 25 GB/s, 0.7 µs\n"));
    let mut figures = Figures::default();
    figures.set("nvlink2=20,0.5").unwrap();
    let ron = m.to_ron(&figures);
    assert!(ron.contains(
        "(id: \"L20\", between: (\"gpu0\", \"gpu4\"), bandwidth_gbps: 320.0, latency_us: 0.5, lanes: 2)"
    ));
    // The documented table is the one in force.
    let docs = std::fs::read_to_string(repo().join("docs/import.md")).unwrap();
    for kind in LinkKind::ALL {
        let f = Figures::default().get(kind);
        let row = format!("| `{kind}` | {} | {} |", f.gbytes, f.latency_us);
        assert!(docs.contains(&row), "docs/import.md lists {row}");
    }
}

#[test]
fn names_from_the_input_are_escaped() {
    let text = std::fs::read_to_string(repo().join("compiler/tests/data/import/pair.xml"))
        .unwrap()
        .replace(
            "  </cpu>",
            "    <pci busid=\"0000:60:00.0\" class=\"0x020700\" link_speed=\"8.0 GT/s PCIe\" link_width=\"16\">\n      <nic>\n        <net name=\"ib&quot;0\\x\" dev=\"0\" speed=\"100000\"/>\n      </nic>\n    </pci>\n  </cpu>",
        );
    let m = import::nccl_xml::read(&text, "a \"pair\"", "test").unwrap();
    assert!(m.switches.contains(&"nic-ib\"0\\x".to_string()));
    let ron = m.to_ron(&Figures::default());
    assert!(ron.contains("name: \"a \\\"pair\\\"\","), "{ron}");
    let compiled = topoc::compile_source(&ron, &topoc::Options::default()).unwrap();
    let names: Vec<&str> = compiled
        .schedule
        .schedule()
        .machine
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert!(names.contains(&"nic-ib\"0\\x"), "{names:?}");
}

#[test]
fn every_bad_file_is_refused_with_a_pinned_diagnostic() {
    let cases = files(&repo().join("compiler/tests/data/import/bad"));
    assert!(cases.len() >= 10);
    for path in cases {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let problems = match read(&path) {
            Err(p) => p,
            Ok(_) => panic!("{file}: a bad file was imported"),
        };
        let rendered = topoc::diag::render(&file, &text, &problems, false);
        assert!(
            rendered.contains(&format!("{file}:")),
            "{file}: the diagnostic names a line:\n{rendered}"
        );
        insta::with_settings!({
            snapshot_path => "data/import/snapshots",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(stem(&path), rendered);
        });
    }
}

/// Every bad file is refused by the importer itself, in the input's words: none reaches the
/// command's final load of the topology it wrote, whose failure would be a bug.
#[test]
fn no_bad_file_reaches_the_load_check() {
    let dir = tempfile::tempdir().unwrap();
    for path in files(&repo().join("compiler/tests/data/import/bad")) {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let format = if file.ends_with(".xml") {
            "nccl-xml"
        } else {
            "nvidia-smi"
        };
        let out = dir.path().join("out.ron");
        let o = topoc(
            &[
                "import",
                format,
                path.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ],
            dir.path(),
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{file}");
        assert!(stderr.contains("nothing was written"), "{file}: {stderr}");
        assert!(!stderr.contains("please report"), "{file}: {stderr}");
        assert!(!out.exists(), "{file}");
    }
}

/// `link_width` is one of the PCIe specification's widths, and absent, empty or 0 (sysfs did
/// not say) is read as x16 as NCCL reads it; a port's speed of 0 or -1 is not known.
#[test]
fn pcie_widths_and_port_speeds_are_read_as_nccl_reads_them() {
    let pair = std::fs::read_to_string(repo().join("compiler/tests/data/import/pair.xml")).unwrap();
    let with = |width: &str, speed: &str| {
        let text = pair
            .replacen(
                "link_width=\"16\"",
                &format!("link_width=\"{width}\""),
                1,
            )
            .replace(
                "  </cpu>",
                &format!("    <pci busid=\"0000:60:00.0\" class=\"0x020700\" link_speed=\"8.0 GT/s PCIe\" link_width=\"16\">\n      <nic>\n        <net name=\"ib0\" dev=\"0\" speed=\"{speed}\"/>\n      </nic>\n    </pci>\n  </cpu>"),
            );
        import::nccl_xml::read(&text, "pair", "test")
    };
    let scale = |m: &Machine| {
        m.links
            .iter()
            .find(|l| l.b == "gpu0")
            .map(|l| l.scale)
            .unwrap()
    };
    for (width, expected) in [
        ("0", 1.0),
        ("", 1.0),
        ("1", 1.0 / 16.0),
        ("8", 0.5),
        ("12", 0.75),
        ("16", 1.0),
        ("32", 2.0),
    ] {
        let m = with(width, "100000").unwrap_or_else(|p| panic!("{width:?}: {p:?}"));
        assert_eq!(scale(&m), expected, "link_width={width:?}");
        let compiled =
            topoc::compile_source(&m.to_ron(&Figures::default()), &topoc::Options::default());
        assert!(compiled.is_ok(), "link_width={width:?}");
    }
    for width in ["abc", "-4", "3", "64", "4294967295", "16x"] {
        let problems = with(width, "100000").expect_err(width);
        assert!(
            problems[0].message.starts_with("`link_width` of <pci> is"),
            "{width}: {problems:?}"
        );
    }
    for (speed, note) in [
        ("400000", "400 Gbit/s"),
        ("0", "speed not given"),
        ("-1", "speed not given"),
    ] {
        let m = with("16", speed).unwrap();
        assert!(
            m.notes
                .contains(&format!("nic-ib0: network port ib0, {note}")),
            "{:?}",
            m.notes
        );
    }
    assert!(with("16", "fast").is_err());
}

fn topoc(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The commands of `docs/import.md`'s first `sh` block and of the README's import section run
/// as written, `topoc check` accepts what they write, and `topoc import --help` shows the first;
/// a bad input writes nothing.
#[test]
fn the_documented_commands_work() {
    let docs = std::fs::read_to_string(repo().join("docs/import.md")).unwrap();
    let block = docs
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("docs/import.md has a sh block");
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme
        .split("## Importing a real node")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("the README's import section has a sh block");
    let dir = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for line in block
        .lines()
        .chain(section.lines())
        .filter(|l| !l.trim().is_empty())
    {
        let args: Vec<String> = line
            .split_whitespace()
            .skip(1)
            .map(|a| a.replace("examples/", &format!("{}/examples/", repo().display())))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = topoc(&args, dir.path());
        assert!(
            o.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        if args[0] == "import" {
            let out = args.last().unwrap();
            let o = topoc(&["check", out], dir.path());
            assert!(o.status.success(), "check {out}");
        }
        ran += 1;
    }
    assert!(ran >= 7, "{ran}");
    let help = topoc(&["import", "--help"], dir.path());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains(block.lines().next().unwrap()),
        "the help shows the first documented command:\n{help}"
    );

    let bad = repo().join("compiler/tests/data/import/bad/smi-short-row.txt");
    let out = dir.path().join("bad.ron");
    let o = topoc(
        &[
            "import",
            "nvidia-smi",
            bad.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("smi-short-row.txt:5:1"), "{stderr}");
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert!(!out.exists());
    let o = topoc(
        &["import", "nccl-xml", "x.xml", "--figure", "nvlink9=3"],
        dir.path(),
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("`nvlink9` is not a link kind"));
}
