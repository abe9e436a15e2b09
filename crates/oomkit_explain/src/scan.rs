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
//! Lines longer than [`MAX_LINE`] (a minified JSON dump, hours of `\r`
//! progress-bar redraws, a message pasted into one line) are cut into pieces
//! of at most `MAX_LINE` bytes, at a space where there is one, and every piece
//! keeps its input line number: the normalizer joins pieces the way it joins
//! hard-wrapped lines, so a message anywhere in a line of any length is found.
//!
//! Memory: three chunks (one scanned, two read ahead), the last `BEFORE` pieces, and one region capped at
//! [`MAX_REGION_BYTES`], whatever the input size. Time: one Aho-Corasick pass
//! over the input plus a per-line pass over the lines of a region.

use oomkit_core::read_ahead::ReadAhead;
use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use aho_corasick::{AhoCorasick, MatchKind};

/// Pieces kept before a hit.
pub const BEFORE: usize = 30;
/// Pieces kept after the last hit in a region.
pub const AFTER: usize = 40;
/// After an allocator dump starts, keep this many lines so the summary at its end is seen.
pub const AFTER_DUMP: usize = 4000;
/// A region never grows past this; a longer one is cut and a new one begins.
/// A TensorFlow BFC dump (the longest message, [`AFTER_DUMP`] lines of ~100
/// bytes) fits; a dense log of back-to-back errors is parsed a megabyte at a time.
pub const MAX_REGION_BYTES: usize = 1 << 20;
/// Longest piece of a line; longer lines are cut into pieces this long.
pub const MAX_LINE: usize = 64 << 10;
const CHUNK: usize = 1 << 20;
/// Marks where the scanner cut an overlong line (a piece boundary that is not
/// a line end). An ASCII control that text logs do not use; one in the input
/// is read as a cut too, which at worst joins two pieces with a space.
const CUT: u8 = 0x1E;

/// What an anchor phrase marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnchorKind {
    /// A phrase of an error message.
    Error,
    /// A memory reading users paste beside errors (crate::readings).
    Reading,
}

use AnchorKind::{Error as E, Reading as R};

/// Phrases that start or continue a region, and what each marks.
/// Case-sensitive on purpose: every variant a framework prints is listed.
///
/// Each phrase is the shortest that is still rare in ordinary logs, so one
/// covers several messages ("ut of mem" is "CUDA out of memory", "ran out of
/// memory", "Out of memory while trying to allocate", …). Phrases that routine
/// output repeats (vLLM's "GPU KV cache usage") are avoided: a hit costs a
/// region parse. The list may grow past 32: the fast search is over [`CORES`].
pub const ANCHORS: &[(&str, AnchorKind)] = &[
    ("ut of mem", E),
    ("MemoryError", E),
    ("Tried to allocate", E),
    ("total capac", E),
    ("reserved by PyTorch", E),
    ("already allocated", E),
    ("OOM when", E),
    ("esource exhausted", E),
    ("RESOURCE_EXHAUSTED", E),
    // cuBLAS's CUBLAS_STATUS_ALLOC_FAILED (cuDNN's statuses by the next).
    ("_STATUS_ALLOC_FAILED", E),
    ("CUDNN_STATUS_", E),
    ("cuDNN algorithm", E),
    ("convolution algorithm", E),
    ("INTERNAL ASSERT FAILED", E),
    ("illegal memory access", E),
    ("cache blocks", E),
    // Both vLLM KV-cache messages (v0 "… can be stored in KV cache", v1
    // "… KV cache is needed") begin "…'s max seq len (N)".
    ("max seq len", E),
    ("Dst tensor is not initialized", E),
    // TF 1.x's GPU device allocator: "Ran out of GPU memory when allocating".
    ("ut of GPU mem", E),
    ("ailed to alloc", E),
    ("nable to allocate", E),
    ("ot enough memory", E),
    ("can NOT allocate", E),
    ("t allocate memory", E),
    // (MPS/ComfyUI's "Allocation on device 0 would exceed allowed memory"
    // always ends "(out of memory)", found by "ut of mem".)
    ("enforce allocating", E),
    ("unhandled cuda error", E),
    ("allocate pinned", E),
    // llama.cpp's Vulkan backend ("vk::Device::allocateMemory:
    // ErrorOutOfDeviceMemory") and Metal backend ("Insufficient Memory
    // (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"); one core.
    ("ErrorOutOfDeviceMemory", E),
    ("ErrorOutOfMemory", E),
    // TensorRT: "Error Code 2: OutOfMemory (no further information)".
    ("OutOfMemory", E),
    // MLX's Metal error without the status code that ggml's carries
    // (`[METAL] Command buffer execution failed: Insufficient Memory`,
    // jjang-ai/vmlx#58).
    ("Insufficient Memory", E),
    // MLX's Metal allocator: "[metal::malloc] Attempting to allocate N
    // bytes which is greater than the maximum allowed buffer size".
    ("ttempting to allocate", E),
    // SGLang's start-up check in later releases: "Loaded weights leave no
    // GPU memory for the KV cache under --mem-fraction-static=0.88."
    ("for the KV cache under", E),
    // ComfyUI's console line `!!! Exception during processing !!!
    // Allocation on device ` (the cudaMallocAsync error, cut short).
    ("Allocation on device", E),
    // Memory readings users paste beside errors (crate::readings): table
    // cells of nvidia-smi (`18432MiB / 24564MiB |`, process rows `1234MiB |`)
    // and of torch.cuda.memory_summary() (`14281 MiB |`, pre-2.0 `1062 MB |`);
    // `nvidia-smi -q`'s FB section; `--query-gpu=`/`--query-compute-apps=`
    // command lines (the only mark of a `noheader` CSV); memory_stats() keys.
    ("iB |", R),
    ("MB |", R),
    ("FB Memory", R),
    ("--query-", R),
    ("_bytes.all.", R),
    // The driver line of the table's header and of `-q` (a GB10 table has
    // no `MiB |` cell: it prints `Not Supported`); the memory fields
    // of a query CSV's header, which is recognised without its command (a
    // compute-apps header needs its command or a GPU query beside it).
    ("Driver Version", R),
    ("memory.used", R),
    ("memory.total", R),
    ("memory.free", R),
    ("memory.reserved", R),
];

