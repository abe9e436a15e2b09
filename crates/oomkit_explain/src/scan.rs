//! Streaming scan: find the few regions of a log worth parsing, in bounded memory.
//!
//! A 1 GB training log holds a handful of errors among millions of ordinary
//! lines. The scanner reads fixed-size chunks, looks for anchor phrases with
//! one Aho-Corasick automaton (SIMD prefilter, so ordinary text flows at
//! memory speed), counts newlines with `memchr` only to keep line numbers,
//! and hands out a [`Region`] of whole lines around each hit: up to
//! [`BEFORE`] lines before (tracebacks precede Python's message) and
//! [`AFTER`] lines after the last hit. Anchors are several phrases of each
//! message (`out of memory`, `Tried to allocate`, `total capacity`, …) so a
//! message hard-wrapped in the middle of one phrase is still found by another.
//!
//! Memory: one chunk, the last `BEFORE` lines, and one region capped at
//! [`MAX_REGION_BYTES`], whatever the input size.

use std::io::{self, Read};

use aho_corasick::{AhoCorasick, MatchKind};

/// Lines kept before a hit.
pub const BEFORE: usize = 30;
/// Lines kept after the last hit in a region.
pub const AFTER: usize = 40;
/// After an allocator dump starts, keep this many lines so the summary at its end is seen.
pub const AFTER_DUMP: usize = 4000;
/// A region never grows past this; a longer one is cut and a new one begins.
pub const MAX_REGION_BYTES: usize = 4 << 20;
/// Longest line kept whole; the rest of a longer line is dropped.
const MAX_LINE: usize = 64 << 10;
const CHUNK: usize = 1 << 20;

/// Phrases that start or continue a region. Case-sensitive on purpose: every
/// variant a framework prints is listed, which keeps the automaton fast.
pub const ANCHORS: &[&str] = &[
    // At most 32 phrases: above that aho-corasick leaves its fastest (Teddy)
    // search, which measured 5.5 GB/s at 32 phrases and 4.2 GB/s at 41 here.
    // Each phrase is the shortest that is still rare in ordinary logs, so one
    // covers several messages ("out of mem" covers "CUDA out of memory",
    // "ran out of memory", "cudaMalloc failed: out of memory", …). Phrases that
    // routine output repeats (vLLM's "GPU KV cache usage") are avoided: a hit
    // costs a region parse.
    "out of mem",
    "Out of mem",
    "MemoryError",
    "OUT_OF_MEMORY",
    "Tried to allocate",
    "total capac",
    "reserved by PyTorch",
    "already allocated",
    "OOM when",
    "esource exhausted",
    "RESOURCE_EXHAUSTED",
    "ALLOC_FAILED",
    "CUDNN_STATUS_",
    "cuDNN algorithm",
    "convolution algorithm",
    "INTERNAL ASSERT FAILED",
    "illegal memory access",
    "cache blocks",
    "KV cache is needed",
    "stored in KV cache",
    "Dst tensor is not initialized",
    "ailed to alloc",
    "nable to allocate",
    "ot enough memory",
    "can NOT allocate",
    "t allocate memory",
    "Allocation on device",
    "enforce allocating",
    "unhandled cuda error",
    "allocate pinned",
];

/// Phrases that announce a long allocator dump whose summary comes at the end.
const DUMP_ANCHORS: &[&str] = &[
    "Current allocation summary follows",
    "BFCAllocator dump",
    "BufferAssignment OOM Debugging",
];

/// A run of whole input lines around one or more anchor hits.
#[derive(Debug, Default)]
pub struct Region {
    /// 1-based number of the first line.
    pub first_line: u64,
    /// The lines, without their `\n`.
    pub lines: Vec<Vec<u8>>,
}

