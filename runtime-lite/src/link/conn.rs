//! Setting up a node's connections — listen on its link addresses, connect to every peer it
//! sends to, accept every peer that sends to it, all before a deadline — and the threads that
//! then move bytes: a writer per outgoing connection, a reader per incoming one.

use super::bind;
use super::channels::Channel;
use super::error::LinkError;
use super::frame::{self, Header, HEADER_LEN, HELLO_LEN};
use super::wiring::AddressPlan;
use schedule_ir::Machine;
use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the reader and writer threads tell the node.
pub(crate) enum Event {
    /// A whole message arrived on incoming connection `conn`.
    Frame {
        conn: usize,
        header: Header,
        payload: Vec<u8>,
    },
    /// Incoming connection `conn` ended (the peer closed it, or it broke, or sent garbage).
    Closed { conn: usize, reason: String },
    /// Outgoing connection `conn` finished writing a message, or failed to.
    Sent {
        conn: usize,
        result: Result<(), String>,
    },
}

/// A node's open connections and their threads.
pub(crate) struct Connections {
    /// The outgoing channels, in the order of `writers`.
    pub outgoing: Vec<Channel>,
    /// The incoming channels, indexed like `Event::Frame::conn`.
    pub incoming: Vec<Channel>,
    /// One queue per outgoing connection.
    pub writers: Vec<Sender<Vec<u8>>>,
    /// Everything the threads report.
    pub events: Receiver<Event>,
    streams: Vec<TcpStream>,
    write_threads: Vec<JoinHandle<()>>,
    read_threads: Vec<JoinHandle<()>>,
}

/// What setting up needs to know.
pub(crate) struct Setup<'a> {
    pub machine: &'a Machine,
    pub plan: &'a AddressPlan,
    pub node: schedule_ir::NodeId,
    pub deadline: Instant,
    /// How long one write may block.
    pub timeout: Duration,
    /// The largest message any phase sends: a header announcing more is refused before
    /// anything is allocated.
    pub max_bytes: u64,
}

impl Setup<'_> {
    fn node_name(&self) -> String {
        self.machine.node_name(self.node)
    }

    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// Opens every connection of `outgoing` and accepts every one of `incoming`.
pub(crate) fn open(
    setup: &Setup<'_>,
    outgoing: BTreeSet<Channel>,
    incoming: BTreeSet<Channel>,
) -> Result<Connections, LinkError> {
    let listeners = listen(setup, &incoming)?;
    let started = Instant::now();
    let mut out_streams = Vec::new();
    for c in &outgoing {
        out_streams.push(connect(setup, c, started)?);
    }
    let in_streams = accept(setup, &listeners, &incoming, started)?;
    let (tx, events) = channel();
    let mut connections = Connections {
        outgoing: outgoing.into_iter().collect(),
        incoming: Vec::new(),
        writers: Vec::new(),
        events,
        streams: Vec::new(),
        write_threads: Vec::new(),
        read_threads: Vec::new(),
    };
    for (conn, stream) in out_streams.into_iter().enumerate() {
        let (queue, jobs) = channel::<Vec<u8>>();
        connections.streams.push(clone(setup, &stream)?);
        // A peer that stops reading must not hold this node for ever.
        stream
            .set_write_timeout(Some(setup.timeout))
            .map_err(|e| LinkError::Wiring {
                detail: format!("node `{}`: cannot set a timeout: {e}", setup.node_name()),
            })?;
        let tx = tx.clone();
        let thread = std::thread::spawn(move || write_loop(conn, stream, &jobs, &tx));
        connections.writers.push(queue);
        connections.write_threads.push(thread);
    }
    for (conn, (channel, stream)) in in_streams.into_iter().enumerate() {
        connections.streams.push(clone(setup, &stream)?);
        connections.incoming.push(channel);
        let tx = tx.clone();
        let max_bytes = setup.max_bytes;
        let thread = std::thread::spawn(move || read_loop(conn, stream, max_bytes, &tx));
        connections.read_threads.push(thread);
    }
    Ok(connections)
}

fn clone(setup: &Setup<'_>, stream: &TcpStream) -> Result<TcpStream, LinkError> {
    stream.try_clone().map_err(|e| LinkError::Wiring {
        detail: format!("node `{}`: cannot share a socket: {e}", setup.node_name()),
    })
}