/// The first stage of the search: short phrases such that every anchor
/// contains one (a unit test checks it). Only a piece (line) with a core in
/// it is searched for the anchors themselves, so a core may be more common
/// than its anchors: a false hit costs one short search of one line. Most
/// cores are an anchor itself; a few stand for several ("algorithm" for
/// both cuDNN phrases, "B |" for both table cells, "ut of " for both "out
/// of memory" phrases; "mory." (a query header's `memory.used`, …) took
/// the place of `OUT_OF_MEMORY`, whose messages all say "failed to
/// allocate" too, and "Driver Version" (the table's and `-q`'s header) the
/// place of the second "out of memory" phrase: core lists with a frequent
/// core ("Memory": 27 k of the benchmark log's 2 M lines) or another first
/// bytes at that place cost up to +50 % of the search; "OutOf" for the
/// Vulkan, Metal and TensorRT errors, "_STATUS_" for cuBLAS and cuDNN,
/// "o alloc" for "Tried to allocate", "nable to allocate" and "ailed to
/// alloc"), so the list of anchors can grow.
///
/// At most 32, and in this order, because the search is aho-corasick's Teddy:
/// above 32 phrases it takes its "fat" form at half the speed, and it gives
/// phrases to its 8 buckets round-robin in list order (phrase `i` in bucket
/// `7 - i % 8`), then verifies every input position whose first three bytes
/// pass a bucket's fingerprint (per byte, a set of low and a set of high
/// nibbles, matched independently). Those candidates, not real hits, are
/// the search's cost: about 10 ns each against ~0.05 ns per byte of plain
/// scanning. The order below is the one with the fewest candidates found
/// by `cargo run --release -p oomkit_explain --example core_order -- FILES`
/// on the benchmark's two logs (bench/README.md): per 1000 bytes, 13.2 →
/// 0.001 on the progress-bar log and 29.6 → 6.0 on the mixed one, and on
/// text it was not tuned on 56 → 25 (PyTorch's Python sources), 60 → 26
/// (Keras') and 52 → 21 (this machine's dpkg/apt logs). Rerun it after
/// adding a core. With "o alloc" in place of three cores and "nsufficient
/// Mem" (MLX) and "KV cache under" (SGLang) added, the rerun gives 0.006 on
/// the progress-bar log and 6.3 on the mixed one (6.0 before).
pub const CORES: &[&str] = &[
    "algorithm",
    "B |",
    "already allocated",
    "esource exhausted",
    "OutOf",
    "KV cache under",
    "ot enough memory",
    "Dst tensor is not initialized",
    "OOM when",
    "reserved by PyTorch",
    "mory.",
    "illegal memory access",
    "MemoryError",
    "ut of ",
    "o alloc",
    "--query-",
    "allocate pinned",
    "_bytes.all.",
    "max seq len",
    "enforce allocating",
    "Driver Version",
    "_STATUS_",
    "t allocate memory",
    "total capac",
    "nsufficient Mem",
    "RESOURCE_EXHAUSTED",
    "cache blocks",
    "unhandled cuda error",
    "Allocation on device",
    "FB Memory",
    "can NOT allocate",
    "INTERNAL ASSERT FAILED",
];

/// Phrases that announce a long allocator dump whose summary comes at the end.
/// `nvidia-smi -q` too: a GPU's block is ~250 lines (driver 580), its
/// processes ~150 lines below its FB section, and the report is read whole.
const DUMP_ANCHORS: &[&str] = &[
    "Current allocation summary follows",
    "BFCAllocator dump",
    "BufferAssignment OOM Debugging",
    "NVSMI LOG",
    "FB Memory Usage",
];

/// One piece of input: a whole line, or a cut of an overlong one.
#[derive(Debug, Clone, Default)]
pub struct RawLine {
    /// 1-based input line number (every piece of a line has the line's number).
    pub number: u64,
    /// The bytes, without the line end.
    pub bytes: Vec<u8>,
}

/// A run of input pieces around one or more anchor hits.
#[derive(Debug, Default)]
pub struct Region {
    /// The pieces, in input order.
    pub lines: Vec<RawLine>,
    /// An error anchor hit in the region (not only a reading anchor): only
    /// then can it hold an error message.
    pub errors: bool,
    /// A reading anchor hit in the region: only then can it hold a reading.
    pub readings: bool,
    /// Indices in `lines` of the first and the last piece with an anchor hit.
    pub hits: Option<(usize, usize)>,
    /// A long report was announced (an allocator dump, `nvidia-smi -q`):
    /// the lines after the last hit belong to it and are to be read.
    pub long: bool,
}

