//! Reading one rank's trace file the way Chakra's feeder and ASTRA-sim's custom collectives do,
//! and checking what they rely on.

use super::proto::{self, Proto, Wire};
use std::collections::{BTreeMap, BTreeSet};

/// An attribute value, by the `oneof` member it was written in.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// `int32_val`, `int64_val`, `uint64_val` … : the member's name and the value.
    Int(String, i128),
    Bool(bool),
    Str(String),
    IntList(Vec<i64>),
    Other(String),
}

/// One decoded node.
#[derive(Clone, Debug)]
pub struct EtNode {
    pub id: u64,
    pub name: String,
    /// The `NodeType` value's name (`COMM_SEND_NODE`, …).
    pub ty: String,
    pub data_deps: Vec<u64>,
    pub ctrl_deps: Vec<u64>,
    pub duration_micros: u64,
    pub attrs: BTreeMap<String, Attr>,
}

impl EtNode {
    /// An integer attribute written in the `oneof` member `member`, as the feeder reads it
    /// (`attr.int32_val()` reads 0 from a value written in any other member).
    pub fn int(&self, name: &str, member: &str) -> Result<i128, String> {
        match self.attrs.get(name) {
            Some(Attr::Int(m, v)) if m == member => Ok(*v),
            Some(other) => Err(format!(
                "node {} ({}): attribute `{name}` is {other:?}, but the feeder reads it as \
                 {member}",
                self.id, self.name
            )),
            None => Err(format!(
                "node {} ({}): {} without attribute `{name}`",
                self.id, self.name, self.ty
            )),
        }
    }

    pub fn string(&self, name: &str) -> Result<&str, String> {
        match self.attrs.get(name) {
            Some(Attr::Str(s)) => Ok(s),
            other => Err(format!("node {}: attribute `{name}` is {other:?}", self.id)),
        }
    }

    pub fn list(&self, name: &str) -> Result<&[i64], String> {
        match self.attrs.get(name) {
            Some(Attr::IntList(v)) => Ok(v),
            other => Err(format!("node {}: attribute `{name}` is {other:?}", self.id)),
        }
    }
}

fn sign(ty: &str, raw: u64) -> i128 {
    match ty {
        "int32" => i128::from(raw as u32 as i32),
        "int64" => i128::from(raw as i64),
        _ => i128::from(raw),
    }
}

fn utf8(b: &[u8], what: &str) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
}

fn attribute(proto: &Proto, bytes: &[u8]) -> Result<(String, Attr), String> {
    let mut name = None;
    let mut value = None;
    for (number, wire) in proto::fields(bytes)? {
        let (field, f) = proto
            .by_number("AttributeProto", number)
            .ok_or(format!("AttributeProto has no field {number}"))?;
        if wire.wire_type() != proto.wire_type(&f.ty) {
            return Err(format!("AttributeProto.{field} has the wrong wire type"));
        }
        let v = match (field, &wire) {
            ("name", Wire::Len(b)) => {
                name = Some(utf8(b, "an attribute name")?);
                continue;
            }
            ("doc_string", _) => continue,
            ("bool_val", Wire::Varint(v)) => Attr::Bool(*v != 0),
            ("string_val", Wire::Len(b)) => Attr::Str(utf8(b, "a string attribute")?),
            ("int64_list", Wire::Len(b)) => {
                let mut values = Vec::new();
                for (n, w) in proto::fields(b)? {
                    if n != proto.messages["Int64List"]["values"].number {
                        return Err("Int64List has an unknown field".to_string());
                    }
                    values.extend(proto::varints(&w)?.into_iter().map(|v| v as i64));
                }
                Attr::IntList(values)
            }
            (member, Wire::Varint(v)) => Attr::Int(member.to_string(), sign(&f.ty, *v)),
            (member, _) => Attr::Other(member.to_string()),
        };
        if value.replace(v).is_some() {
            return Err("an attribute with two values".to_string());
        }
    }
    let name = name.ok_or("an attribute without a name")?;
    let value = value.ok_or(format!("attribute `{name}` has no value"))?;
    Ok((name, value))
}

