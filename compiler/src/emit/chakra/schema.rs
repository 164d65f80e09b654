//! The Chakra execution-trace messages topoc writes, declared by hand for `prost`.
//!
//! They follow `compiler/proto/chakra/et_def.proto` (mlcommons/chakra's schema, vendored) field
//! for field, so that no `protoc` is needed to build topoc. Only the messages and the
//! attribute value kinds an export uses are declared; a reader that knows the whole schema
//! decodes them as that schema's messages. `compiler/tests/chakra.rs` encodes every field
//! declared here and checks its number and wire type against the vendored file.

/// `GlobalMetadata`: the first message of every trace file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GlobalMetadata {
    /// The schema version the trace follows.
    #[prost(string, tag = "1")]
    pub version: String,
    /// Free-form attributes.
    #[prost(message, repeated, tag = "2")]
    pub attr: Vec<AttributeProto>,
}

/// `AttributeProto`: a named value attached to a node.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// The attribute's name (`comm_size`, `comm_dst`, …).
    #[prost(string, tag = "1")]
    pub name: String,
    /// A description, unused by topoc.
    #[prost(string, tag = "2")]
    pub doc_string: String,
    /// The value; the schema's `oneof value`.
    #[prost(oneof = "Value", tags = "3, 7, 9, 10, 13, 27, 29")]
    pub value: Option<Value>,
}

/// The kinds of `AttributeProto.value` topoc writes.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    /// `double_val`.
    #[prost(double, tag = "3")]
    DoubleVal(f64),
    /// `int32_val`: how Chakra's feeder reads `comm_src`, `comm_dst` and `comm_tag`.
    #[prost(int32, tag = "7")]
    Int32Val(i32),
    /// `int64_val`: how Chakra's feeder reads `comm_size`, `comm_type` and `num_ops`.
    #[prost(int64, tag = "9")]
    Int64Val(i64),
    /// `int64_list`.
    #[prost(message, tag = "10")]
    Int64List(Int64List),
    /// `uint64_val`: how Chakra's feeder reads `tensor_size`.
    #[prost(uint64, tag = "13")]
    Uint64Val(u64),
    /// `bool_val`: how Chakra's feeder reads `is_cpu_op`.
    #[prost(bool, tag = "27")]
    BoolVal(bool),
    /// `string_val`.
    #[prost(string, tag = "29")]
    StringVal(String),
}

/// `Int64List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64List {
    /// The values (packed, as proto3 packs repeated scalars).
    #[prost(int64, repeated, tag = "1")]
    pub values: Vec<i64>,
}

/// `NodeType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum NodeType {
    /// `INVALID_NODE`.
    InvalidNode = 0,
    /// `METADATA_NODE`.
    MetadataNode = 1,
    /// `MEM_LOAD_NODE`.
    MemLoadNode = 2,
    /// `MEM_STORE_NODE`.
    MemStoreNode = 3,
    /// `COMP_NODE`: local work; ASTRA-sim's custom collectives take it for a reduction.
    CompNode = 4,
    /// `COMM_SEND_NODE`.
    CommSendNode = 5,
    /// `COMM_RECV_NODE`.
    CommRecvNode = 6,
    /// `COMM_COLL_NODE`.
    CommCollNode = 7,
}

/// `CollectiveCommType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum CollectiveCommType {
    /// `ALL_REDUCE`.
    AllReduce = 0,
    /// `REDUCE`.
    Reduce = 1,
    /// `ALL_GATHER`.
    AllGather = 2,
    /// `GATHER`.
    Gather = 3,
    /// `SCATTER`.
    Scatter = 4,
    /// `BROADCAST`.
    Broadcast = 5,
    /// `ALL_TO_ALL`.
    AllToAll = 6,
    /// `REDUCE_SCATTER`.
    ReduceScatter = 7,
    /// `REDUCE_SCATTER_BLOCK`.
    ReduceScatterBlock = 8,
    /// `BARRIER`.
    Barrier = 9,
}

/// `Node`: one operation of one rank's trace.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Node {
    /// Unique within the file.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// A name for people.
    #[prost(string, tag = "2")]
    pub name: String,
    /// What the node does ([`NodeType`]).
    #[prost(enumeration = "NodeType", tag = "3")]
    pub r#type: i32,
    /// Nodes that must finish first without passing data (unused by topoc).
    #[prost(uint64, repeated, tag = "4")]
    pub ctrl_deps: Vec<u64>,
    /// Nodes that must finish first: the feeder issues a node once all of these are done.
    #[prost(uint64, repeated, tag = "5")]
    pub data_deps: Vec<u64>,
    /// Start time, unused by topoc.
    #[prost(uint64, tag = "6")]
    pub start_time_micros: u64,
    /// How long a compute node runs, in microseconds (0: ASTRA-sim charges 1 ns).
    #[prost(uint64, tag = "7")]
    pub duration_micros: u64,
    /// Inputs, unused by topoc.
    #[prost(message, optional, tag = "8")]
    pub inputs: Option<IoInfo>,
    /// Outputs, unused by topoc.
    #[prost(message, optional, tag = "9")]
    pub outputs: Option<IoInfo>,
    /// Attributes (`comm_size`, `comm_src`, …).
    #[prost(message, repeated, tag = "10")]
    pub attr: Vec<AttributeProto>,
}

/// `IOInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IoInfo {
    /// Values.
    #[prost(string, tag = "1")]
    pub values: String,
    /// Shapes.
    #[prost(string, tag = "2")]
    pub shapes: String,
    /// Types.
    #[prost(string, tag = "3")]
    pub types: String,
}

impl AttributeProto {
    /// An attribute with a value.
    pub fn new(name: &str, value: Value) -> AttributeProto {
        AttributeProto {
            name: name.to_string(),
            doc_string: String::new(),
            value: Some(value),
        }
    }
}