impl Drop for Connections {
    /// Lets the writers finish what is queued (each write is bounded by the timeout), then
    /// closes every connection, so the readers see the end of their streams, and waits for
    /// the threads.
    fn drop(&mut self) {
        self.writers.clear();
        for t in self.write_threads.drain(..) {
            let _ = t.join();
        }
        for s in &self.streams {
            let _ = s.shutdown(Shutdown::Both);
        }
        for t in self.read_threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Binds a listener on each of this node's addresses that some peer connects to.
fn listen(
    setup: &Setup<'_>,
    incoming: &BTreeSet<Channel>,
) -> Result<Vec<(IpAddr, TcpListener)>, LinkError> {
    let mut listeners: Vec<(IpAddr, TcpListener)> = Vec::new();
    for c in incoming {
        let address = setup.plan.address(setup.machine, setup.node, c.last)?;
        if listeners.iter().any(|(a, _)| *a == address) {
            continue;
        }
        let socket = SocketAddr::new(address, setup.plan.port);
        let fail = |cause: std::io::Error| LinkError::Listen {
            node: setup.node_name(),
            link: setup.machine.link_name(c.last),
            address: socket.to_string(),
            cause: cause.to_string(),
        };
        let listener = TcpListener::bind(socket).map_err(fail)?;
        listener.set_nonblocking(true).map_err(fail)?;
        listeners.push((address, listener));
    }
    Ok(listeners)
}

/// Connects to the peer's address on the channel's last link, retrying until the deadline
/// (the peer may not listen yet), checks that the system sent it from this node's address on
/// the first link, and says which channel it is.
fn connect(setup: &Setup<'_>, c: &Channel, started: Instant) -> Result<TcpStream, LinkError> {
    let m = setup.machine;
    let mine = setup.plan.address(m, c.from, c.first)?;
    let peer = SocketAddr::new(setup.plan.address(m, c.to, c.last)?, setup.plan.port);
    let fail = |cause: std::io::Error| LinkError::Connect {
        node: setup.node_name(),
        peer: m.node_name(c.to),
        link: m.link_name(c.first),
        lane: c.lane,
        waited: started.elapsed(),
        cause: format!("{peer}: {cause}"),
    };
    let stream = loop {
        let wait = setup.remaining().min(Duration::from_secs(1));
        match bind::connect_from(SocketAddr::new(mine, 0), peer, wait) {
            Ok(s) => break s,
            Err(e) if setup.remaining().is_zero() => return Err(fail(e)),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let local = stream.local_addr().map_err(fail)?.ip();
    if local != mine {
        return Err(LinkError::Wiring {
            detail: format!(
                "node `{}` reached {peer} (`{}` on link `{}`) from {local}, not from its address \
                 {mine} on link `{}`: the routes do not follow the wiring",
                setup.node_name(),
                m.node_name(c.to),
                m.link_name(c.last),
                m.link_name(c.first)
            ),
        });
    }
    stream.set_nodelay(true).map_err(fail)?;
    let mut s = &stream;
    s.write_all(&frame::hello(c)).map_err(fail)?;
    Ok(stream)
}

/// Accepts connections until every channel of `incoming` has one, each checked: a hello that
/// names an expected channel not yet taken, from the sender's address on the first link, to
/// this node's address on the last.
fn accept(
    setup: &Setup<'_>,
    listeners: &[(IpAddr, TcpListener)],
    incoming: &BTreeSet<Channel>,
    started: Instant,
) -> Result<Vec<(Channel, TcpStream)>, LinkError> {
    let mut open: HashMap<Channel, TcpStream> = HashMap::new();
    while open.len() < incoming.len() {
        let mut progressed = false;
        for (_, listener) in listeners {
            match listener.accept() {
                Ok((stream, from)) => {
                    let channel = greet(setup, &stream, from, incoming, &open)?;
                    open.insert(channel, stream);
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    return Err(LinkError::Wiring {
                        detail: format!("node `{}` cannot accept: {e}", setup.node_name()),
                    })
                }
            }
        }
        if setup.remaining().is_zero() {
            let m = setup.machine;
            let missing: Vec<String> = incoming
                .iter()
                .filter(|c| !open.contains_key(c))
                .map(|c| {
                    format!(
                        "{} over link {} (lane {})",
                        m.node_name(c.from),
                        m.link_name(c.last),
                        c.lane
                    )
                })
                .collect();
            return Err(LinkError::AcceptTimeout {
                node: setup.node_name(),
                missing: missing.join(", "),
                waited: started.elapsed(),
            });
        }
        if !progressed {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let mut streams: Vec<(Channel, TcpStream)> = open.into_iter().collect();
    streams.sort_by_key(|(c, _)| *c);
    Ok(streams)
}

/// Reads and checks the hello of an accepted connection.
fn greet(
    setup: &Setup<'_>,
    stream: &TcpStream,
    from: SocketAddr,
    incoming: &BTreeSet<Channel>,
    open: &HashMap<Channel, TcpStream>,
) -> Result<Channel, LinkError> {
    let m = setup.machine;
    let refuse = |detail: String| LinkError::Stranger {
        node: setup.node_name(),
        from: from.to_string(),
        detail,
    };
    let io = |e: std::io::Error| refuse(format!("reading its hello: {e}"));
    stream.set_nonblocking(false).map_err(io)?;
    stream
        .set_read_timeout(Some(setup.remaining().max(Duration::from_millis(1))))
        .map_err(io)?;
    let mut bytes = [0u8; HELLO_LEN];
    let mut s = stream;
    s.read_exact(&mut bytes).map_err(io)?;
    stream.set_read_timeout(None).map_err(io)?;
    stream.set_nodelay(true).map_err(io)?;
    let c = frame::read_hello(&bytes).map_err(refuse)?;
    if !incoming.contains(&c) {
        return Err(refuse(format!(
            "the schedule has no transfer from `{}` over link `{}` to `{}` over link `{}` (lane {})",
            m.node_name(c.from),
            m.link_name(c.first),
            m.node_name(c.to),
            m.link_name(c.last),
            c.lane
        )));
    }
    if open.contains_key(&c) {
        return Err(refuse(format!(
            "`{}` connected twice over link `{}` (lane {})",
            m.node_name(c.from),
            m.link_name(c.first),
            c.lane
        )));
    }
    let expected = setup.plan.address(m, c.from, c.first)?;
    if from.ip() != expected {
        return Err(refuse(format!(
            "it says it is `{}` on link `{}`, whose address is {expected}",
            m.node_name(c.from),
            m.link_name(c.first)
        )));
    }
    let local = stream.local_addr().map_err(io)?.ip();
    let mine = setup.plan.address(m, c.to, c.last)?;
    if local != mine {
        return Err(refuse(format!(
            "it arrived on {local}, not on this node's address {mine} on link `{}`",
            m.link_name(c.last)
        )));
    }
    Ok(c)
}

/// Writes each queued message whole, reporting each as sent (or failed), until the queue
/// closes or a write fails.
fn write_loop(conn: usize, mut stream: TcpStream, jobs: &Receiver<Vec<u8>>, tx: &Sender<Event>) {
    for bytes in jobs {
        let result = stream.write_all(&bytes).map_err(|e| e.to_string());
        let failed = result.is_err();
        if tx.send(Event::Sent { conn, result }).is_err() || failed {
            return;
        }
    }
}

/// Reads messages until the stream ends or breaks; a header announcing more than `max_bytes`
/// ends the connection before anything is allocated.
fn read_loop(conn: usize, mut stream: TcpStream, max_bytes: u64, tx: &Sender<Event>) {
    let reason = loop {
        let mut bytes = [0u8; HEADER_LEN];
        if let Err(e) = stream.read_exact(&mut bytes) {
            break if e.kind() == std::io::ErrorKind::UnexpectedEof {
                "the peer closed it".to_string()
            } else {
                e.to_string()
            };
        }
        let header = match frame::read_header(&bytes) {
            Ok(h) => h,
            Err(e) => break e,
        };
        if header.bytes > max_bytes {
            break format!(
                "a message of {} bytes was announced; no message of the schedule exceeds {max_bytes}",
                header.bytes
            );
        }
        let mut payload = vec![0u8; usize::try_from(header.bytes).unwrap_or(0)];
        if let Err(e) = stream.read_exact(&mut payload) {
            break format!("the message was cut short: {e}");
        }
        let frame = Event::Frame {
            conn,
            header,
            payload,
        };
        if tx.send(frame).is_err() {
            return;
        }
    };
    let _ = tx.send(Event::Closed { conn, reason });
}
