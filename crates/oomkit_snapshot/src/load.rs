//! Pickle values → the typed [`Snapshot`]: segments and blocks, trace events,
//! annotations, allocator settings. Unknown keys are ignored and optional ones
//! may be missing (`time_us`, `allocator_settings`, `frames` on `snapshot`
//! events); legacy blocks carry `history` instead of `frames`, and a top-level
//! list is the 1.13 form (segments only) — as `torch/cuda/_memory_viz.py`
//! (`_read`) and MemoryViz.js accept them (`docs/reference/memory-snapshots.md` §2.2).
//!
//! Trace events are converted while the pickle is decoded ([`pickle::Hook`]),
//! so a snapshot with millions of events never holds them as generic values.
//! Stacks are interned: a frames list shared through the pickle memo becomes
//! one [`StackId`] however many entries refer to it.

use std::collections::HashMap;
use std::io::{self, Read};
use std::rc::Rc;

use crate::Error;
use crate::pairs::Pairs;
use crate::pickle::{self, FIELDS, Hook, Raw, Value};

/// Index into [`Snapshot::stacks`].
pub type StackId = u32;

/// One Python or C++ frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// File name as recorded (`??` for unknown C++ frames).
    pub filename: Rc<str>,
    /// Line number (`None` when absent or not an integer in u64; u64::MAX is kept as is).
    pub line: Option<u64>,
    /// Function name.
    pub name: Rc<str>,
}

/// Block states as the allocator emits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockState {
    /// `active_allocated`: a live tensor.
    Allocated,
    /// `active_pending_free` (emitted) or `active_awaiting_free` (documented).
    PendingFree,
    /// `inactive`: free space inside the segment.
    Inactive,
    /// Anything else.
    Other,
}

/// A block: a contiguous sub-range of a segment.
#[derive(Debug, Clone)]
pub struct Block {
    /// Address (computed from the segment when absent, as MemoryViz does).
    pub address: u64,
    /// Rounded size.
    pub size: u64,
    /// Requested (unrounded) size; `size` when not recorded.
    pub requested: u64,
    /// State.
    pub state: BlockState,
    /// Allocation stack.
    pub stack: Option<StackId>,
}

/// A segment: one cudaMalloc (or one expandable mapping).
#[derive(Debug, Clone)]
pub struct Segment {
    /// Device index.
    pub device: i64,
    /// Base address.
    pub address: u64,
    /// Size in bytes.
    pub total_size: u64,
    /// `allocated_size` as recorded, if any.
    pub allocated_size: Option<u64>,
    /// `segment_type`: "large" or "small" (None when absent).
    pub large: Option<bool>,
    /// `is_expandable`.
    pub expandable: bool,
    /// Blocks in address order.
    pub blocks: Vec<Block>,
}

/// Trace actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A tensor allocation (size = requested bytes).
    Alloc,
    /// Free requested (memory may still be in use by a stream).
    FreeRequested,
    /// Free completed: the bytes are back in the cache.
    FreeCompleted,
    /// cudaMalloc of a segment.
    SegmentAlloc,
    /// cudaFree of a segment.
    SegmentFree,
    /// Expandable segment mapped more pages.
    SegmentMap,
    /// Expandable segment unmapped pages.
    SegmentUnmap,
    /// An allocation failed: out of memory.
    Oom,
    /// `snapshot` marker.
    Snapshot,
    /// Anything else (`annotate`, newer actions).
    Other,
}

impl Action {
    fn parse(s: &str) -> Action {
        match s {
            "alloc" => Action::Alloc,
            "free_requested" => Action::FreeRequested,
            "free_completed" => Action::FreeCompleted,
            "segment_alloc" => Action::SegmentAlloc,
            "segment_free" => Action::SegmentFree,
            "segment_map" => Action::SegmentMap,
            "segment_unmap" => Action::SegmentUnmap,
            "oom" => Action::Oom,
            "snapshot" => Action::Snapshot,
            _ => Action::Other,
        }
    }

    /// Every action, in code order ([`Action::code`]).
    const ALL: [Action; 10] = [
        Action::Alloc,
        Action::FreeRequested,
        Action::FreeCompleted,
        Action::SegmentAlloc,
        Action::SegmentFree,
        Action::SegmentMap,
        Action::SegmentUnmap,
        Action::Oom,
        Action::Snapshot,
        Action::Other,
    ];

