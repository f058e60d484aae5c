//! How results reach the user: JSON lines with a fixed key order, a
//! readable rendering of payloads, and progress bars that only appear on a
//! terminal.

use std::io::{IsTerminal, Write};

use base64::Engine as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use weft::{Error, LogEntry, Result};

/// Standard, padded base64.
pub(crate) fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One entry as a JSON line (`read --json`, `tail --json`). The field
/// order is part of the format.
#[derive(Debug, Serialize)]
pub(crate) struct EntryLine {
    seqnum: u64,
    stream_version: u64,
    tags: Vec<String>,
    timestamp_ms: u64,
    /// The append id, `null` without one (after `timestamp_ms`, before
    /// `data`: the order is part of the format).
    id: Option<String>,
    data: String,
}

impl From<&LogEntry> for EntryLine {
    fn from(e: &LogEntry) -> Self {
        EntryLine {
            seqnum: e.seqnum,
            stream_version: e.stream_version,
            tags: e.tags.iter().map(ToString::to_string).collect(),
            timestamp_ms: e.timestamp_ms,
            id: e.append_id.clone(),
            data: base64(&e.data),
        }
    }
}

/// One entry for people: seqnum, primary stream and version, other tags,
/// payload.
pub(crate) fn entry_text(e: &LogEntry) -> String {
    let mut tags = e.tags.iter();
    let primary = tags.next().map(ToString::to_string).unwrap_or_default();
    let others: Vec<String> = tags.map(ToString::to_string).collect();
    let others = if others.is_empty() {
        String::new()
    } else {
        format!(" [{}]", others.join(", "))
    };
    let id = e
        .append_id
        .as_deref()
        .map_or(String::new(), |id| format!(" id={id:?}"));
    format!(
        "#{:<6} {primary} v{}{others}{id}  {}",
        e.seqnum,
        e.stream_version,
        payload_text(&e.data)
    )
}

/// A payload as text when it is UTF-8 without control characters
/// (truncated; `""` when empty), else its size and base64.
pub(crate) fn payload_text(data: &[u8]) -> String {
    const MAX: usize = 120;
    match std::str::from_utf8(data) {
        Ok("") => "\"\"".to_owned(),
        Ok(s) if !s.chars().any(char::is_control) => {
            let mut shown: String = s.chars().take(MAX).collect();
            if shown.len() < s.len() {
                shown.push('…');
            }
            shown
        }
        _ => {
            let b = base64(&data[..data.len().min(MAX)]);
            format!(
                "<{} bytes, base64 {b}{}>",
                data.len(),
                if data.len() > MAX { "…" } else { "" }
            )
        }
    }
}

/// Serializes `value` as one compact JSON line.
pub(crate) fn json_line(value: &impl Serialize) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| Error::internal("cannot render JSON output").with_source(e))
}

/// Writes one line to stdout. A closed pipe (`weft read ... | head`) ends
/// the process quietly, the way command line tools do.
pub(crate) fn line(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(Error::io("write to stdout", e)),
    }
}

/// Writes `value` as one JSON line to stdout.
pub(crate) fn json(value: &impl Serialize) -> Result<()> {
    line(&json_line(value)?)
}

/// True when both stdout and stderr are terminals: only then do progress
/// bars draw.
pub(crate) fn interactive() -> bool {
    std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

/// A progress bar over `len` steps on stderr, hidden unless
/// [`interactive`].
pub(crate) fn progress(len: u64, what: &str) -> ProgressBar {
    if !interactive() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({elapsed})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use weft::LogTag;

    use super::*;

    #[test]
    fn entry_lines_keep_the_documented_key_order() {
        let entry = LogEntry {
            seqnum: 7,
            stream_version: 2,
            tags: vec![
                LogTag::new("orders").unwrap(),
                "orders:o-1".parse().unwrap(),
            ],
            data: Bytes::from_static(b"hi"),
            timestamp_ms: 1700,
            append_id: Some("o-1/placed".into()),
        };
        assert_eq!(
            json_line(&EntryLine::from(&entry)).unwrap(),
            r#"{"seqnum":7,"stream_version":2,"tags":["orders","orders:o-1"],"timestamp_ms":1700,"id":"o-1/placed","data":"aGk="}"#
        );
    }

    #[test]
    fn payloads_render_as_text_or_base64() {
        assert_eq!(payload_text(b"placed"), "placed");
        assert_eq!(payload_text(b""), "\"\"");
        assert_eq!(payload_text(b"a\nb"), "<3 bytes, base64 YQpi>");
        assert_eq!(payload_text(&[0xff, 0]), "<2 bytes, base64 /wA=>");
    }
}