/// Streams a reader and calls `on_region` for each region, in order.
pub struct Scanner {
    /// First stage: [`CORES`].
    cores: AhoCorasick,
    /// Second stage, on the pieces with a core: [`ANCHORS`].
    anchors: AhoCorasick,
    dump: AhoCorasick,
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

struct State {
    /// Line number of the next piece to be seen.
    next_line: u64,
    /// The last `BEFORE` pieces not in a region.
    recent: VecDeque<RawLine>,
    region: Option<Region>,
    region_bytes: usize,
    after_left: usize,
}

impl Scanner {
    /// Builds the automata (a few hundred microseconds; build once).
    pub fn new() -> Scanner {
        let phrases: Vec<&str> = ANCHORS.iter().map(|(p, _)| *p).collect();
        Scanner {
            cores: automaton(CORES),
            anchors: automaton(&phrases),
            dump: automaton(DUMP_ANCHORS),
        }
    }

    /// Reads `reader` to the end, calling `on_region` for every region.
    /// Returns the number of bytes read.
    ///
    /// A second thread reads ahead into recycled chunk buffers while this one
    /// scans: on a large log, copying the file out of the page cache took as
    /// long as the search itself, and the two now overlap. Nothing is copied
    /// twice: a filled buffer is handed over and handed back empty. The
    /// reading thread also counts each chunk's line ends and, while the
    /// scanning thread has a chunk waiting, searches the first half of it
    /// for [`CORES`], so the search is shared too.
    pub fn scan<R: Read + Send>(
        &self,
        reader: R,
        mut on_region: impl FnMut(Region),
    ) -> io::Result<u64> {
        let queued = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            // Page-aligned chunks, recycled (oomkit_core::read_ahead); the
            // reading thread also counts each chunk's line ends.
            let (tx, counts) = mpsc::channel::<Counted>();
            let reader = Counting {
                inner: reader,
                tx,
                cores: &self.cores,
                queued: &queued,
            };
            let mut ahead = ReadAhead::spawn(scope, reader, u64::MAX, 0, CHUNK);
            self.scan_chunks(&mut ahead, &counts, &queued, &mut on_region)
        })
    }

    /// The scanning half of [`Scanner::scan`]: takes filled chunks in order,
    /// returns each buffer for refilling.
    fn scan_chunks(
        &self,
        ahead: &mut ReadAhead,
        counts: &mpsc::Receiver<Counted>,
        queued: &AtomicUsize,
        on_region: &mut impl FnMut(Region),
    ) -> io::Result<u64> {
        let mut st = State {
            next_line: 1,
            recent: VecDeque::with_capacity(BEFORE + 1),
            region: None,
            region_bytes: 0,
            after_left: 0,
        };
        // The unfinished last line of the previous chunk (at most MAX_LINE bytes).
        let mut carry: Vec<u8> = Vec::new();
        let mut total = 0u64;
        while let Some(msg) = ahead.next_chunk() {
            let chunk = msg?;
            // Saturating: a chunk the reader has not counted (none) stays 0.
            let _ = queued.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| q.checked_sub(1));
            total = total.saturating_add(chunk.len as u64);
            let data = chunk.data();
            // The reading thread's counts of this chunk's line ends (each
            // chunk is one read, so the counts arrive in chunk order).
            let counted = counts
                .try_recv()
                .ok()
                .filter(|c| c.len == data.len())
                .map(|c| LineCounts::new(data, c.subs).with_cores(c.until, c.cores));
            // Complete lines end at the last newline; the rest waits for more data.
            if let Some(last_nl) = memchr::memrchr(b'\n', data) {
                let (lines, tail) = data.split_at(last_nl + 1);
                let mut rest = lines;
                if !carry.is_empty() {
                    // Finish the line that straddled the previous chunk, then go on in place.
                    let first_nl = memchr::memchr(b'\n', rest).unwrap_or(last_nl);
                    let (head, after) = rest.split_at(first_nl + 1);
                    carry.extend_from_slice(head);
                    let joined = std::mem::take(&mut carry);
                    self.process(&joined, &mut st, on_region, None);
                    rest = after;
                }
                self.process(rest, &mut st, on_region, counted.as_ref());
                carry.clear();
                carry.extend_from_slice(tail);
            } else {
                carry.extend_from_slice(data);
            }
            self.cut_carry(&mut carry, &mut st, on_region);
            ahead.recycle(chunk.buf);
        }
        if !carry.is_empty() {
            carry.push(b'\n');
            let last = std::mem::take(&mut carry);
            self.process(&last, &mut st, on_region, None);
        }
        if let Some(r) = st.region.take() {
            on_region(r);
        }
        Ok(total)
    }

    /// While the unfinished line is longer than a piece, hands its first
    /// piece on (cut at a space where possible) and keeps the rest.
    fn cut_carry(&self, carry: &mut Vec<u8>, st: &mut State, on_region: &mut impl FnMut(Region)) {
        while carry.len() > MAX_LINE {
            let (piece, skip) = cut_point(carry);
            let mut block: Vec<u8> = carry.drain(..piece).collect();
            carry.drain(..skip);
            block.push(CUT);
            self.process(&block, st, on_region, None);
        }
    }

    /// Handles a block of complete pieces (it ends with `\n` or [`CUT`]);
    /// `lines` holds the reading thread's counts of the chunk it lies in.
    fn process(
        &self,
        block: &[u8],
        st: &mut State,
        on_region: &mut impl FnMut(Region),
        lines: Option<&LineCounts>,
    ) {
        let owned;
        let block = if has_long_line(block) {
            owned = cut_long_lines(block);
            owned.as_slice()
        } else {
            block
        };
        let mut pos = 0;
        while let Some(rest) = block.get(pos..).filter(|r| !r.is_empty()) {
            if st.region.is_some() {
                // Inside a region: take pieces one by one until the after-window closes.
                let len = piece_end(rest).unwrap_or(rest.len());
                let piece = rest.get(..len).unwrap_or_default();
                let ends_line = rest.get(len) != Some(&CUT);
                pos = pos.saturating_add(len).saturating_add(1);
                self.push_region_piece(piece, ends_line, st, on_region);
                continue;
            }
            // Outside a region: jump to the next piece with an anchor.
            let Some(start) = self.next_anchor_piece(rest, lines) else {
                remember_tail(rest, st, lines);
                return;
            };
            let (skipped, _) = rest.split_at(start);
            remember_tail(skipped, st, lines);
            // Context before the hit takes at most a quarter of the region,
            // so pieces of overlong lines leave room for the message.
            let mut before: Vec<RawLine> = st.recent.drain(..).collect();
            let mut bytes: usize = before.iter().map(|l| l.bytes.len() + 1).sum();
            let mut drop = 0;
            while bytes > MAX_REGION_BYTES / 4 {
                bytes -= before.get(drop).map_or(bytes, |l| l.bytes.len() + 1);
                drop += 1;
            }
            before.drain(..drop.min(before.len()));
            // A long report announced just above the hit (`-q`'s banner two
            // lines above its driver line) is read to its end too.
            let long = before.iter().any(|l| self.dump.is_match(&l.bytes));
            st.region_bytes = bytes;
            st.region = Some(Region {
                lines: before,
                long,
                ..Region::default()
            });
            st.after_left = if long { AFTER_DUMP } else { AFTER };
            pos = pos.saturating_add(skipped.len());
        }
    }

    /// Start of the first piece of `block` that holds an anchor: a core
    /// hit, confirmed by the anchors on its piece alone.
    /// The reading thread's core hits (`lines`) stand in for the search
    /// over the part of the chunk it searched.
    fn next_anchor_piece(&self, block: &[u8], lines: Option<&LineCounts>) -> Option<usize> {
        let mut from = 0;
        loop {
            let at = match lines.and_then(|l| l.next_core(block, from)) {
                Some(Found::At(at)) => at,
                Some(Found::From(searched)) => {
                    let from = from.max(searched);
                    from.saturating_add(self.cores.find(block.get(from..)?)?.start())
                }
                None => from.saturating_add(self.cores.find(block.get(from..)?)?.start()),
            };
            let start = piece_start(block, at);
            let rest = block.get(start..)?;
            let len = piece_end(rest).unwrap_or(rest.len());
            if self.anchors.is_match(rest.get(..len)?) {
                return Some(start);
            }
            from = start.saturating_add(len).saturating_add(1);
        }
    }

    fn push_region_piece(
        &self,
        piece: &[u8],
        ends_line: bool,
        st: &mut State,
        on_region: &mut impl FnMut(Region),
    ) {
        let mut hit = false;
        for m in self.anchors.find_iter(piece) {
            hit = true;
            if let Some(r) = st.region.as_mut() {
                match ANCHORS.get(m.pattern().as_usize()).map(|(_, kind)| kind) {
                    Some(AnchorKind::Reading) => r.readings = true,
                    _ => r.errors = true,
                }
                if r.errors && r.readings {
                    break;
                }
            }
        }
        if hit {
            st.after_left = st.after_left.max(AFTER);
            if let Some(r) = st.region.as_mut() {
                let at = r.lines.len();
                r.hits = Some(r.hits.map_or((at, at), |(first, _)| (first, at)));
            }
        }
        if self.dump.is_match(piece) {
            st.after_left = AFTER_DUMP;
            if let Some(r) = st.region.as_mut() {
                r.long = true;
            }
        }
        if let Some(r) = st.region.as_mut() {
            r.lines.push(RawLine {
                number: st.next_line,
                bytes: piece.to_vec(),
            });
            st.region_bytes = st.region_bytes.saturating_add(piece.len() + 1);
        }
        if ends_line {
            st.next_line = st.next_line.saturating_add(1);
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

/// Line ends in `bytes`.
fn count_newlines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

/// Bytes per count the reading thread sends: a stretch of a chunk is
/// counted from these, and only its two partial ends byte by byte.
const SUB: usize = 16 << 10;

/// The share of each read that the reading thread searches for [`CORES`]
/// (to the first line end past `n * SHARE_NUM / SHARE_DEN`) when it does
/// (see [`Counting`]); the scanning thread searches the rest. A third and a
/// half were measured (bench/README.md): with the search done only while the
/// scanning thread has a chunk waiting, a half.
const SHARE_NUM: usize = 1;
const SHARE_DEN: usize = 2;

/// Core hits one read may hand over; past that the scanning thread
/// searches that read itself (memory stays bounded on a log full of hits).
const MAX_CORE_HITS: usize = 4096;

/// What the reading thread found in one read.
struct Counted {
    /// Bytes read.
    len: usize,
    /// Line ends per [`SUB`] bytes (empty: not counted, the scanning thread counts).
    subs: Vec<u32>,
    /// The first `until` bytes were searched for [`CORES`] (0: none).
    until: usize,
    /// Start of every core hit in `..until`, leftmost-first, non-overlapping.
    cores: Vec<u32>,
}

/// A reader that counts the line ends of every read on the thread that
/// reads (`ReadAhead`'s), per [`SUB`] bytes, and searches the first part of
/// it for [`CORES`], so the scanning thread does not pass over those bytes
/// a second time: it sends a [`Counted`]. The two threads then share the
/// work: one copies, counts and searches a share, the other searches the
/// rest and parses.
struct Counting<'a, R> {
    inner: R,
    tx: mpsc::Sender<Counted>,
    cores: &'a AhoCorasick,
    /// Reads not yet taken by the scanning thread.
    queued: &'a AtomicUsize,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            let data = buf.get(..n).unwrap_or_default();
            // Count and search only while the scanning thread has a chunk
            // waiting: when it is waiting for this one (reading is the slower
            // half, as on a log of progress bars once the search is fast),
            // work done here would only delay it, and it counts the line
            // ends itself (`LineCounts::count` without counts).
            let (subs, until, cores) = if self.queued.load(Ordering::Relaxed) > 0 {
                let subs = data
                    .chunks(SUB)
                    .map(|c| u32::try_from(count_newlines(c)).unwrap_or(u32::MAX))
                    .collect();
                let (until, cores) = search_share(self.cores, data);
                (subs, until, cores)
            } else {
                (Vec::new(), 0, Vec::new())
            };
            self.queued.fetch_add(1, Ordering::Relaxed);
            // The scanner may be gone (an error ended it): nothing to tell.
            let _ = self.tx.send(Counted {
                len: n,
                subs,
                until,
                cores,
            });
        }
        Ok(n)
    }
}

