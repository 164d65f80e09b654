//! Control characters in user text, made visible: the one rule every output of topoc uses.
//!
//! Names come from users' files, and a name may hold any character. Written raw, a line break
//! or a tab inside a name lets the name forge a line of a report (`all good: schedule
//! verified`) or break a line-oriented format, an escape sequence moves the terminal's cursor
//! or retitles its window, and XML 1.0 cannot carry NUL or ESC at all, not even as a character
//! reference. So wherever a name is shown, every control character in it — line breaks and
//! tabs included — is shown as text: a line break as `\x0a`, ESC as `\x1b`, a C1 control as
//! `\u{9b}`. What a user sees then names the byte they wrote, and a name always stays on one
//! line.
//!
//! The rule lives here, in the IR crate, because the verifier's messages and reports quote
//! names too; the compiler's `visible` module builds its terminal helpers on it.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

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
/// message keeps its own line breaks and tabs).
pub fn text<'a>(s: &'a str, keep: &[char]) -> Cow<'a, str> {
    if !s.chars().any(|c| c.is_control() && !keep.contains(&c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match escape(c) {
            Some(shown) if !keep.contains(&c) => out.push_str(&shown),
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `s` as a name is shown: on one line, every control character shown as text, line breaks
/// and tabs included.
pub fn line(s: &str) -> Cow<'_, str> {
    text(s, &[])
}

/// A name to format: displays as [`line`] shows it, without building a string first.
#[derive(Clone, Copy, Debug)]
pub struct Shown<'a>(pub &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match escape(c) {
                Some(shown) => f.write_str(&shown)?,
                None => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_is_shown_and_the_rest_is_kept() {
        assert_eq!(
            line("a\u{1b}[2Jb\0c\u{7f}\u{9b}"),
            "a\\x1b[2Jb\\x00c\\x7f\\u{9b}"
        );
        assert_eq!(line("two\nlines\tand\r"), "two\\x0alines\\x09and\\x0d");
        assert_eq!(text("two\nlines\t\r", &['\n', '\t']), "two\nlines\t\\x0d");
        assert!(matches!(line("plain é ✓"), Cow::Borrowed("plain é ✓")));
        assert_eq!(Shown("N0\nok\t<&>\"").to_string(), "N0\\x0aok\\x09<&>\"");
    }
}
