//! Builds the planned network with `ip` and `tc`, and takes it down again: [`Lab`] deletes
//! every namespace it created when it is dropped, on success, error or panic alike; `cleanup`
//! removes what a killed lab left behind.

use super::plan::NetPlan;
use std::process::Command;

/// The prefix of every namespace the lab creates; the launcher's process id follows it.
pub const PREFIX: &str = "tlab";

/// The MTU of every veth: large packets keep the kernel's per-packet work (which the node
/// processes' CPUs pay) small next to the shaped transfer time.
pub const MTU: u32 = 60_000;

/// A built network. Dropping it deletes its namespaces, and with them every interface, bridge,
/// queue and route inside.
#[derive(Debug)]
pub struct Lab {
    created: Vec<String>,
}

/// Runs a command, failing with the command and what it printed.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `{program}` (is iproute2 installed?): {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "`{program} {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

/// `ip -n NS ARGS…`.
fn ip(ns: &str, args: &[&str]) -> Result<(), String> {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    run("ip", &all)
}

impl Lab {
    /// Creates every namespace, veth pair, bridge, address, queue and route of `net`. On
    /// failure, what was created so far is deleted before the error returns.
    pub fn build(net: &NetPlan) -> Result<Lab, String> {
        let mut lab = Lab {
            created: Vec::new(),
        };
        for ns in &net.namespaces {
            run("ip", &["netns", "add", ns])
                .map_err(|e| format!("{e}\n(the lab needs root and network namespaces)"))?;
            lab.created.push(ns.clone());
            ip(ns, &["link", "set", "lo", "up"])?;
        }
        for (i, ns) in net.namespaces.iter_enumerated() {
            if net.switch[i] {
                ip(ns, &["link", "add", "br0", "type", "bridge"])?;
                ip(ns, &["link", "set", "br0", "up"])?;
            } else {
                let Some(address) = net.node_address[i] else {
                    continue;
                };
                // The node address is loopback's only address, so that a program that takes
                // an interface's first address (UCX over TCP) gets it.
                ip(ns, &["addr", "del", "127.0.0.1/8", "dev", "lo"])?;
                ip(ns, &["addr", "add", &format!("{address}/32"), "dev", "lo"])?;
                run(
                    "ip",
                    &[
                        "netns",
                        "exec",
                        ns,
                        "sysctl",
                        "-qw",
                        "net.ipv4.ip_forward=1",
                        "net.ipv4.conf.all.rp_filter=0",
                        "net.ipv4.conf.default.rp_filter=0",
                    ],
                )?;
            }
        }
        for (l, plan) in net.links.iter_enumerated() {
            lab.wire(net, l, plan)?;
        }
        for r in &net.routes {
            let ns = &net.namespaces[r.node];
            let Some(src) = net.node_address[r.node] else {
                continue;
            };
            // From the node address, which every node has a route back to.
            ip(
                ns,
                &[
                    "route",
                    "add",
                    &format!("{}/32", r.dest),
                    "via",
                    &r.gateway.to_string(),
                    "dev",
                    &r.dev,
                    "src",
                    &src.to_string(),
                ],
            )?;
        }
        Ok(lab)
    }

    /// One link: the veth pair between its ends' namespaces, each end a bridge port (at a
    /// switch) or an addressed interface, shaped to the link's rate in its sending direction.
    fn wire(
        &self,
        net: &NetPlan,
        l: schedule_ir::LinkId,
        plan: &super::plan::LinkPlan,
    ) -> Result<(), String> {
        let (a, b) = net.ends[l];
        let ns = [&net.namespaces[a], &net.namespaces[b]];
        run(
            "ip",
            &[
                "link",
                "add",
                &plan.ifname[0],
                "netns",
                ns[0],
                "type",
                "veth",
                "peer",
                "name",
                &plan.ifname[1],
                "netns",
                ns[1],
            ],
        )?;
        let rate = plan.rate_bits.to_string() + "bit";
        // A bucket of one millisecond of traffic, and never less than one packet; a queue of up
        // to a second, so that flows sharing a link (through a switch) are delayed, not
        // dropped into TCP's retransmission timeouts.
        let burst = (plan.rate_bits / 8 / 1000)
            .max(u64::from(MTU) + 1024)
            .to_string();
        let mtu = MTU.to_string();
        for side in 0..2 {
            let (ns, dev) = (ns[side], plan.ifname[side].as_str());
            match plan.address[side] {
                Some((ip4, len)) => ip(ns, &["addr", "add", &format!("{ip4}/{len}"), "dev", dev])?,
                None => ip(ns, &["link", "set", dev, "master", "br0"])?,
            }
            ip(ns, &["link", "set", dev, "mtu", &mtu, "up"])?;
            run(
                "tc",
                &[
                    "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate, "burst",
                    &burst, "latency", "1s",
                ],
            )?;
        }
        Ok(())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in self.created.drain(..).rev() {
            if let Err(e) = run("ip", &["netns", "del", &ns]) {
                eprintln!("warning: {e}");
            }
        }
    }
}

/// Deletes the namespaces of labs whose launcher no longer runs (or of every lab, with
/// `all`), returning their names.
pub fn cleanup(all: bool) -> Result<Vec<String>, String> {
    let output = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map_err(|e| format!("cannot run `ip netns list`: {e}"))?;
    let mut removed = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let alive = !pid.is_empty() && std::path::Path::new(&format!("/proc/{pid}")).exists();
        if all || !alive {
            run("ip", &["netns", "del", name])?;
            removed.push(name.to_string());
        }
    }
    Ok(removed)
}