/// Streams a reader and calls `on_region` for each region, in order.
pub struct Scanner {
    anchors: AhoCorasick,
    dump: AhoCorasick,
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

struct State {
    /// Line number of the next line to be seen.
    next_line: u64,
    /// The last `BEFORE` lines not in a region.
    recent: std::collections::VecDeque<Vec<u8>>,
    region: Option<Region>,
    region_bytes: usize,
    after_left: usize,
}

impl Scanner {
    /// Builds the automata (a few hundred microseconds; build once).
    pub fn new() -> Scanner {
        let build = |pats: &[&str]| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(pats)
                .expect("anchor patterns are valid literals")
        };
        Scanner {
            anchors: build(ANCHORS),
            dump: build(DUMP_ANCHORS),
        }
    }

    /// Reads `reader` to the end, calling `on_region` for every region.
    /// Returns the number of bytes read.
    pub fn scan<R: Read>(
        &self,
        mut reader: R,
        mut on_region: impl FnMut(Region),
    ) -> io::Result<u64> {
        let mut st = State {
            next_line: 1,
            recent: std::collections::VecDeque::with_capacity(BEFORE + 1),
            region: None,
            region_bytes: 0,
            after_left: 0,
        };
        let mut buf = vec![0u8; CHUNK];
        let mut carry: Vec<u8> = Vec::new();
        let mut total = 0u64;
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            total += n as u64;
            let data = &buf[..n];
            // Complete lines end at the last newline; the rest waits for more data.
            let Some(last_nl) = memchr::memrchr(b'\n', data) else {
                append_capped(&mut carry, data);
                continue;
            };
            let mut rest = &data[..=last_nl];
            if !carry.is_empty() {
                // Finish the line that straddled the previous chunk, then go on in place.
                let first_nl = memchr::memchr(b'\n', rest).unwrap_or(last_nl);
                append_capped(&mut carry, &rest[..first_nl]);
                carry.push(b'\n');
                let joined = std::mem::take(&mut carry);
                self.process(&joined, &mut st, &mut on_region);
                rest = &rest[first_nl + 1..];
            }
            self.process(rest, &mut st, &mut on_region);
            carry.clear();
            carry.extend_from_slice(&data[last_nl + 1..]);
        }
        if !carry.is_empty() {
            carry.push(b'\n');
            let last = std::mem::take(&mut carry);
            self.process(&last, &mut st, &mut on_region);
        }
        if let Some(r) = st.region.take() {
            on_region(r);
        }
        Ok(total)
    }

    /// Handles a block of complete lines (ends with `\n`).
    fn process(&self, block: &[u8], st: &mut State, on_region: &mut impl FnMut(Region)) {
        let mut pos = 0;
        while pos < block.len() {
            if st.region.is_some() {
                // Inside a region: take lines one by one until the after-window closes.
                let end = memchr::memchr(b'\n', &block[pos..]).map_or(block.len(), |i| pos + i);
                let line = &block[pos..end];
                pos = end + 1;
                self.push_region_line(line, st, on_region);
                continue;
            }
            // Outside a region: jump to the next hit.
            let Some(m) = self.anchors.find(&block[pos..]) else {
                let rest = &block[pos..];
                st.next_line += memchr::memchr_iter(b'\n', rest).count() as u64;
                remember_tail(rest, &mut st.recent);
                return;
            };
            let hit = pos + m.start();
            let line_start = memchr::memrchr(b'\n', &block[pos..hit]).map_or(pos, |i| pos + i + 1);
            let skipped = &block[pos..line_start];
            st.next_line += memchr::memchr_iter(b'\n', skipped).count() as u64;
            remember_tail(skipped, &mut st.recent);
            let before: Vec<Vec<u8>> = st.recent.drain(..).collect();
            st.region = Some(Region {
                first_line: st.next_line - before.len() as u64,
                lines: Vec::new(),
            });
            st.region_bytes = 0;
            if let Some(r) = st.region.as_mut() {
                for l in before {
                    st.region_bytes += l.len() + 1;
                    r.lines.push(l);
                }
            }
            st.after_left = AFTER;
            pos = line_start;
        }
    }

    fn push_region_line(&self, line: &[u8], st: &mut State, on_region: &mut impl FnMut(Region)) {
        let line = &line[..line.len().min(MAX_LINE)];
        st.next_line += 1;
        let hit = self.anchors.is_match(line);
        if hit {
            st.after_left = st.after_left.max(AFTER);
        }
        if self.dump.is_match(line) {
            st.after_left = AFTER_DUMP;
        }
        if let Some(r) = st.region.as_mut() {
            r.lines.push(line.to_vec());
            st.region_bytes += line.len() + 1;
        }
        st.after_left = st.after_left.saturating_sub(1);
        if st.after_left == 0 || st.region_bytes >= MAX_REGION_BYTES {
            if let Some(r) = st.region.take() {
                on_region(r);
            }
            st.recent.clear();
        }
    }
}

