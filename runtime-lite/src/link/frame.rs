//! The bytes on a connection: a hello naming the channel, then messages, each a fixed header
//! and its elements in little-endian order.
//!
//! ```text
//! hello   (28 bytes): "TPLH" version from to first_link last_link lane     (u32 LE each)
//! message (40 bytes): "TPLM" phase step link from to first_chunk 0 bytes   (u32 LE, bytes u64)
//!                     followed by `bytes` bytes of elements
//! ```

use super::channels::Channel;
use crate::transport::MessageKey;
use schedule_ir::{ChunkId, LinkId, NodeId, StepId};

const HELLO_MAGIC: [u8; 4] = *b"TPLH";
const MESSAGE_MAGIC: [u8; 4] = *b"TPLM";
/// The format version, in every hello: two builds that frame differently refuse each other.
const VERSION: u32 = 1;

/// Size of a hello.
pub(crate) const HELLO_LEN: usize = 28;
/// Size of a message header.
pub(crate) const HEADER_LEN: usize = 40;

/// Reads the little-endian `u32` at `at` (0 past the end; callers pass fixed-size arrays).
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut le = [0u8; 4];
    if let Some(src) = bytes.get(at..at + 4) {
        le.copy_from_slice(src);
    }
    u32::from_le_bytes(le)
}

fn id(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// The hello a connection starts with.
pub(crate) fn hello(c: &Channel) -> [u8; HELLO_LEN] {
    let mut out = [0u8; HELLO_LEN];
    out[..4].copy_from_slice(&HELLO_MAGIC);
    let fields = [
        VERSION,
        id(c.from.index()),
        id(c.to.index()),
        id(c.first.index()),
        id(c.last.index()),
        c.lane,
    ];
    for (i, f) in fields.iter().enumerate() {
        out[4 + 4 * i..8 + 4 * i].copy_from_slice(&f.to_le_bytes());
    }
    out
}

/// The channel a hello names, or what is wrong with it.
pub(crate) fn read_hello(bytes: &[u8; HELLO_LEN]) -> Result<Channel, String> {
    if bytes[..4] != HELLO_MAGIC {
        return Err("it does not start with a topoc link hello".into());
    }
    let version = u32_at(bytes, 4);
    if version != VERSION {
        return Err(format!("it speaks version {version}, this node {VERSION}"));
    }
    let at = |i: usize| u32_at(bytes, 8 + 4 * i) as usize;
    Ok(Channel {
        from: NodeId::new(at(0)),
        to: NodeId::new(at(1)),
        first: LinkId::new(at(2)),
        last: LinkId::new(at(3)),
        lane: u32_at(bytes, 24),
    })
}

/// A message header as read from the wire.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    pub phase: u32,
    pub key: MessageKey,
    pub bytes: u64,
}

/// Writes the header of a message of `bytes` bytes into `out`.
pub(crate) fn write_header(phase: u32, key: &MessageKey, bytes: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&MESSAGE_MAGIC);
    for f in [
        phase,
        id(key.step.index()),
        id(key.link.index()),
        id(key.from.index()),
        id(key.to.index()),
        id(key.first_chunk.index()),
        0,
    ] {
        out.extend_from_slice(&f.to_le_bytes());
    }
    out.extend_from_slice(&bytes.to_le_bytes());
}

/// The header in `bytes`, or what is wrong with it.
pub(crate) fn read_header(bytes: &[u8; HEADER_LEN]) -> Result<Header, String> {
    if bytes[..4] != MESSAGE_MAGIC {
        return Err("the stream does not continue with a message header".into());
    }
    let at = |i: usize| u32_at(bytes, 4 + 4 * i);
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[32..40]);
    Ok(Header {
        phase: at(0),
        key: MessageKey {
            step: StepId::new(at(1) as usize),
            link: LinkId::new(at(2) as usize),
            from: NodeId::new(at(3) as usize),
            to: NodeId::new(at(4) as usize),
            first_chunk: ChunkId::new(at(5) as usize),
        },
        bytes: u64::from_le_bytes(len),
    })
}