    /// A small number for the decoder's value cache ([`pickle::Hook::code`]).
    fn code(self) -> u32 {
        // Fieldless enum: its discriminant.
        self as u32
    }

    fn from_code(c: u32) -> Option<Action> {
        Action::ALL.get(usize::try_from(c).ok()?).copied()
    }
}

/// One trace entry, compact (32 bytes).
#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// Address; for `oom`, the `device_free` bytes.
    pub addr: u64,
    /// Size in bytes (requested bytes for alloc/free).
    pub size: u64,
    /// `time_us`, `i64::MIN` when absent.
    pub time_us: i64,
    /// Stack, `u32::MAX` when absent.
    pub stack: u32,
    /// Action.
    pub action: Action,
}

impl Event {
    /// The stack, if recorded.
    pub fn stack(&self) -> Option<StackId> {
        (self.stack != u32::MAX).then_some(self.stack)
    }

    /// `time_us`, if recorded.
    pub fn time(&self) -> Option<i64> {
        (self.time_us != i64::MIN).then_some(self.time_us)
    }
}

#[cfg(test)]
impl Event {
    /// An event without time or stack (for tests).
    pub(crate) fn bare(action: Action, addr: u64, size: u64) -> Event {
        Event {
            addr,
            size,
            time_us: i64::MIN,
            stack: u32::MAX,
            action,
        }
    }
}

/// A `record_function` range boundary from `external_annotations`.
#[derive(Debug, Clone)]
pub struct Annotation {
    /// START (true) or END.
    pub start: bool,
    /// Range name.
    pub name: Rc<str>,
    /// Device, when recorded.
    pub device: Option<i64>,
    /// `time_us`.
    pub time_us: Option<i64>,
}

/// A decoded memory snapshot.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// All segments (every device).
    pub segments: Vec<Segment>,
    /// `device_traces`: one list per device index.
    pub traces: Vec<Vec<Event>>,
    /// `external_annotations`.
    pub annotations: Vec<Annotation>,
    /// `allocator_settings.expandable_segments`, when recorded.
    pub expandable_setting: Option<bool>,
    /// Frames, indexed by the ids in [`Snapshot::stacks`].
    pub frames: Vec<Frame>,
    /// Stacks: frame ids, innermost first.
    pub stacks: Vec<Vec<u32>>,
    /// The address replay of each trace (index as in `traces`), done by the
    /// loader while it decodes; `None` (or missing) makes the analysis do it.
    pub pairs: Vec<Option<Pairs>>,
}

/// Interns frames and stacks by the identity of the shared pickle objects:
/// a frame dict or frames list, interned once, carries its id in its tag
/// ([`pickle::Node::tag`]), so each trace entry costs no lookup.
#[derive(Default)]
struct Interner {
    frames: Vec<Frame>,
    stacks: Vec<Vec<u32>>,
}

impl Interner {
    fn frame(&mut self, v: &Value) -> Option<u32> {
        let Value::Dict(d) = v else { return None };
        if let Some(id) = d.tag() {
            return Some(id);
        }
        let items = d.items.borrow();
        let text = |k: &str| -> Rc<str> {
            match get(&items, k) {
                Some(Value::Str(s)) => Rc::from(s.as_str()),
                _ => Rc::from(""),
            }
        };
        let frame = Frame {
            filename: text("filename"),
            line: get(&items, "line").and_then(as_u64),
            name: text("name"),
        };
        drop(items);
        let id = u32::try_from(self.frames.len()).ok()?;
        self.frames.push(frame);
        d.set_tag(id);
        Some(id)
    }

    fn stack(&mut self, v: &Value) -> Option<StackId> {
        let (Value::List(l) | Value::Tuple(l)) = v else {
            return None;
        };
        if let Some(id) = l.tag() {
            return Some(id);
        }
        let items: Vec<Value> = l.items.borrow().clone();
        let ids: Vec<u32> = items.iter().filter_map(|f| self.frame(f)).collect();
        let id = u32::try_from(self.stacks.len())
            .ok()
            .filter(|&i| i != u32::MAX)?;
        self.stacks.push(ids);
        l.set_tag(id);
        Some(id)
    }
}