/// Searches `data` for cores up to just past the line end at its share
/// (no core spans a line end, so none is cut there): `(until, hits)`, or
/// `(0, [])` when there is no such line end or too many hits.
fn search_share(cores: &AhoCorasick, data: &[u8]) -> (usize, Vec<u32>) {
    let mid = data.len() / SHARE_DEN * SHARE_NUM;
    let Some(until) = data
        .get(mid..)
        .and_then(|d| memchr::memchr(b'\n', d))
        .map(|i| mid.saturating_add(i).saturating_add(1))
    else {
        return (0, Vec::new());
    };
    if u32::try_from(until).is_err() {
        return (0, Vec::new());
    }
    let mut hits = Vec::new();
    for m in cores.find_iter(data.get(..until).unwrap_or_default()) {
        if hits.len() >= MAX_CORE_HITS {
            return (0, Vec::new());
        }
        hits.push(u32::try_from(m.start()).unwrap_or(u32::MAX));
    }
    (until, hits)
}

/// Where the next core hit of a block is, from the reading thread's search.
enum Found {
    /// At this offset of the block.
    At(usize),
    /// None in the searched part: search the block from this offset.
    From(usize),
}

/// A chunk's line ends per [`SUB`] bytes, counted on the reading thread.
struct LineCounts {
    /// Address of the chunk's first byte (only compared, never read).
    start: usize,
    len: usize,
    subs: Vec<u32>,
    /// The reading thread searched `..until` for cores and found `cores`.
    until: usize,
    cores: Vec<u32>,
}

