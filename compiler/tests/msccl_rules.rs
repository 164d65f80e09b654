//! The strict MSCCL checker (`msccl_sim`) enforces each rule of the runtimes' parser and
//! executor: one algorithm file that is wrong on purpose per rule, each with the exact complaint.
//! The files are a hand-written valid algorithm with one change each, so the test does not depend
//! on topoc's exporter.
#![allow(clippy::panic, clippy::unwrap_used)]

mod msccl_sim;

/// A valid two-GPU allreduce: each GPU sends the chunk the other reduces, reduces its own and
/// sends the result back, then receives the other's result; GPU 0 also copies its result to
/// scratch in a local thread block, which waits for the reducing step.
const VALID: &str = r#"<algo name="pair" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="1" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="1">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rrcs" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="2" type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="o" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="0" deps="1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rrcs" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
"#;

/// What the checker says about a text: the reader's error, else the first structural problem.
fn complaint(text: &str) -> Option<String> {
    match msccl_sim::parse(text) {
        Err(e) => Some(e),
        Ok(algo) => msccl_sim::check_structure(&algo).into_iter().next(),
    }
}

/// `VALID` with the `n`-th (0-based) occurrence of `from` replaced by `to`.
fn changed(from: &str, n: usize, to: &str) -> String {
    let (at, _) = VALID
        .match_indices(from)
        .nth(n)
        .unwrap_or_else(|| panic!("`{from}` occurs {} times", VALID.matches(from).count()));
    format!("{}{to}{}", &VALID[..at], &VALID[at + from.len()..])
}

#[test]
fn the_valid_file_passes_every_rule_and_runs() {
    assert_eq!(complaint(VALID), None);
    let algo = msccl_sim::parse(VALID).unwrap();
    for mode in [msccl_sim::Mode::OutOfPlace, msccl_sim::Mode::InPlace] {
        let outcome = msccl_sim::simulate(&algo, mode, msccl_sim::Policy::RunAhead, 1).unwrap();
        assert!(msccl_sim::check_result(&algo, &outcome).is_empty());
    }
}