fn node(proto: &Proto, bytes: &[u8]) -> Result<EtNode, String> {
    let mut n = EtNode {
        id: 0,
        name: String::new(),
        ty: String::new(),
        data_deps: Vec::new(),
        ctrl_deps: Vec::new(),
        duration_micros: 0,
        attrs: BTreeMap::new(),
    };
    let mut ty = 0;
    for (number, wire) in proto::fields(bytes)? {
        let (field, f) = proto
            .by_number("Node", number)
            .ok_or(format!("Node has no field {number}"))?;
        let packed_ok = f.repeated && matches!(wire, Wire::Len(_));
        if wire.wire_type() != proto.wire_type(&f.ty) && !packed_ok {
            return Err(format!("Node.{field} has the wrong wire type"));
        }
        match (field, &wire) {
            ("id", Wire::Varint(v)) => n.id = *v,
            ("name", Wire::Len(b)) => n.name = utf8(b, "a node name")?,
            ("type", Wire::Varint(v)) => ty = *v as i64,
            ("data_deps", w) => n.data_deps.extend(proto::varints(w)?),
            ("ctrl_deps", w) => n.ctrl_deps.extend(proto::varints(w)?),
            ("duration_micros", Wire::Varint(v)) => n.duration_micros = *v,
            ("attr", Wire::Len(b)) => {
                let (name, value) = attribute(proto, b)?;
                if n.attrs.insert(name.clone(), value).is_some() {
                    return Err(format!("attribute `{name}` twice"));
                }
            }
            _ => {}
        }
    }
    n.ty = proto.enums["NodeType"]
        .iter()
        .find(|(_, &v)| v == ty)
        .map(|(k, _)| k.clone())
        .ok_or(format!("node {}: NodeType {ty} does not exist", n.id))?;
    Ok(n)
}

/// Reads one rank's file: a `GlobalMetadata` with a version, then nodes with unique ids, each
/// depending only on nodes before it, each of a type ASTRA-sim's custom collectives issue
/// (another type is never issued, so the collective would never end), with the attributes the
/// feeder reads for it, in the members it reads them from.
pub fn read_rank(
    proto: &Proto,
    bytes: &[u8],
    rank: u32,
    ranks: u32,
) -> Result<Vec<EtNode>, String> {
    let messages = proto::delimited(bytes)?;
    let (first, rest) = messages.split_first().ok_or("the file is empty")?;
    let mut version = None;
    for (number, wire) in proto::fields(first)? {
        match (proto.by_number("GlobalMetadata", number), wire) {
            (Some(("version", _)), Wire::Len(b)) => version = Some(utf8(b, "the version")?),
            (Some(("attr", _)), Wire::Len(_)) => {}
            _ => return Err("the first message is not a GlobalMetadata".to_string()),
        }
    }
    if version.as_deref().is_none_or(str::is_empty) {
        return Err("the GlobalMetadata has no version".to_string());
    }
    let mut seen = BTreeSet::new();
    let mut nodes = Vec::new();
    for bytes in rest {
        let n = node(proto, bytes)?;
        for d in &n.data_deps {
            if !seen.contains(d) {
                return Err(format!(
                    "node {} depends on {d}, which is not an earlier node of the file",
                    n.id
                ));
            }
        }
        if !n.ctrl_deps.is_empty() {
            return Err(format!("node {} has control dependencies", n.id));
        }
        if !seen.insert(n.id) {
            return Err(format!("node id {} twice", n.id));
        }
        if let Some(a) = n.attrs.get("is_cpu_op") {
            if !matches!(a, Attr::Bool(_)) {
                return Err(format!("node {}: is_cpu_op is not a bool_val", n.id));
            }
        }
        let peer = |name: &str| -> Result<u32, String> {
            let v = n.int(name, "int32_val")?;
            u32::try_from(v)
                .ok()
                .filter(|&p| p < ranks && p != rank)
                .ok_or(format!("node {}: {name} {v} is not another rank", n.id))
        };
        match n.ty.as_str() {
            "COMM_SEND_NODE" => {
                peer("comm_dst")?;
                if n.int("comm_src", "int32_val")? != i128::from(rank) {
                    return Err(format!("node {}: comm_src is not the sender", n.id));
                }
            }
            "COMM_RECV_NODE" => {
                peer("comm_src")?;
                if n.int("comm_dst", "int32_val")? != i128::from(rank) {
                    return Err(format!("node {}: comm_dst is not the receiver", n.id));
                }
            }
            "COMP_NODE" => {}
            other => return Err(format!("node {}: ASTRA-sim never issues a {other}", n.id)),
        }
        if n.ty != "COMP_NODE" {
            if n.int("comm_size", "int64_val")? < 0 {
                return Err(format!("node {}: negative comm_size", n.id));
            }
            if n.int("comm_tag", "int32_val")? < 0 {
                return Err(format!("node {}: negative comm_tag", n.id));
            }
        }
        nodes.push(n);
    }
    Ok(nodes)
}