/// A list's events and their address replay, built by [`Store`].
#[derive(Default)]
struct Trace {
    events: Vec<Event>,
    pairs: Pairs,
}

/// Events in decode order, in batches, for the list they were appended to.
type Batch = (usize, Vec<Event>);

/// Events are stored, and replayed ([`Pairs`]), on a second thread while the
/// decoder reads on: the decoder only builds each 32-byte [`Event`] and hands
/// them over in batches (the store's appends, page faults and address map
/// were a fifth of the single-threaded time on a 1 GiB file).
struct Store {
    tx: Option<std::sync::mpsc::SyncSender<Batch>>,
    worker: Option<std::thread::JoinHandle<HashMap<usize, Trace>>>,
}

/// Events per batch handed to the store.
const BATCH: usize = 4096;

impl Store {
    /// Starts the store; `reserve` events are reserved for the first list.
    fn start(reserve: usize) -> Store {
        // Bounded: a few batches in flight (a few hundred KiB).
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(16);
        let worker = std::thread::spawn(move || {
            let mut lists: HashMap<usize, Trace> = HashMap::new();
            let mut reserve = reserve;
            for (list, batch) in rx {
                let t = lists.entry(list).or_default();
                t.events.reserve(std::mem::take(&mut reserve));
                t.pairs.feed(&batch);
                t.events.extend_from_slice(&batch);
            }
            lists
        });
        Store {
            tx: Some(tx),
            worker: Some(worker),
        }
    }

    fn send(&self, batch: Batch) {
        if let Some(tx) = &self.tx {
            // The worker only stops when the sender is dropped, or by a
            // panic that `finish` re-raises.
            let _ = tx.send(batch);
        }
    }

    /// Waits for the store and returns every list's trace.
    fn finish(&mut self) -> HashMap<usize, Trace> {
        drop(self.tx.take());
        match self.worker.take().map(std::thread::JoinHandle::join) {
            Some(Ok(lists)) => lists,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => HashMap::new(),
        }
    }
}

/// The decode hook: trace entries (dicts with an `action` key) become
/// [`Event`]s, collected per list by the [`Store`].
struct Collect {
    interner: Interner,
    store: Store,
    /// Events taken for a list, not yet sent to the store.
    out: Batch,
    /// Records taken by the decoder's fast path, not yet placed in a list.
    pending: Vec<Event>,
}

impl Collect {
    fn new(reserve: usize) -> Collect {
        Collect {
            interner: Interner::default(),
            store: Store::start(reserve),
            out: (0, Vec::new()),
            pending: Vec::new(),
        }
    }

    /// Hands the batch being filled to the store.
    fn flush(&mut self) {
        if !self.out.1.is_empty() {
            let list = self.out.0;
            let events = std::mem::replace(&mut self.out.1, Vec::with_capacity(BATCH));
            self.store.send((list, events));
        }
    }

    /// Makes `list` the list being filled.
    fn switch(&mut self, list: usize) {
        if self.out.0 != list {
            self.flush();
            self.out.0 = list;
        }
    }

    /// Every list's trace, once decoding is over.
    fn finish(&mut self) -> HashMap<usize, Trace> {
        self.flush();
        self.store.finish()
    }
}

/// The trace-entry keys the loader reads, in [`Raw`] field order.
const KEYS: [&str; 6] = ["action", "size", "addr", "device_free", "time_us", "frames"];
const F_ACTION: usize = 0;
const F_SIZE: usize = 1;
const F_ADDR: usize = 2;
const F_FREE: usize = 3;
const F_TIME: usize = 4;
const F_FRAMES: usize = 5;

fn field_of(key: &str) -> Option<usize> {
    KEYS.iter().position(|k| *k == key)
}

impl Hook for Collect {
    fn field(&mut self, key: &str) -> Option<usize> {
        field_of(key)
    }

    fn code(&mut self, field: usize, value: &Value) -> Option<u32> {
        match (field, value) {
            (F_ACTION, Value::Str(a)) => Some(Action::parse(a).code()),
            // A stack id is never u32::MAX (the "no stack" marker).
            (F_FRAMES, _) => self.interner.stack(value),
            _ => None,
        }
    }