/// One case per rule of the parser's layout and of the runtime's structure.
#[test]
fn each_rule_has_a_file_that_breaks_it() {
    let step = r#"<step s="0" type="cpy" srcbuf="o" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="0" deps="1" hasdep="0"/>"#;
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "no XML prolog",
            format!("<?xml version=\"1.0\"?>\n{VALID}"),
            "line 1: an XML prolog `<?…?>`, which the runtime's reader does not read",
        ),
        (
            "only spaces and newlines between elements",
            changed("  <gpu id=\"1\"", 0, "\t<gpu id=\"1\""),
            "line 12: a tab between elements; the runtime's reader skips only spaces and newlines",
        ),
        (
            "double-quoted values",
            changed("proto=\"Simple\"", 0, "proto='Simple'"),
            "line 1: the value of `proto` must be in double quotes",
        ),
        (
            "each tag's attributes on one line",
            changed(" coll=", 0, "\n coll="),
            "line 1: a tag continues on the next line; each tag's attributes must be on one line",
        ),
        (
            "single spaces between attributes",
            changed(" send=\"1\"", 0, "  send=\"1\""),
            "line 3: attributes must be separated by single spaces, with no space before `>` or `/>`",
        ),
        (
            "no leading zeros",
            changed("nchunksperloop=\"2\"", 0, "nchunksperloop=\"02\""),
            "line 1: `nchunksperloop=\"02\"` has a leading zero, which the runtime reads as an octal number",
        ),
        (
            "every attribute present",
            changed(" hasdep=\"0\"", 0, ""),
            "<step> misses the mandatory attribute `hasdep`",
        ),
        (
            "thread-block ids contiguous from 0",
            changed("<tb id=\"0\" send=\"0\"", 0, "<tb id=\"1\" send=\"0\""),
            "gpu 1 tb 1: thread-block ids must be 0, 1, … in order",
        ),
        (
            "peers are other ranks or -1",
            changed("send=\"0\" recv=\"0\"", 0, "send=\"1\" recv=\"0\""),
            "gpu 1 tb 0: send peer 1 is not another rank or -1",
        ),
        (
            "channels below 32",
            changed("nchannels=\"1\"", 0, "nchannels=\"32\"")
                .replacen("recv=\"0\" chan=\"0\"", "recv=\"0\" chan=\"32\"", 1),
            "gpu 1 tb 0: channel 32 beyond 31; the parser accepts 32 but then writes past its \
             32-entry channel array",
        ),
        (
            "nchannels within msccl-executor-nccl's 32",
            changed("nchannels=\"1\"", 0, "nchannels=\"33\""),
            "nchannels=33 outside 1..=32, the channels msccl-executor-nccl has",
        ),
        (
            "channels within nchannels",
            changed("recv=\"0\" chan=\"0\"", 0, "recv=\"0\" chan=\"1\""),
            "gpu 1 tb 0: channel 1 outside nchannels",
        ),
        (
            "one thread block per (send peer, channel)",
            changed("send=\"-1\" recv=\"-1\"", 0, "send=\"1\" recv=\"-1\""),
            "gpu 0 tb 1: a second thread block sends to 1 on channel 0",
        ),
        (
            "one thread block per (recv peer, channel)",
            changed("send=\"-1\" recv=\"-1\"", 0, "send=\"-1\" recv=\"1\""),
            "gpu 0 tb 1: a second thread block receives from 1 on channel 0",
        ),
        (
            "at most 64 steps per thread block",
            changed(
                step,
                0,
                &(0..65)
                    .map(|s| step.replace("s=\"0\"", &format!("s=\"{s}\"")))
                    .collect::<Vec<_>>()
                    .join("\n      "),
            ),
            "gpu 0 tb 1 step 64: s=64 but the runtimes stop at step 63",
        ),
        (
            "step indices in order",
            changed("<step s=\"2\"", 0, "<step s=\"3\""),
            "gpu 0 tb 0 step 2: s=3 out of order",
        ),
        (
            "cnt below 72",
            changed("cnt=\"1\"", 0, "cnt=\"72\""),
            "gpu 0 tb 0 step 0: cnt 72 outside 1..72",
        ),
        (
            "depid at most 127",
            changed("depid=\"0\"", 0, "depid=\"128\""),
            "gpu 0 tb 1 step 0: depid 128 beyond 127 (the runtime keeps it in 8 bits)",
        ),
        (
            "extra dependencies as nop steps, the last one on the step itself",
            changed(
                step,
                0,
                &format!(
                    "{}\n      {}",
                    step.replace("type=\"cpy\"", "type=\"nop\""),
                    step.replace("s=\"0\"", "s=\"1\"")
                        .replace("depid=\"0\" deps=\"1\"", "depid=\"-1\" deps=\"-1\"")
                ),
            ),
            "gpu 0 tb 1 step 1: the step after nops must carry the last dependency",
        ),
        (
            "a nop waits for something",
            changed(
                step,
                0,
                &format!(
                    "{}\n      {}",
                    step.replace("type=\"cpy\"", "type=\"nop\"")
                        .replace("depid=\"0\" deps=\"1\"", "depid=\"-1\" deps=\"-1\""),
                    step.replace("s=\"0\"", "s=\"1\"")
                ),
            ),
            "gpu 0 tb 1 step 0: a nop without a dependency",
        ),
        (
            "hasdep on every step another waits for",
            changed("hasdep=\"1\"", 0, "hasdep=\"0\""),
            "gpu 0 tb 1 step 0: waits for tb 0 step 1, which has hasdep=0",
        ),
        (
            "no waiting for a nop, which the runtime never signals",
            changed(
                "<step s=\"2\" type=\"r\" srcbuf=\"o\" srcoff=\"1\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>",
                0,
                "<step s=\"2\" type=\"r\" srcbuf=\"o\" srcoff=\"1\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n      <step s=\"3\" type=\"nop\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"0\" depid=\"1\" deps=\"0\" hasdep=\"1\"/>",
            )
            .replacen(
                "depid=\"0\" deps=\"1\" hasdep=\"0\"/>",
                "depid=\"0\" deps=\"1\" hasdep=\"1\"/>\n      <step s=\"1\" type=\"cpy\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"s\" dstoff=\"0\" cnt=\"1\" depid=\"0\" deps=\"3\" hasdep=\"0\"/>",
                1,
            ),
            "gpu 0 tb 1 step 1: waits for tb 0 step 3, a nop, which never signals",
        ),
        (
            "hasdep only where another waits",
            changed("hasdep=\"0\"", 3, "hasdep=\"1\""),
            "gpu 1 tb 0 step 0: hasdep=1 but nobody waits",
        ),
        (
            "source offsets within the buffer",
            changed("srcoff=\"1\"", 0, "srcoff=\"2\""),
            "gpu 0 tb 0 step 0: source i[2..+1] out of bounds",
        ),
        (
            "destination offsets within the buffer",
            changed("dstbuf=\"s\" dstoff=\"0\"", 0, "dstbuf=\"s\" dstoff=\"1\""),
            "gpu 0 tb 1 step 0: destination s[1..+1] out of bounds",
        ),
        (
            "every send has its receive on the FIFO",
            changed(
                "\n      <step s=\"2\" type=\"r\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>",
                0,
                "",
            ),
            "FIFO 0 → 1 channel 0: sends Some([1, 1]), receives Some([1])",
        ),
        (
            "the k-th send and the k-th receive move as many chunks",
            changed("type=\"r\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"", 0, "type=\"r\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"2\"")
                .replacen("type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"", "type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"2\"", 1),
            "FIFO 0 → 1 channel 0: sends Some([1, 1]), receives Some([1, 2])",
        ),
        (
            "no dependency cycle",
            // Both GPUs receive before they send: each waits for the other's first message.
            receive_first(),
            "dependency cycle: gpu 0 tb 0 step 0 → gpu 1 tb 0 step 0 → gpu 0 tb 0 step 0",
        ),
    ];
    let mut failures = Vec::new();
    for (rule, text, expected) in &cases {
        let got = complaint(text);
        if got.as_deref() != Some(*expected) {
            failures.push(format!(
                "{rule}:\n  expected {expected:?}\n  got      {got:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `VALID` with each GPU's first two steps swapped: the reducing receive comes first.
fn receive_first() -> String {
    let line = |s: u32, ty: &str, src: u32, dst: &str, hasdep: u32| {
        format!("<step s=\"{s}\" type=\"{ty}\" srcbuf=\"i\" srcoff=\"{src}\" {dst} cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"{hasdep}\"/>")
    };
    let mut text = VALID.to_string();
    for (g, hasdep) in [(0u32, 1u32), (1, 0)] {
        let (other, own) = (1 - g, g);
        let send = |s| {
            line(
                s,
                "s",
                other,
                &format!("dstbuf=\"i\" dstoff=\"{other}\""),
                0,
            )
        };
        let reduce = |s| {
            line(
                s,
                "rrcs",
                own,
                &format!("dstbuf=\"o\" dstoff=\"{own}\""),
                hasdep,
            )
        };
        let before = format!("{}\n      {}", send(0), reduce(1));
        assert!(text.contains(&before), "gpu {g}'s first steps");
        text = text.replacen(&before, &format!("{}\n      {}", reduce(0), send(1)), 1);
    }
    text.replacen("depid=\"0\" deps=\"1\"", "depid=\"0\" deps=\"0\"", 1)
}

/// A generated algorithm: GPU 0 has `tbs` thread blocks, each sending one chunk to its own peer
/// on channel 0; every other GPU receives it.
fn fan_out(tbs: usize) -> String {
    let n = tbs + 1;
    let mut out = format!(
        "<algo name=\"fan\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"{n}\" ngpus=\"{n}\" coll=\"allreduce\" inplace=\"1\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\">\n  <gpu id=\"0\" i_chunks=\"{n}\" o_chunks=\"{n}\" s_chunks=\"0\">\n"
    );
    for t in 0..tbs {
        out.push_str(&format!("    <tb id=\"{t}\" send=\"{}\" recv=\"-1\" chan=\"0\">\n      <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n    </tb>\n", t + 1));
    }
    out.push_str("  </gpu>\n");
    for g in 1..n {
        out.push_str(&format!("  <gpu id=\"{g}\" i_chunks=\"{n}\" o_chunks=\"{n}\" s_chunks=\"0\">\n    <tb id=\"0\" send=\"-1\" recv=\"0\" chan=\"0\">\n      <step s=\"0\" type=\"r\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n    </tb>\n  </gpu>\n"));
    }
    out.push_str("</algo>\n");
    out
}

#[test]
fn thread_blocks_per_channel_and_elements_per_rank_are_bounded() {
    assert_eq!(complaint(&fan_out(32)), None);
    assert_eq!(
        complaint(&fan_out(33)).as_deref(),
        Some("gpu 0: 33 thread blocks send on channel 0; the runtime allows 32")
    );
    // 64 more thread blocks of 63 copies: `algo`, 2 `gpu`s, 66 `tb`s and 4 + 64·63 steps = 4105
    // elements for rank 0.
    let copies: Vec<String> = (0..63)
        .map(|s| format!("<step s=\"{s}\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"s\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"))
        .collect();
    let local: String = (2..66)
        .map(|t| {
            format!(
                "    <tb id=\"{t}\" send=\"-1\" recv=\"-1\" chan=\"0\">\n      {}\n    </tb>\n",
                copies.join("\n      ")
            )
        })
        .collect();
    let big = VALID.replacen("  </gpu>\n", &format!("{local}  </gpu>\n"), 1);
    assert_eq!(
        complaint(&big).as_deref(),
        Some("gpu 0: 4105 XML elements for this rank; the reader keeps 4096")
    );
}
