//! Control characters in user text, made visible, on a terminal.
//!
//! The rule is [`schedule_ir::visible`]'s, re-exported here so that every output of topoc —
//! the verifier's messages and reports, diagnostics, pictures, schedules — shows a name the
//! same way: every control character as text (a line break as `\x0a`, ESC as `\x1b`, a C1
//! control as `\u{9b}`), so what a user sees names the byte they wrote and a name never
//! breaks a line. This module adds only what a terminal needs beyond it: messages that keep
//! topoc's own line breaks, and the colour sequences of the diagnostics renderer.

use std::borrow::Cow;

pub use schedule_ir::visible::{escape, line, text, Shown};

/// `s` for a terminal message: line breaks and tabs kept, every other control character
/// shown. The line breaks kept are topoc's own: a message that quotes a name shows the name
/// through [`line`] (or [`Shown`]) when it builds the text, since no rule applied to the
/// whole message can tell a name's line break from the message's.
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