    fn record(&mut self, fields: &[Raw<'_>; FIELDS]) -> bool {
        match event_from(fields, &mut self.interner) {
            Some(e) => {
                self.pending.push(e);
                true
            }
            None => false,
        }
    }

    fn place(&mut self, list: usize, n: usize) {
        if n == 0 {
            return;
        }
        self.switch(list);
        if n >= self.pending.len() {
            if self.out.1.is_empty() {
                // The usual case: a whole APPENDS batch, handed over uncopied.
                std::mem::swap(&mut self.out.1, &mut self.pending);
            } else {
                self.out.1.append(&mut self.pending);
            }
        } else {
            self.out.1.extend(self.pending.drain(..n));
        }
        // One message per APPENDS batch: the next batch is swapped in, not copied.
        self.flush();
    }

    fn take(&mut self, list: usize, item: &Value) -> bool {
        let Value::Dict(d) = item else { return false };
        let ev = event(&d.items.borrow(), &mut self.interner);
        match ev {
            Some(e) => {
                self.switch(list);
                self.out.1.push(e);
                if self.out.1.len() >= BATCH {
                    self.flush();
                }
                true
            }
            None => false,
        }
    }
}

fn event(items: &[(Value, Value)], interner: &mut Interner) -> Option<Event> {
    // One pass over the pairs; a repeated key's last value wins, as in Python.
    let mut fields = [Raw::Absent; FIELDS];
    for (k, v) in items {
        if let Some(f) = k
            .as_str()
            .and_then(field_of)
            .and_then(|i| fields.get_mut(i))
        {
            *f = Raw::of(v);
        }
    }
    event_from(&fields, interner)
}

/// A trace entry from its fields (dict items or the decoder's fast path).
fn event_from(fields: &[Raw<'_>; FIELDS], interner: &mut Interner) -> Option<Event> {
    let at = |i: usize| fields.get(i).copied().unwrap_or(Raw::Absent);
    let action = match at(F_ACTION) {
        Raw::Code(c) => Action::from_code(c)?,
        Raw::Val(Value::Str(action)) => Action::parse(action),
        _ => return None,
    };
    let num = |i: usize| match at(i) {
        Raw::Absent => Some(0),
        r => r.as_u64(),
    };
    let size = num(F_SIZE)?;
    let addr = if action == Action::Oom {
        at(F_FREE).as_u64().unwrap_or(0)
    } else {
        num(F_ADDR)?
    };
    let time_us = match at(F_TIME) {
        Raw::Int(t) => t,
        _ => i64::MIN,
    };
    let stack = match at(F_FRAMES) {
        Raw::Code(id) => Some(id),
        Raw::Val(f) => interner.stack(f),
        _ => None,
    }
    .unwrap_or(u32::MAX);
    Some(Event {
        addr,
        size,
        time_us,
        stack,
        action,
    })
}

/// Looks a key up in a pickled dict.
pub(crate) fn get<'a>(items: &'a [(Value, Value)], key: &str) -> Option<&'a Value> {
    // The last occurrence wins, as in Python (see pickle.rs, SETITEMS).
    items
        .iter()
        .rev()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

/// A non-negative integer.
fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        Value::U64(u) => Some(*u),
        _ => None,
    }
}

fn shape(msg: String) -> Error {
    Error::Shape(msg)
}

fn need_u64(items: &[(Value, Value)], key: &str, at: &str) -> Result<u64, Error> {
    match get(items, key) {
        Some(v) => as_u64(v).ok_or_else(|| {
            shape(format!(
                "{at}.{key} is {}, expected a non-negative integer",
                v.kind()
            ))
        }),
        None => Err(shape(format!("{at} has no `{key}`"))),
    }
}

fn list_items(v: &Value, at: &str) -> Result<Vec<Value>, Error> {
    match v {
        Value::List(l) | Value::Tuple(l) => Ok(l.items.borrow().clone()),
        other => Err(shape(format!("{at} is {}, expected a list", other.kind()))),
    }
}

fn dict_items(v: &Value, at: &str) -> Result<Vec<(Value, Value)>, Error> {
    match v {
        Value::Dict(d) => Ok(d.items.borrow().clone()),
        other => Err(shape(format!("{at} is {}, expected a dict", other.kind()))),
    }
}

