//! Control characters in user text, made visible.
//!
//! Names come from users' files, and a name may hold any character. Written raw, a newline
//! ends a DOT comment and lets the rest of the name be read as Graphviz statements, an escape
//! sequence moves the terminal's cursor or retitles its window, and XML 1.0 cannot carry NUL
//! or ESC at all, not even as a character reference. Every output therefore shows a control
//! character as text — ESC as `\x1b`, a C1 control as `\u{9b}` — through [`text`], so what a
//! user sees names the byte they wrote.

use std::borrow::Cow;
use std::fmt::Write as _;

/// How a control character is shown: `\x1b` for ASCII controls and DEL, `\u{9b}` for the C1
/// controls. `None` for every other character.
pub fn escape(c: char) -> Option<String> {
    if !c.is_control() {
        return None;
    }
    let code = u32::from(c);
    Some(if code < 0x80 {
        format!("\\x{code:02x}")
    } else {
        format!("\\u{{{code:x}}}")
    })
}

/// `s` with every control character shown as text, except those in `keep` (a terminal
/// message keeps its own line breaks and tabs; a one-line comment keeps none).
pub fn text<'a>(s: &'a str, keep: &[char]) -> Cow<'a, str> {
    if !s.chars().any(|c| c.is_control() && !keep.contains(&c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match escape(c) {
            Some(shown) if !keep.contains(&c) => {
                let _ = write!(out, "{shown}");
            }
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `s` for one line of text: every control character shown, line breaks included.
pub fn line(s: &str) -> Cow<'_, str> {
    text(s, &[])
}

/// `s` for a terminal message: line breaks and tabs kept, every other control character
/// shown.
pub fn message(s: &str) -> Cow<'_, str> {
    text(s, &['\n', '\t'])
}

/// `s` for a terminal that shows colours: as [`message`], but the colour sequences
/// (`ESC [ digits/semicolons m`) that the diagnostics renderer writes are kept. User text
/// inside diagnostics has already been made visible, so every raw ESC left is topoc's own.
pub fn coloured_message(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if c == '\u{1b}' {
            let body = rest[1..].strip_prefix('[').map(|after| {
                after
                    .find(|d: char| !(d.is_ascii_digit() || d == ';'))
                    .filter(|&end| after[end..].starts_with('m'))
                    .map(|end| end + 3)
            });
            if let Some(Some(len)) = body {
                out.push_str(&rest[..len]);
                rest = &rest[len..];
                continue;
            }
        }
        match escape(c) {
            Some(shown) if c != '\n' && c != '\t' => out.push_str(&shown),
            _ => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_and_the_rest_is_kept() {
        assert_eq!(
            line("a\u{1b}[2Jb\0c\u{7f}\u{9b}"),
            "a\\x1b[2Jb\\x00c\\x7f\\u{9b}"
        );
        assert_eq!(line("two\nlines"), "two\\x0alines");
        assert_eq!(message("two\nlines\t\r"), "two\nlines\t\\x0d");
        assert!(matches!(message("plain é ✓"), Cow::Borrowed("plain é ✓")));
        assert_eq!(
            coloured_message("\u{1b}[1;31merror\u{1b}[0m: `\u{1b}]0;t\u{7}` \u{1b}[2J\n"),
            "\u{1b}[1;31merror\u{1b}[0m: `\\x1b]0;t\\x07` \\x1b[2J\n"
        );
    }
}