impl LineCounts {
    fn new(data: &[u8], subs: Vec<u32>) -> LineCounts {
        LineCounts {
            start: data.as_ptr() as usize,
            len: data.len(),
            subs,
            until: 0,
            cores: Vec::new(),
        }
    }

    fn with_cores(mut self, until: usize, cores: Vec<u32>) -> LineCounts {
        self.until = until.min(self.len);
        self.cores = cores;
        self
    }

    /// The first core hit at or after `block[from..]` that the reading
    /// thread's search covers; `None` when `block` is not in the chunk or
    /// starts past the searched part.
    fn next_core(&self, block: &[u8], from: usize) -> Option<Found> {
        let off = (block.as_ptr() as usize).checked_sub(self.start)?;
        let end = off.checked_add(block.len())?;
        if end > self.len {
            return None;
        }
        let lo = off.checked_add(from)?;
        if lo >= self.until {
            return None;
        }
        let i = self.cores.partition_point(|&c| (c as usize) < lo);
        match self.cores.get(i).map(|&c| c as usize) {
            Some(c) if c < end => Some(Found::At(c - off)),
            Some(_) => Some(Found::From(block.len())),
            None => Some(Found::From(self.until.saturating_sub(off))),
        }
    }

    /// Line ends in `part`: whole [`SUB`] stretches from the counts, the
    /// ends byte by byte; a slice outside the chunk (a copy), or a chunk the
    /// reading thread did not count, is counted here.
    fn count(&self, part: &[u8]) -> u64 {
        if self.subs.len() != self.len.div_ceil(SUB) {
            return count_newlines(part);
        }
        let Some(off) = (part.as_ptr() as usize).checked_sub(self.start) else {
            return count_newlines(part);
        };
        let end = off.saturating_add(part.len());
        if end > self.len {
            return count_newlines(part);
        }
        let first = off.div_ceil(SUB);
        let last = end / SUB;
        if first >= last {
            return count_newlines(part);
        }
        let head = part.get(..first * SUB - off).unwrap_or_default();
        let tail = part.get(last * SUB - off..).unwrap_or_default();
        let middle: u64 = self
            .subs
            .get(first..last)
            .map_or(0, |s| s.iter().map(|&c| u64::from(c)).sum());
        count_newlines(head) + middle + count_newlines(tail)
    }
}