/// Decodes and converts a snapshot of `len` bytes; `open` gives the bytes
/// (read once, streamed).
pub fn load<R: Read + Send>(
    open: impl FnMut() -> io::Result<R>,
    len: u64,
) -> Result<Snapshot, Error> {
    // A trace entry takes at least 48 bytes of pickle (an empty memoized dict,
    // MARK, SETITEMS, and `action`, `addr`, `size` with their values).
    let mut hook = Collect::new(usize::try_from(len / 48).unwrap_or(0));
    let root = pickle::decode(open, len, &mut hook)?;
    convert(root, hook)
}

/// Decodes and converts a snapshot from a stream of unknown length (standard
/// input, a pipe, `<(zcat …)`), read once to its end.
pub fn load_stream<R: Read + Send>(input: R) -> Result<Snapshot, Error> {
    let mut hook = Collect::new(0);
    let root = pickle::decode_stream(input, &mut hook)?;
    convert(root, hook)
}

/// The decoded pickle and what the hook collected → the typed snapshot.
fn convert(root: Value, mut hook: Collect) -> Result<Snapshot, Error> {
    let mut lists = hook.finish();
    let mut snap = Snapshot::default();
    let (segments, traces, annotations, settings) = match &root {
        Value::List(_) => (Some(root.clone()), None, None, None),
        Value::Dict(d) => {
            let items = d.items.borrow();
            let segs = get(&items, "segments").cloned();
            if segs.is_none() {
                return Err(shape(
                    "the top-level dict has no `segments` (is this a torch.cuda.memory._snapshot() dump?)"
                        .into(),
                ));
            }
            (
                segs,
                get(&items, "device_traces").cloned(),
                get(&items, "external_annotations").cloned(),
                get(&items, "allocator_settings").cloned(),
            )
        }
        other => {
            return Err(shape(format!(
                "the top level is {}, expected a dict with `segments` or a list of segments",
                other.kind()
            )));
        }
    };
    if let Some(segs) = segments {
        for (i, s) in list_items(&segs, "segments")?.iter().enumerate() {
            let at = format!("segments[{i}]");
            let seg = segment(&dict_items(s, &at)?, &at, &mut hook.interner)?;
            snap.segments.push(seg);
        }
    }
    if let Some(t) = traces.filter(|t| !matches!(t, Value::None)) {
        for (dev, list) in list_items(&t, "device_traces")?.iter().enumerate() {
            let at = format!("device_traces[{dev}]");
            let Value::List(l) = list else {
                return Err(shape(format!("{at} is {}, expected a list", list.kind())));
            };
            let trace = lists.remove(&(Rc::as_ptr(l) as usize)).unwrap_or_default();
            // Entries the hook did not take are malformed trace entries.
            if let Some(bad) = l.items.borrow().first() {
                let why = match bad {
                    Value::Dict(d) => {
                        let items = d.items.borrow();
                        match get(&items, "action") {
                            None => "has no `action`".to_string(),
                            Some(a) if a.as_str().is_none() => {
                                format!("has an `action` that is {}", a.kind())
                            }
                            _ => "has a size or address that is not a non-negative integer"
                                .to_string(),
                        }
                    }
                    other => format!("is {}, expected a dict", other.kind()),
                };
                return Err(shape(format!("an entry of {at} {why}")));
            }
            snap.traces.push(trace.events);
            snap.pairs.push(Some(trace.pairs));
        }
    }
    if let Some(a) = annotations.filter(|a| !matches!(a, Value::None)) {
        for (i, v) in list_items(&a, "external_annotations")?.iter().enumerate() {
            let items = dict_items(v, &format!("external_annotations[{i}]"))?;
            let text = |k: &str| get(&items, k).and_then(Value::as_str).map(Rc::from);
            snap.annotations.push(Annotation {
                start: text("stage").is_some_and(|s: Rc<str>| &*s == "START"),
                name: text("name").unwrap_or_else(|| Rc::from("")),
                device: match get(&items, "device") {
                    Some(Value::Int(d)) => Some(*d),
                    _ => None,
                },
                time_us: match get(&items, "time_us") {
                    Some(Value::Int(t)) => Some(*t),
                    _ => None,
                },
            });
        }
    }
    if let Some(Value::Dict(d)) = settings {
        let items = d.items.borrow();
        snap.expandable_setting = match get(&items, "expandable_segments") {
            Some(Value::Bool(b)) => Some(*b),
            _ => None,
        };
    }
    snap.frames = std::mem::take(&mut hook.interner.frames);
    snap.stacks = std::mem::take(&mut hook.interner.stacks);
    Ok(snap)
}

