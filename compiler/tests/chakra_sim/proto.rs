//! The protobuf side of the reader: the vendored `.proto` file parsed into field numbers and
//! types, and the wire format decoded by hand. Neither uses topoc's `prost` declarations, so a
//! wrong field number there is caught here.

use std::collections::BTreeMap;

/// One field of a message: its number, its declared type, and whether it repeats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub number: u32,
    pub ty: String,
    pub repeated: bool,
}

/// Messages (fields by name, `oneof` members included) and enums (values by name).
#[derive(Debug, Default)]
pub struct Proto {
    pub messages: BTreeMap<String, BTreeMap<String, Field>>,
    pub enums: BTreeMap<String, BTreeMap<String, i64>>,
}

impl Proto {
    /// Parses the subset of proto3 the Chakra schema uses: `message`, `enum`, `oneof`,
    /// `repeated`, `//` comments.
    pub fn parse(text: &str) -> Result<Proto, String> {
        let mut proto = Proto::default();
        // The enclosing blocks: ("message" | "enum" | "oneof", name).
        let mut stack: Vec<(String, String)> = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split("//").next().unwrap_or("").trim();
            if line.is_empty() || line.starts_with("syntax") || line.starts_with("package") {
                continue;
            }
            let words: Vec<&str> = line
                .split(|c: char| c.is_whitespace() || c == ';' || c == '=')
                .filter(|w| !w.is_empty())
                .collect();
            match words.as_slice() {
                ["}"] => {
                    stack.pop().ok_or(format!("line {}: unmatched }}", n + 1))?;
                }
                [kind @ ("message" | "enum" | "oneof"), name, "{"] => {
                    if *kind == "message" {
                        proto.messages.entry(name.to_string()).or_default();
                    } else if *kind == "enum" {
                        proto.enums.entry(name.to_string()).or_default();
                    }
                    stack.push((kind.to_string(), name.to_string()));
                }
                [name, value] if stack.last().is_some_and(|(k, _)| k == "enum") => {
                    let e = &stack.last().ok_or("no enum")?.1;
                    let v = value
                        .parse()
                        .map_err(|_| format!("line {}: bad enum value", n + 1))?;
                    proto
                        .enums
                        .get_mut(e)
                        .ok_or("no enum")?
                        .insert(name.to_string(), v);
                }
                fields => {
                    let (repeated, rest) = match fields {
                        ["repeated", rest @ ..] => (true, rest),
                        rest => (false, rest),
                    };
                    let [ty, name, number] = rest else {
                        return Err(format!("line {}: cannot read `{line}`", n + 1));
                    };
                    let message = stack
                        .iter()
                        .rev()
                        .find(|(k, _)| k == "message")
                        .ok_or(format!("line {}: field outside a message", n + 1))?
                        .1
                        .clone();
                    let number = number
                        .parse()
                        .map_err(|_| format!("line {}: bad field number", n + 1))?;
                    proto.messages.entry(message).or_default().insert(
                        name.to_string(),
                        Field {
                            number,
                            ty: ty.to_string(),
                            repeated,
                        },
                    );
                }
            }
        }
        if !stack.is_empty() {
            return Err("unclosed block at the end".to_string());
        }
        Ok(proto)
    }

    /// The field of `message` with number `number`, by name.
    pub fn by_number(&self, message: &str, number: u32) -> Option<(&str, &Field)> {
        self.messages
            .get(message)?
            .iter()
            .find(|(_, f)| f.number == number)
            .map(|(n, f)| (n.as_str(), f))
    }

    /// The wire type a field of type `ty` is written with (packed repeated scalars and every
    /// message or string are length-delimited).
    pub fn wire_type(&self, ty: &str) -> u8 {
        match ty {
            "double" | "fixed64" | "sfixed64" => 1,
            "float" | "fixed32" | "sfixed32" => 5,
            "int32" | "int64" | "uint32" | "uint64" | "sint32" | "sint64" | "bool" => 0,
            t if self.enums.contains_key(t) => 0,
            _ => 2,
        }
    }
}

/// A decoded field value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(&'a [u8]),
}

impl Wire<'_> {
    pub fn wire_type(&self) -> u8 {
        match self {
            Wire::Varint(_) => 0,
            Wire::Fixed64(_) => 1,
            Wire::Len(_) => 2,
            Wire::Fixed32(_) => 5,
        }
    }
}

/// Reads a varint at `*at`, advancing; at most 10 bytes.
pub fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for i in 0..10 {
        let b = *bytes
            .get(*at)
            .ok_or(format!("varint cut off at byte {}", *at))?;
        *at += 1;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(format!("varint longer than 10 bytes before byte {}", *at))
}

/// The next `n` bytes at `*at`, advancing.
fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize, number: u32) -> Result<&'a [u8], String> {
    let end = at
        .checked_add(n)
        .filter(|&e| e <= bytes.len())
        .ok_or(format!("field {number} runs past the message"))?;
    let s = &bytes[*at..end];
    *at = end;
    Ok(s)
}

/// The fields of one message, in order.
pub fn fields(bytes: &[u8]) -> Result<Vec<(u32, Wire<'_>)>, String> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let number = u32::try_from(key >> 3).map_err(|_| "field number too large")?;
        if number == 0 {
            return Err("field number 0".to_string());
        }
        let value = match key & 7 {
            0 => Wire::Varint(varint(bytes, &mut at)?),
            1 => Wire::Fixed64(u64::from_le_bytes(
                take(bytes, &mut at, 8, number)?
                    .try_into()
                    .map_err(|_| "fixed64")?,
            )),
            5 => Wire::Fixed32(u32::from_le_bytes(
                take(bytes, &mut at, 4, number)?
                    .try_into()
                    .map_err(|_| "fixed32")?,
            )),
            2 => {
                let n = varint(bytes, &mut at)?;
                Wire::Len(take(
                    bytes,
                    &mut at,
                    usize::try_from(n).map_err(|_| "length too large")?,
                    number,
                )?)
            }
            w => {
                return Err(format!(
                    "field {number} has wire type {w}, which proto3 never writes"
                ))
            }
        };
        out.push((number, value));
    }
    Ok(out)
}

/// Splits a file into its varint-length-delimited messages.
pub fn delimited(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let n = varint(bytes, &mut at)?;
        let n = usize::try_from(n).map_err(|_| "length too large")?;
        let end = at
            .checked_add(n)
            .filter(|&e| e <= bytes.len())
            .ok_or(format!(
                "message {} claims {n} bytes but the file ends first",
                out.len()
            ))?;
        out.push(&bytes[at..end]);
        at = end;
    }
    Ok(out)
}

/// The values of a repeated varint field, packed or not.
pub fn varints(value: &Wire<'_>) -> Result<Vec<u64>, String> {
    match value {
        Wire::Varint(v) => Ok(vec![*v]),
        Wire::Len(b) => {
            let mut at = 0;
            let mut out = Vec::new();
            while at < b.len() {
                out.push(varint(b, &mut at)?);
            }
            Ok(out)
        }
        other => Err(format!("expected varints, found {other:?}")),
    }
}
