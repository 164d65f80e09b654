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
    }
}