/// Positions of `data` whose first three bytes pass a Teddy bucket's
/// fingerprint when the phrases are given in `order` (phrase `i` in bucket
/// `7 - i % 8`; per byte, a bucket's set of low nibbles and its set of high
/// nibbles): the candidates Teddy verifies, which is what its search costs
/// (see [`CORES`]). Used to choose `CORES`' order
/// (`examples/core_order.rs`) and by a test that keeps it good.
pub fn teddy_candidates(order: &[&str], data: &[u8]) -> usize {
    let mut lo = [[0u8; 16]; 3];
    let mut hi = [[0u8; 16]; 3];
    for (i, phrase) in order.iter().enumerate() {
        let bucket = 1u8 << (7 - i % 8);
        for ((b, l), h) in phrase.bytes().take(3).zip(lo.iter_mut()).zip(hi.iter_mut()) {
            if let (Some(l), Some(h)) = (
                l.get_mut(usize::from(b & 15)),
                h.get_mut(usize::from(b >> 4)),
            ) {
                *l |= bucket;
                *h |= bucket;
            }
        }
    }
    let pass = |j: usize, b: u8| -> u8 {
        let l = lo.get(j).and_then(|m| m.get(usize::from(b & 15))).copied();
        let h = hi.get(j).and_then(|m| m.get(usize::from(b >> 4))).copied();
        l.unwrap_or(0) & h.unwrap_or(0)
    };
    data.windows(3)
        .filter(|w| match *w {
            [a, b, c] => pass(0, *a) & pass(1, *b) & pass(2, *c) != 0,
            _ => false,
        })
        .count()
}

fn automaton(patterns: &[&str]) -> AhoCorasick {
    // Building fails only past aho-corasick's size limits, far above these
    // few literal phrases: not reachable from input (a unit test builds it).
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(patterns)
        .expect("anchor patterns are a few short literals")
}

/// Length of the first piece of `rest` (to its `\n` or [`CUT`]).
fn piece_end(rest: &[u8]) -> Option<usize> {
    memchr::memchr2(b'\n', CUT, rest)
}

/// Start of the piece that holds byte `at`.
fn piece_start(block: &[u8], at: usize) -> usize {
    block
        .get(..at)
        .and_then(|b| memchr::memrchr2(b'\n', CUT, b))
        .map_or(0, |i| i + 1)
}

/// Where to cut an overlong line: the piece's length and how many bytes to
/// drop after it (the space the cut replaces). A cut at a space is a
/// word-boundary wrap; without a space it is a mid-word wrap, kept on a
/// UTF-8 character boundary so no character is split.
fn cut_point(line: &[u8]) -> (usize, usize) {
    let window = line.get(..MAX_LINE).unwrap_or(line);
    let floor = MAX_LINE / 2;
    if let Some(sp) = memchr::memrchr(b' ', window).filter(|&i| i >= floor) {
        return (sp, 1);
    }
    let mut at = window.len();
    // Back up over UTF-8 continuation bytes (at most three).
    while at > floor && line.get(at).is_some_and(|b| b & 0xC0 == 0x80) {
        at -= 1;
    }
    (at, 0)
}

/// Whether any line of the block is longer than a piece.
fn has_long_line(block: &[u8]) -> bool {
    if block.len() <= MAX_LINE {
        return false;
    }
    // A line longer than MAX_LINE covers a whole aligned half-window without
    // a line end; finding a line end in each half-window reads only its
    // first line, so ordinary blocks cost almost nothing here.
    let half = MAX_LINE / 2;
    if block
        .chunks(half)
        .all(|w| w.len() < half || memchr::memchr2(b'\n', CUT, w).is_some())
    {
        return false;
    }
    let mut last = 0;
    for i in memchr::memchr2_iter(b'\n', CUT, block) {
        if i - last > MAX_LINE {
            return true;
        }
        last = i + 1;
    }
    block.len() - last > MAX_LINE
}

/// A copy of the block with every overlong line cut into pieces.
fn cut_long_lines(block: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(block.len() + block.len() / MAX_LINE + 1);
    let mut rest = block;
    while !rest.is_empty() {
        let len = piece_end(rest).map_or(rest.len(), |i| i + 1);
        let (mut line, after) = rest.split_at(len);
        while line.len() > MAX_LINE + 1 {
            let (piece, skip) = cut_point(line);
            let (head, tail) = line.split_at(piece);
            out.extend_from_slice(head);
            out.push(CUT);
            line = tail.get(skip..).unwrap_or_default();
        }
        out.extend_from_slice(line);
        rest = after;
    }
    out
}