fn segment(items: &[(Value, Value)], at: &str, interner: &mut Interner) -> Result<Segment, Error> {
    let address = need_u64(items, "address", at)?;
    let total_size = need_u64(items, "total_size", at)?;
    let device = match get(items, "device") {
        Some(Value::Int(d)) => *d,
        Some(v) => {
            return Err(shape(format!(
                "{at}.device is {}, expected an integer",
                v.kind()
            )));
        }
        None => 0,
    };
    let mut blocks = Vec::new();
    let mut next_addr = address;
    if let Some(bl) = get(items, "blocks") {
        for (j, b) in list_items(bl, &format!("{at}.blocks"))?.iter().enumerate() {
            let bat = format!("{at}.blocks[{j}]");
            let bi = dict_items(b, &bat)?;
            let size = need_u64(&bi, "size", &bat)?;
            let state = match get(&bi, "state").and_then(Value::as_str) {
                Some("active_allocated") => BlockState::Allocated,
                Some("active_pending_free" | "active_awaiting_free") => BlockState::PendingFree,
                Some("inactive") => BlockState::Inactive,
                _ => BlockState::Other,
            };
            // Legacy blocks (1.13/2.0): `history[0]` has frames and real_size.
            let hist = get(&bi, "history").and_then(|h| match h {
                Value::List(l) => l.items.borrow().first().cloned(),
                _ => None,
            });
            let hist_items = match &hist {
                Some(Value::Dict(d)) => d.items.borrow().clone(),
                _ => Vec::new(),
            };
            let requested = get(&bi, "requested_size")
                .and_then(as_u64)
                .or_else(|| get(&hist_items, "real_size").and_then(as_u64))
                .unwrap_or(size);
            let frames = get(&bi, "frames").or_else(|| get(&hist_items, "frames"));
            let stack = frames.and_then(|f| interner.stack(f));
            let addr = get(&bi, "address").and_then(as_u64).unwrap_or(next_addr);
            next_addr = addr.saturating_add(size);
            blocks.push(Block {
                address: addr,
                size,
                requested,
                state,
                stack,
            });
        }
    }
    Ok(Segment {
        device,
        address,
        total_size,
        allocated_size: get(items, "allocated_size").and_then(as_u64),
        large: get(items, "segment_type")
            .and_then(Value::as_str)
            .map(|t| t == "large"),
        expandable: matches!(get(items, "is_expandable"), Some(Value::Bool(true))),
        blocks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_bytes(b: &[u8]) -> Result<Snapshot, Error> {
        load(|| Ok(b), b.len() as u64)
    }

    #[test]
    fn action_codes_round_trip() {
        for a in Action::ALL {
            assert_eq!(Action::from_code(a.code()), Some(a));
        }
        let n = u32::try_from(Action::ALL.len()).unwrap();
        assert_eq!(Action::from_code(n), None);
    }

    #[test]
    fn a_cached_action_is_forgotten_when_its_memo_slot_is_stored_again() {
        // Entries 2 and 3 take the fast path and fetch the action from memo
        // slot 8; between them slot 8 is stored again ("alloc" → "free_requested").
        let b = b"\x80\x02}q\x00(X\x08\x00\x00\x00segmentsq\x01]q\x02X\r\x00\x00\x00device_tracesq\x03]q\x04]q\x05(}q\x06(X\x06\x00\x00\x00actionq\x07X\x05\x00\x00\x00allocq\x08X\x04\x00\x00\x00addrq\tK\x01X\x04\x00\x00\x00sizeq\nK\x02u}q\x0b(h\x07h\x08h\tK\x03h\nK\x04uX\x0e\x00\x00\x00free_requestedq\x080}q\x0c(h\x07h\x08h\tK\x03h\nK\x04ueau.";
        let s = load_bytes(b).unwrap();
        let actions: Vec<Action> = s.traces[0].iter().map(|e| e.action).collect();
        assert_eq!(
            actions,
            [Action::Alloc, Action::Alloc, Action::FreeRequested]
        );
        assert_eq!(s.traces[0][2].addr, 3);
    }

    #[test]
    fn a_top_level_list_is_segments_only() {
        // pickle.dumps([{'device':0,'address':4096,'total_size':2097152,'blocks':[]}], 2)
        let b = b"\x80\x02]q\x00}q\x01(X\x06\x00\x00\x00deviceq\x02K\x00X\x07\x00\x00\x00addressq\x03M\x00\x10X\n\x00\x00\x00total_sizeq\x04J\x00\x00 \x00X\x06\x00\x00\x00blocksq\x05]q\x06ua.";
        let s = load_bytes(b).unwrap();
        assert_eq!(s.segments.len(), 1);
        assert_eq!(s.segments[0].total_size, 2 << 20);
        assert!(s.traces.is_empty());
    }

    #[test]
    fn a_trace_entry_shared_in_one_list_counts_twice_and_across_lists_is_refused() {
        // e = {'action': 'alloc', 'addr': 1, 'size': 2}
        // {'segments': [], 'device_traces': [[e, e]]}, protocol 4
        let b = b"\x80\x04\x95R\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94\x8c\rdevice_traces\x94]\x94]\x94(}\x94(\x8c\x06action\x94\x8c\x05alloc\x94\x8c\x04addr\x94K\x01\x8c\x04size\x94K\x02uh\x06eau.";
        let s = load_bytes(b).unwrap();
        assert_eq!(s.traces[0].len(), 2);
        assert_eq!(s.traces[0][1].size, 2);
        // {'segments': [], 'device_traces': [[e], [e]]}: fetched after it was taken.
        let b = b"\x80\x04\x95U\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94\x8c\rdevice_traces\x94]\x94(]\x94}\x94(\x8c\x06action\x94\x8c\x05alloc\x94\x8c\x04addr\x94K\x01\x8c\x04size\x94K\x02ua]\x94h\x06aeu.";
        let e = load_bytes(b).unwrap_err();
        assert!(e.to_string().contains("fetched again"), "{e}");
    }

    #[test]
    fn legacy_blocks_take_size_and_stack_from_history() {
        // The 1.13 form: a bare list of segments whose block has `history`
        // ({'addr', 'real_size', 'frames'}) instead of `requested_size`/`frames`.
        let b = b"\x80\x02]q\x00}q\x01(X\x06\x00\x00\x00deviceq\x02K\x00X\x07\x00\x00\x00addressq\x03M\x00\x10X\n\x00\x00\x00total_sizeq\x04M\x00\x04X\x06\x00\x00\x00blocksq\x05]q\x06}q\x07(X\x04\x00\x00\x00sizeq\x08M\x00\x04X\x05\x00\x00\x00stateq\tX\x10\x00\x00\x00active_allocatedq\nX\x07\x00\x00\x00historyq\x0b]q\x0c}q\r(X\x04\x00\x00\x00addrq\x0eM\x00\x10X\t\x00\x00\x00real_sizeq\x0fM\xe8\x03X\x06\x00\x00\x00framesq\x10]q\x11}q\x12(X\x08\x00\x00\x00filenameq\x13X\x0b\x00\x00\x00/w/train.pyq\x14X\x04\x00\x00\x00lineq\x15K\x07X\x04\x00\x00\x00nameq\x16X\x04\x00\x00\x00stepq\x17uauauaua.";
        let s = load_bytes(b).unwrap();
        let block = &s.segments[0].blocks[0];
        assert_eq!(
            (block.address, block.size, block.requested),
            (4096, 1024, 1000)
        );
        let r = crate::analyze(&s, &crate::Options::default()).unwrap();
        assert_eq!(r.devices[0].top_sites[0].frame, "/w/train.py:7 step");
        assert_eq!(r.devices[0].peak_event, -1);
        assert_eq!(r.devices[0].fragmentation.rounding_waste_bytes, 24);
    }

    #[test]
    fn wrong_top_level_shapes_are_errors() {
        let e = load_bytes(b"\x80\x04K\x05.").unwrap_err();
        assert!(e.to_string().contains("the top level is an int"), "{e}");
        let e = load_bytes(b"\x80\x04}.").unwrap_err();
        assert!(e.to_string().contains("no `segments`"), "{e}");
    }
}
