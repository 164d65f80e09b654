//! The text layout the runtimes' hand-written XML reader (`msccl_parser.cc` of
//! msccl-executor-nccl, and RCCL's copy) can read, checked character by character.
//!
//! That reader is not an XML parser. It skips only spaces and newlines before an element, reads
//! the element name up to a space, `/` or `>`, then `key="value"` pairs each introduced by one
//! space, and expects `>` or `/>` right after the last value. A value must start with a double
//! quote (a single quote starts a value that runs to the next *double* quote). Numbers are read
//! with `strtol(…, 0)`, so a leading zero makes a number octal. There is no prolog handling.

/// A complaint about the layout, with the 1-based line it is on.
pub fn lint(text: &str) -> Result<(), String> {
    let bytes = text.as_bytes();
    let mut line = 1usize;
    let mut i = 0usize;
    let at = |line: usize, m: &str| format!("line {line}: {m}");
    loop {
        // Between elements: only spaces and newlines.
        while i < bytes.len() && matches!(bytes[i], b' ' | b'\n') {
            if bytes[i] == b'\n' {
                line += 1;
            }
            i += 1;
        }
        if i == bytes.len() {
            return Ok(());
        }
        match bytes[i] {
            b'<' => {}
            b'\t' => {
                return Err(at(
                    line,
                    "a tab between elements; the runtime's reader skips only spaces and newlines",
                ))
            }
            b'\r' => {
                return Err(at(
                    line,
                    "a carriage return between elements; write only spaces and newlines",
                ))
            }
            _ => {
                return Err(at(
                    line,
                    "text between elements; the runtime's reader expects `<`",
                ))
            }
        }
        i += 1;
        if bytes[i..].starts_with(b"?") {
            return Err(at(
                line,
                "an XML prolog `<?…?>`, which the runtime's reader does not read",
            ));
        }
        if bytes[i..].starts_with(b"!--") {
            return Err(at(line, "a comment; keep algorithm files free of them"));
        }
        let closing = bytes.get(i) == Some(&b'/');
        if closing {
            i += 1;
        }
        let name_start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i == name_start {
            return Err(at(line, "an element without a name"));
        }
        if closing {
            if bytes.get(i) != Some(&b'>') {
                return Err(at(
                    line,
                    "a closing tag must end right after its name with `>`",
                ));
            }
            i += 1;
            continue;
        }
        let mut count = 0;
        loop {
            match bytes.get(i) {
                Some(b'>') => {
                    i += 1;
                    break;
                }
                Some(b'/') if bytes.get(i + 1) == Some(&b'>') => {
                    i += 2;
                    break;
                }
                Some(b' ') => {
                    i += 1;
                    let key_start = i;
                    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                        i += 1;
                    }
                    if i == key_start {
                        return Err(at(line, "attributes must be separated by single spaces, with no space before `>` or `/>`"));
                    }
                    let key = &text[key_start..i];
                    match bytes.get(i) {
                        Some(b'=') => i += 1,
                        _ => return Err(at(line, &format!("attribute `{key}` must be followed by `=` and a value"))),
                    }
                    if bytes.get(i) != Some(&b'"') {
                        return Err(at(line, &format!("the value of `{key}` must be in double quotes")));
                    }
                    i += 1;
                    let value_start = i;
                    while i < bytes.len() && bytes[i] != b'"' {
                        if bytes[i] == b'\n' {
                            return Err(at(line, &format!("the value of `{key}` runs onto the next line; each tag's attributes must be on one line")));
                        }
                        i += 1;
                    }
                    if i == bytes.len() {
                        return Err(at(line, &format!("the value of `{key}` is not closed")));
                    }
                    let value = &text[value_start..i];
                    i += 1;
                    if leading_zero(value) {
                        return Err(at(line, &format!("`{key}=\"{value}\"` has a leading zero, which the runtime reads as an octal number")));
                    }
                    count += 1;
                }
                Some(b'\n') => {
                    return Err(at(line, "a tag continues on the next line; each tag's attributes must be on one line"))
                }
                Some(_) => {
                    return Err(at(line, "attributes must be separated by single spaces, with no space before `>` or `/>`"))
                }
                None => return Err(at(line, "the file ends inside a tag")),
            }
        }
        if count > 16 {
            return Err(at(
                line,
                &format!("{count} attributes; the runtime's reader keeps 16"),
            ));
        }
    }
}

/// Whether a number is written with a leading zero (`07`, `-01`): `strtol` base 0 reads octal.
fn leading_zero(value: &str) -> bool {
    let digits = value.strip_prefix('-').unwrap_or(value);
    digits.len() > 1 && digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit())
}