/// Counts the line ends of `block` (complete pieces; from the reading
/// thread's counts where it has them) and keeps its last `BEFORE` pieces in
/// `recent`, numbered.
fn remember_tail(block: &[u8], st: &mut State, lines: Option<&LineCounts>) {
    if block.is_empty() {
        return;
    }
    let newlines = lines.map_or_else(|| count_newlines(block), |l| l.count(block));
    let end_line = st.next_line.saturating_add(newlines);
    // Walk back over at most BEFORE pieces; the common case touches only the block's end.
    let mut pieces: Vec<RawLine> = Vec::with_capacity(BEFORE);
    let mut end = block.len();
    let mut number = end_line;
    while pieces.len() < BEFORE && end > 0 {
        let body = block.get(..end).unwrap_or_default();
        let (terminator, content) = body
            .split_last()
            .map_or((None, body), |(t, c)| (Some(*t), c));
        if terminator == Some(b'\n') {
            number = number.saturating_sub(1);
        }
        let start = memchr::memrchr2(b'\n', CUT, content).map_or(0, |i| i + 1);
        pieces.push(RawLine {
            number,
            bytes: content.get(start..).unwrap_or_default().to_vec(),
        });
        end = start;
    }
    if pieces.len() >= BEFORE || end > 0 {
        st.recent.clear();
    }
    st.recent.extend(pieces.into_iter().rev());
    while st.recent.len() > BEFORE {
        st.recent.pop_front();
    }
    st.next_line = end_line;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions(input: &str) -> Vec<(u64, Vec<String>)> {
        numbered(input.as_bytes())
            .into_iter()
            .map(|r| (r[0].0, r.into_iter().map(|(_, l)| l).collect()))
            .collect()
    }

    fn numbered(input: &[u8]) -> Vec<Vec<(u64, String)>> {
        let mut out = Vec::new();
        Scanner::new()
            .scan(input, |r| {
                out.push(
                    r.lines
                        .iter()
                        .map(|l| (l.number, String::from_utf8_lossy(&l.bytes).into_owned()))
                        .collect(),
                )
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
    fn line_counts_from_the_reading_thread_match_a_direct_count() {
        let data: Vec<u8> = (0..200_000u32)
            .map(|i| {
                if i % 7 == 0 || i % 97 == 3 {
                    b'\n'
                } else {
                    b'x'
                }
            })
            .collect();
        let subs = data
            .chunks(SUB)
            .map(|c| u32::try_from(count_newlines(c)).unwrap())
            .collect();
        let counts = LineCounts::new(&data, subs);
        for (a, b) in [
            (0, 200_000),
            (5, 17),
            (1000, 70_000),
            (16_384, 32_768),
            (16_383, 49_153),
            (199_999, 200_000),
        ] {
            let part = &data[a..b];
            assert_eq!(counts.count(part), count_newlines(part), "{a}..{b}");
        }
        let copy = data[10..50_000].to_vec();
        assert_eq!(counts.count(&copy), count_newlines(&copy));
        // A chunk the reading thread did not count is counted directly.
        let uncounted = LineCounts::new(&data, Vec::new());
        assert_eq!(
            uncounted.count(&data[5..70_000]),
            count_newlines(&data[5..70_000])
        );
    }

    #[test]
    fn core_hits_from_the_reading_thread_find_the_same_pieces() {
        // Lines with a core but no anchor ("ut of " alone), with an anchor,
        // and ordinary ones, on both sides of the reading thread's share.
        let mut data = Vec::new();
        for i in 0..6000u32 {
            let line = match i % 37 {
                0 => format!("{i} ran out of patience, out of time\n"),
                5 if i % 3 == 0 => format!("{i} CUDA out of memory. Tried to allocate 2.00 GiB\n"),
                9 => format!("{i} |  18432MiB / 24564MiB |\n"),
                _ => format!("{i} step loss 0.5 |#####     | 50%\n"),
            };
            data.extend_from_slice(line.as_bytes());
        }
        let scanner = Scanner::new();
        let (until, hits) = search_share(&scanner.cores, &data);
        assert!(until > 0 && until < data.len() && !hits.is_empty());
        let subs = data
            .chunks(SUB)
            .map(|c| u32::try_from(count_newlines(c)).unwrap())
            .collect();
        let counts = LineCounts::new(&data, subs).with_cores(until, hits);
        // Every block that starts at a line start, in the chunk and in a copy.
        let starts: Vec<usize> = std::iter::once(0)
            .chain(memchr::memchr_iter(b'\n', &data).map(|i| i + 1))
            .filter(|&i| i < data.len())
            .step_by(7)
            .collect();
        for &a in &starts {
            let block = &data[a..];
            let direct = scanner.next_anchor_piece(block, None);
            assert_eq!(
                scanner.next_anchor_piece(block, Some(&counts)),
                direct,
                "{a}"
            );
            let copy = block.to_vec();
            assert_eq!(
                scanner.next_anchor_piece(&copy, Some(&counts)),
                direct,
                "{a}"
            );
            let end = (a + 3000).min(data.len());
            let end = a + memchr::memrchr(b'\n', &data[a..end]).map_or(end - a, |i| i + 1);
            let part = &data[a..end];
            assert_eq!(
                scanner.next_anchor_piece(part, Some(&counts)),
                scanner.next_anchor_piece(part, None),
                "{a}..{end}"
            );
        }
        // Too many hits: the reading thread hands none over.
        let dense = "ut of ".repeat(MAX_CORE_HITS + 1) + "\n";
        assert_eq!(search_share(&scanner.cores, dense.as_bytes()).0, 0);
    }

    #[test]
    fn the_core_order_keeps_teddy_candidates_rare_on_ordinary_lines() {
        // Lines of the kinds that fill training logs (the benchmark's
        // generator prints them); with the order `core_order` chose, a
        // progress bar makes no candidate at all (the order before made 13
        // per 1000 bytes of progress bars).
        let bars = "Epoch 0:  11%|\u{2588}\u{258f}        | 115/1000 [00:03<00:25, 34.55it/s, loss=4.332]\r".repeat(200);
        assert_eq!(teddy_candidates(CORES, bars.as_bytes()), 0);
        let mixed =
            "2025-06-03 10:00:01,234 - INFO - trainer - epoch 1 step 120 loss 2.3411 lr 1.2e-05\n\
                     node-07:41878:41878 [5] NCCL INFO cudaDriverVersion 12040\n\
                     [rank3]: memory_allocated=12.3GB max_memory_allocated=14.1GB\n\
                     {'eval_loss': 1.873, 'eval_runtime': 12.5, 'epoch': 0.42}\n"
                .repeat(50);
        let rate = |order: &[&str]| teddy_candidates(order, mixed.as_bytes()) * 1000 / mixed.len();
        // On these lines, a third of what the same cores make in sorted
        // order (26 against 92 per 1000 bytes when this was written).
        let mut sorted = CORES.to_vec();
        sorted.sort_unstable();
        assert!(
            rate(CORES) * 3 <= rate(&sorted),
            "{} per 1000 bytes against {} sorted: rerun examples/core_order.rs",
            rate(CORES),
            rate(&sorted)
        );
        // The count is Teddy's: a phrase's own first bytes are a candidate.
        assert_eq!(teddy_candidates(&["out"], b"xx out xx"), 1);
    }

    #[test]
    fn cores_stay_within_the_fast_search_and_cover_every_anchor() {
        assert!(CORES.len() <= 32, "{} cores", CORES.len());
        for (anchor, _) in ANCHORS {
            assert!(
                CORES.iter().any(|c| anchor.contains(c)),
                "no core in anchor {anchor:?}"
            );
        }
        // A core that no anchor holds would only cost time.
        for core in CORES {
            assert!(
                ANCHORS.iter().any(|(a, _)| a.contains(core)),
                "core {core:?} is in no anchor"
            );
        }
    }

    #[test]
    fn a_core_without_its_anchor_opens_no_region() {
        // "algorithm", "B |" and "OutOf" are cores; lines with only the
        // core are skipped, and the search goes on to the real anchor.
        let plain = "sort algorithm: radix\n| 12 GB | 3 |\nvk::ErrorOutOfDateKHR\n";
        assert!(regions(plain).is_empty());
        let r = regions(&format!(
            "{plain}Unable to find a valid cuDNN algorithm to run convolution\n"
        ));
        assert_eq!(r.len(), 1);
        assert!(r[0].1.iter().any(|l| l.contains("cuDNN algorithm")));
        let mut kinds = Vec::new();
        let smi = "| 0 RTX | 18432MiB / 24564MiB |\n";
        Scanner::new()
            .scan(smi.as_bytes(), |r| kinds.push((r.errors, r.readings)))
            .unwrap();
        assert_eq!(kinds, vec![(false, true)]);
    }

    #[test]
    fn a_core_hit_on_a_line_before_the_anchor_keeps_line_numbers() {
        // Three core-only lines, then the message on line 4.
        let log = "algorithm a\nalgorithm b\nx B | y\nggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory\n";
        let r = numbered(log.as_bytes());
        assert_eq!(r.len(), 1);
        let hit = r[0].iter().find(|(_, l)| l.contains("ErrorOutOf")).unwrap();
        assert_eq!(hit.0, 4);
        assert_eq!(r[0][0], (1, "algorithm a".to_string()));
    }

    #[test]
    fn regions_say_which_anchors_they_hold() {
        let mut kinds = Vec::new();
        let log = "x\n| 30% 45C P2 75W / 450W | 18432MiB / 24564MiB | 85% Default |\n";
        Scanner::new()
            .scan(log.as_bytes(), |r| kinds.push((r.errors, r.readings)))
            .unwrap();
        assert_eq!(kinds, vec![(false, true)]);
        kinds.clear();
        let both = format!("{log}CUDA out of memory. Tried to allocate 2.00 GiB\n");
        Scanner::new()
            .scan(both.as_bytes(), |r| kinds.push((r.errors, r.readings)))
            .unwrap();
        assert_eq!(kinds, vec![(true, true)]);
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

    #[test]
    fn a_message_deep_in_an_overlong_line_is_found_with_its_line_number() {
        for (len, sep) in [(300 << 10, " "), (3 << 20, ""), (200 << 10, "é")] {
            let mut s = String::from("line one\n");
            while s.len() < len {
                s.push('x');
                s.push_str(sep);
            }
            s.push_str(" RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\nlast\n");
            let r = numbered(s.as_bytes());
            assert_eq!(r.len(), 1, "len {len}");
            let hit = r[0]
                .iter()
                .find(|(_, l)| l.contains("Tried to allocate"))
                .expect("the message is in a piece");
            assert_eq!(hit.0, 2);
            assert!(r[0].iter().all(|(_, l)| l.len() <= MAX_LINE));
            assert_eq!(r[0].last().unwrap(), &(3, "last".to_string()));
        }
    }

    #[test]
    fn an_endless_line_is_read_in_bounded_pieces() {
        // 8 MiB without a newline, then a message: no piece over MAX_LINE.
        let mut s = vec![b'a'; 8 << 20];
        s.extend_from_slice(b" CUDA out of memory. Tried to allocate 1.00 GiB");
        let r = numbered(&s);
        assert_eq!(r.len(), 1);
        assert!(r[0].iter().all(|(n, l)| *n == 1 && l.len() <= MAX_LINE));
        assert!(r[0].iter().any(|(_, l)| l.contains("Tried to allocate")));
    }

    #[test]
    fn line_numbers_after_long_lines_stay_right() {
        let long = "y ".repeat(100 << 10);
        let mut s = String::new();
        for i in 1..=50 {
            if i % 10 == 0 {
                s.push_str(&long);
                s.push('\n');
            } else {
                s.push_str(&format!("step {i}\n"));
            }
        }
        s.push_str("CUDA out of memory. Tried to allocate 1.00 GiB\n");
        let r = numbered(s.as_bytes());
        let hit = r[0].iter().find(|(_, l)| l.contains("Tried")).unwrap();
        assert_eq!(hit.0, 51);
        let before = r[0].iter().find(|(_, l)| l == "step 49").unwrap();
        assert_eq!(before.0, 49);
    }
}