fn append_capped(carry: &mut Vec<u8>, data: &[u8]) {
    // A "line" longer than the cap (a binary blob, a minified JSON dump) is
    // truncated rather than buffered without bound.
    let room = (MAX_LINE * 4).saturating_sub(carry.len());
    carry.extend_from_slice(&data[..data.len().min(room)]);
}

/// Keeps the last `BEFORE` lines of `block` (complete lines) in `recent`.
fn remember_tail(block: &[u8], recent: &mut std::collections::VecDeque<Vec<u8>>) {
    if block.is_empty() {
        return;
    }
    // Walk back over at most BEFORE lines; the common case touches only the block's end.
    let body = block.strip_suffix(b"\n").unwrap_or(block);
    let mut starts = Vec::with_capacity(BEFORE);
    let mut end = body.len();
    let mut found_all = false;
    while starts.len() < BEFORE {
        match memchr::memrchr(b'\n', &body[..end]) {
            Some(i) => {
                starts.push((i + 1, end));
                end = i;
            }
            None => {
                starts.push((0, end));
                found_all = true;
                break;
            }
        }
    }
    if !found_all || starts.len() >= BEFORE {
        recent.clear();
    }
    for &(s, e) in starts.iter().rev() {
        recent.push_back(body[s..e.min(s + MAX_LINE)].to_vec());
    }
    while recent.len() > BEFORE {
        recent.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions(input: &str) -> Vec<(u64, Vec<String>)> {
        let mut out = Vec::new();
        Scanner::new()
            .scan(input.as_bytes(), |r| {
                out.push((
                    r.first_line,
                    r.lines
                        .iter()
                        .map(|l| String::from_utf8_lossy(l).into_owned())
                        .collect(),
                ))
            })
            .unwrap();
        out
    }

    #[test]
    fn finds_a_region_with_context_and_correct_line_numbers() {
        let mut s = String::new();
        for i in 1..=100 {
            s.push_str(&format!("step {i} loss 0.5\n"));
        }
        s.push_str("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
        for i in 1..=100 {
            s.push_str(&format!("after {i}\n"));
        }
        let r = regions(&s);
        assert_eq!(r.len(), 1);
        let (first, lines) = &r[0];
        assert_eq!(*first, 101 - BEFORE as u64);
        assert_eq!(
            lines[BEFORE],
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
        );
        assert_eq!(lines.len(), BEFORE + AFTER);
    }

    #[test]
    fn anchors_stay_within_the_fast_search() {
        assert!(ANCHORS.len() <= 32, "{} anchors", ANCHORS.len());
    }

    #[test]
    fn plain_logs_give_no_region() {
        assert!(regions("epoch 1\nepoch 2\n").is_empty());
        assert!(regions("").is_empty());
    }

    #[test]
    fn last_line_without_newline_is_scanned() {
        let r = regions("x\nCUDA out of memory.");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, 1);
        assert_eq!(r[0].1.last().unwrap(), "CUDA out of memory.");
    }

    #[test]
    fn regions_survive_chunk_boundaries() {
        let filler = "a".repeat(1000) + "\n";
        let mut s = String::new();
        while s.len() < CHUNK - 10 {
            s.push_str(&filler);
        }
        s.push_str("xxxxxxxxxxxxxxxxxxxx CUDA out of memory. Tried to allocate 1.00 GiB\n");
        let lines_before = s.matches('\n').count() as u64;
        let r = regions(&s);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0 + r[0].1.len() as u64 - 1, lines_before);
    }
}
