//! Turns a region's raw lines into clean text the detectors can match.
//!
//! Real logs wrap messages in noise (`docs/reference/oom-messages.md` §0):
//! ANSI colours, CR progress bars, CI timestamps, glog and TF prefixes,
//! docker-compose `svc  | `, vLLM `(EngineCore_DP0 pid=…) ERROR … [core.py:708]`,
//! `[rank3]:`, markdown quotes/bold/backticks, rich box drawing, and messages
//! JSON-escaped into one line. Each raw line is cleaned into one or more
//! [`Line`]s that keep their input line number and rank.
//!
//! Two joined views are built from the lines, because a message may be hard
//! wrapped either at word boundaries or in the middle of a word:
//! - `spaced`: lines joined with one space, whitespace collapsed;
//! - `tight`: lines joined with nothing, so `capac\nity` reads `capacity`.
//!
//! Detectors match `spaced` first and fall back to `tight` per field.

use std::sync::LazyLock;

use regex::Regex;

use crate::scan::RawLine;

/// One cleaned logical line.
#[derive(Debug, Clone)]
pub struct Line {
    /// The cleaned text.
    pub text: String,
    /// 1-based input line number.
    pub line: u64,
    /// Rank from a `[rankN]:` prefix.
    pub rank: Option<u32>,
}

/// A cleaned region with its two joined views.
#[derive(Debug)]
pub struct Doc {
    /// Cleaned lines.
    pub lines: Vec<Line>,
    /// Lines joined by single spaces, whitespace collapsed.
    pub spaced: String,
    /// Byte offset in `spaced` where each line starts.
    pub spaced_starts: Vec<usize>,
    /// Lines joined with no separator (trimmed at the start).
    pub tight: String,
    /// Byte offset in `tight` where each line starts.
    pub tight_starts: Vec<usize>,
}

impl Doc {
    /// Index of the line that holds byte `off` of `spaced`.
    pub fn line_index_spaced(&self, off: usize) -> usize {
        self.spaced_starts
            .partition_point(|&s| s <= off)
            .saturating_sub(1)
    }

    /// The range of `tight` that corresponds to lines `from..to` (exclusive).
    pub fn tight_range(&self, from: usize, to: usize) -> std::ops::Range<usize> {
        let start = self
            .tight_starts
            .get(from)
            .copied()
            .unwrap_or(self.tight.len());
        let end = self
            .tight_starts
            .get(to)
            .copied()
            .unwrap_or(self.tight.len());
        start..end
    }
}

static ANSI: LazyLock<Regex> = LazyLock::new(|| {
    crate::pattern::compile(
        r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]",
    )
    .expect("valid ANSI regex")
});

/// Line prefixes stripped repeatedly (a docker-compose line can carry a
/// vLLM prefix that carries a rank prefix).
static PREFIXES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // GitHub Actions / ISO-8601 timestamps: 2025-11-12T11:25:13.4961658Z
        r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s+",
        // TF / absl: 2021-03-15 17:16:57.309165: W tensorflow/core/…/bfc_allocator.cc:433]
        r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?:?\s+(?:[IWEF]\s+\S+:\d+\]\s*)?",
        // glog: W0528 07:02:44.350251   27487 file.cc:123]
        r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+\S+:\d+\]\s*",
        // docker-compose: `vllm-1  | `
        r"^[A-Za-z0-9][\w.-]*\s+\|\s?",
        // vLLM / Ray actor: (EngineCore_DP0 pid=123), (VllmWorker rank=1 pid=254)
        r"^\([\w.-]+(?: rank=\d+)? pid=\d+(?:, ip=[\d.]+)?\)\s*",
        // vLLM log level + date + [file.py:123] or file.py:123]
        r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|WARN)\s+\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s+(?:\[[\w./-]+:\d+\]|[\w./-]+:\d+\])\s?",
        // llama.cpp common log: 1.06.520.077 E
        r"^\d+\.\d{2}\.\d{3}\.\d{3} [IWEDT] ",
        // SUBPROCESS: / worker-5:
        r"^(?:SUBPROCESS|worker-\d+|stderr|stdout):\s?",
        // markdown quote
        r"^\s*>+\s?",
        // comment / heading markers
        r"^#+\s",
    ]
    .iter()
    .map(|p| crate::pattern::compile(p).expect("valid prefix regex"))
    .collect()
});

static RANK: LazyLock<Regex> = LazyLock::new(|| {
    crate::pattern::compile(r"^\s*\[(?:rank|RANK|Rank)\s?(\d+)\]:?\s?").expect("valid rank regex")
});

/// Cleans raw region lines.
pub fn clean(raw: &[RawLine]) -> Vec<Line> {
    let mut out = Vec::with_capacity(raw.len());
    for piece in raw {
        let line_no = piece.number;
        let text = String::from_utf8_lossy(&piece.bytes);
        let mut text: &str = text.trim_end_matches(['\r', '\n']);
        // A progress bar redraws with CR: only the last redraw is visible.
        if let Some((_, last)) = text.rsplit_once('\r') {
            text = last;
        }
        let mut s = if text.contains('\x1b') {
            ANSI.replace_all(text, "").into_owned()
        } else {
            text.to_string()
        };
        // JSON-escaped message: "…\nCUDA kernel errors…" inside one string.
        if s.contains("\\n") {
            s = unescape_json_like(&s);
        }
        for part in s.split('\n') {
            let (t, rank) = strip_line(part);
            out.push(Line {
                text: t,
                line: line_no,
                rank,
            });
        }
    }
    out
}

