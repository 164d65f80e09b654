//! [`LinkError`]: what the link transport reports, naming node, peer, link and step.

use std::time::Duration;

/// Everything the link transport can report. Inside a phase it arrives wrapped in
/// [`Error::Transport`](crate::Error::Transport), which adds the phase, step and node.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The wiring file cannot be read or does not fit the schedule's machine.
    #[error("wiring: {detail}")]
    Wiring {
        /// What is wrong, naming the node and link.
        detail: String,
    },

    /// This node cannot listen on one of its link addresses.
    #[error("node {node} cannot listen on {address} (link {link}): {cause}")]
    Listen {
        /// This node.
        node: String,
        /// The link whose address it is.
        link: String,
        /// The address and port.
        address: String,
        /// What the system said.
        cause: String,
    },

    /// A connection to a peer could not be made before the deadline.
    #[error(
        "node {node} cannot connect to {peer} over link {link} (lane {lane}) within \
         {waited:.1?}: {cause}"
    )]
    Connect {
        /// This node.
        node: String,
        /// The peer it connects to.
        peer: String,
        /// The link the connection leaves on (the first link of the route).
        link: String,
        /// The lane of the link.
        lane: u32,
        /// How long it tried.
        waited: Duration,
        /// The peer's address and the last error the system gave.
        cause: String,
    },

    /// Some peers did not connect to this node before the deadline.
    #[error("node {node}: no connection within {waited:.1?} from {missing}")]
    AcceptTimeout {
        /// This node.
        node: String,
        /// Which connections are missing (peer, link, lane).
        missing: String,
        /// How long it waited.
        waited: Duration,
    },

    /// A connection arrived that the schedule does not call for, or from the wrong address.
    #[error("node {node}: refused a connection from {from}: {detail}")]
    Stranger {
        /// This node.
        node: String,
        /// The remote address.
        from: String,
        /// Why it was refused.
        detail: String,
    },

    /// A peer closed its connection (or it broke) while a message over it was still expected.
    #[error("node {node}: the connection from {peer} over link {link} closed before its message arrived ({cause})")]
    Closed {
        /// This node.
        node: String,
        /// The peer.
        peer: String,
        /// The link the connection arrives on.
        link: String,
        /// What the reader saw.
        cause: String,
    },

    /// An expected message did not arrive before the deadline.
    #[error("node {node}: no message from {peer} over link {link} within {waited:.1?}")]
    ReceiveTimeout {
        /// This node.
        node: String,
        /// The peer that should have sent it.
        peer: String,
        /// The link it should arrive on.
        link: String,
        /// How long the step waited.
        waited: Duration,
    },

    /// A message could not be written to its connection.
    #[error("node {node}: sending to {peer} over link {link} failed: {cause}")]
    SendFailed {
        /// This node.
        node: String,
        /// The receiver.
        peer: String,
        /// The link the message leaves on.
        link: String,
        /// What the system said.
        cause: String,
    },

    /// A message was not taken by the network before the deadline.
    #[error("node {node}: sending to {peer} over link {link} did not finish within {waited:.1?}")]
    SendTimeout {
        /// This node.
        node: String,
        /// The receiver.
        peer: String,
        /// The link the message leaves on.
        link: String,
        /// How long the step waited.
        waited: Duration,
    },

    /// A peer sent something that is not a message of this schedule: a bad header, a message
    /// larger than the phase's vector, one that is not a whole number of elements, or one on
    /// the connection of another link.
    #[error("node {node}: bad message from {peer} over link {link}: {detail}")]
    BadMessage {
        /// This node.
        node: String,
        /// The sender.
        peer: String,
        /// The link of the connection it came on.
        link: String,
        /// What is wrong with it.
        detail: String,
    },
}