fn unescape_json_like(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.peek().copied() {
            Some('n') => {
                it.next();
                out.push('\n');
            }
            Some('t') => {
                it.next();
                out.push('\t');
            }
            Some('r') => {
                it.next();
            }
            Some('"') => {
                it.next();
                out.push('"');
            }
            Some('\\') => {
                it.next();
                out.push('\\');
            }
            Some('u') => {
                // \u001b and friends
                let hex: String = it.clone().skip(1).take(4).collect();
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    for _ in 0..5 {
                        it.next();
                    }
                    if ch != '\x1b' {
                        out.push(ch);
                    } else {
                        out.push('\x1b');
                    }
                } else {
                    out.push('\\');
                }
            }
            _ => out.push('\\'),
        }
    }
    if out.contains('\x1b') {
        ANSI.replace_all(&out, "").into_owned()
    } else {
        out
    }
}

/// Strips box drawing, markdown emphasis and known prefixes from one line.
fn strip_line(part: &str) -> (String, Option<u32>) {
    let mut s: String = part
        .chars()
        .map(|c| match c {
            // Box drawing (rich tracebacks), rich's ❱ marker, NBSP.
            '\u{2500}'..='\u{257F}' | '❱' | '\u{a0}' => ' ',
            '`' => ' ',
            _ => c,
        })
        .collect();
    if s.contains("**") {
        s = s.replace("**", "");
    }
    let mut rank = None;
    let mut cur = s.trim_start().to_string();
    for _ in 0..6 {
        let before = cur.len();
        if let Some(c) = RANK.captures(&cur) {
            rank = c.get(1).and_then(|m| m.as_str().parse().ok());
            let end = c.get(0).map_or(0, |m| m.end());
            cur = cur.get(end..).unwrap_or_default().to_string();
        }
        for p in PREFIXES.iter() {
            if let Some(m) = p.find(&cur) {
                cur = cur.get(m.end()..).unwrap_or_default().to_string();
            }
        }
        cur = cur.trim_start().to_string();
        if cur.len() == before {
            break;
        }
    }
    (cur, rank)
}

/// Builds the two joined views over cleaned lines.
pub fn build(lines: Vec<Line>) -> Doc {
    let mut spaced = String::new();
    let mut spaced_starts = Vec::with_capacity(lines.len());
    let mut tight = String::new();
    let mut tight_starts = Vec::with_capacity(lines.len());
    for l in &lines {
        if !spaced.is_empty() && !spaced.ends_with(' ') {
            spaced.push(' ');
        }
        spaced_starts.push(spaced.len());
        let mut last_space = spaced.ends_with(' ') || spaced.is_empty();
        for c in l.text.chars() {
            if c.is_whitespace() {
                if !last_space {
                    spaced.push(' ');
                    last_space = true;
                }
            } else {
                spaced.push(c);
                last_space = false;
            }
        }
        tight_starts.push(tight.len());
        tight.push_str(l.text.trim_start());
    }
    Doc {
        lines,
        spaced,
        spaced_starts,
        tight,
        tight_starts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(first: u64, lines: &[&[u8]]) -> Vec<RawLine> {
        (first..)
            .zip(lines)
            .map(|(number, b)| RawLine {
                number,
                bytes: b.to_vec(),
            })
            .collect()
    }

    fn one(s: &str) -> String {
        let lines = clean(&raw(1, &[s.as_bytes()]));
        lines
            .into_iter()
            .map(|l| l.text)
            .collect::<Vec<_>>()
            .join("|")
    }

    #[test]
    fn strips_known_prefixes() {
        assert_eq!(one("2025-11-12T11:25:13.4961658Z FAILED x"), "FAILED x");
        assert_eq!(
            one(
                "2021-03-15 17:16:57.309165: W tensorflow/core/common_runtime/bfc_allocator.cc:433] Allocator (GPU_0_bfc) ran"
            ),
            "Allocator (GPU_0_bfc) ran"
        );
        assert_eq!(
            one("vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: x"),
            "ValueError: x"
        );
        assert_eq!(
            one("(EngineCore_DP0 pid=1234) ERROR 05-12 10:11:12 [core.py:708] ValueError: y"),
            "ValueError: y"
        );
        assert_eq!(one("W0528 07:02:44.350251   27487 file.cc:12] msg"), "msg");
        assert_eq!(
            one("> **torch.OutOfMemoryError**: `x`"),
            "torch.OutOfMemoryError:  x "
        );
    }

    #[test]
    fn records_ranks() {
        let l = clean(&raw(7, &[b"[rank3]: torch.OutOfMemoryError: CUDA"]));
        assert_eq!(l[0].rank, Some(3));
        assert_eq!(l[0].text, "torch.OutOfMemoryError: CUDA");
        assert_eq!(l[0].line, 7);
    }

    #[test]
    fn removes_ansi_and_carriage_returns() {
        assert_eq!(one("\x1b[31mRuntimeError\x1b[0m: x\r"), "RuntimeError: x");
        assert_eq!(
            one(" 10%|#  \r 20%|##  \rCUDA out of memory."),
            "CUDA out of memory."
        );
    }

    #[test]
    fn unescapes_json_strings() {
        assert_eq!(
            one(r#"{"error": "CUDA error: out of memory\nCUDA kernel errors"}"#),
            "{\"error\": \"CUDA error: out of memory|CUDA kernel errors\"}"
        );
    }

    #[test]
    fn views_join_wrapped_lines() {
        let d = build(clean(&raw(1, &[b"a total capac", b"ity of 2.00   GiB"])));
        assert_eq!(d.spaced, "a total capac ity of 2.00 GiB");
        assert_eq!(d.tight, "a total capacity of 2.00   GiB");
        assert_eq!(d.line_index_spaced(14), 1);
        assert_eq!(d.tight_range(1, 2), 13..30);
    }
}
