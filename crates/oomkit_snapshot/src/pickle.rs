//! A safe decoder for the subset of Python's pickle format that memory snapshots
//! use (protocols 2–5). It builds plain values — `None`, booleans, integers,
//! floats, strings, bytes, lists, tuples, dicts — and **never executes anything**:
//! the opcodes that import or call Python code (`GLOBAL`, `STACK_GLOBAL`,
//! `REDUCE`, `BUILD`, `INST`, `OBJ`, `NEWOBJ`, `NEWOBJ_EX`, `EXT1/2/4`, `PERSID`,
//! `BINPERSID`) are refused with an error naming the opcode and its byte offset.
//!
//! Opcode semantics follow CPython's `Lib/pickle.py` and `Lib/pickletools.py`.
//!
//! Bounds:
//! - every length is checked against the bytes that are left before anything is
//!   allocated (a `BINUNICODE` claiming 4 GiB in a 100-byte file is an error);
//! - values nest at most [`MAX_DEPTH`] levels (no walk and no drop can overflow
//!   the stack). A container may not be changed after it was put inside another
//!   one, which is how real pickles are written; this keeps the recorded depth
//!   exact and makes cycles impossible;
//! - the input is read once, through a buffer that holds at most 1 MiB or the
//!   longest single argument;
//! - memory is linear in the input length.
//!
//! Shared objects (frames lists fetched from the memo thousands of times) are
//! reference-counted ([`Rc`]): a fetch is a pointer copy, never a deep clone.
//!
//! A [`Hook`] sees every item appended to a list and may take it (the snapshot
//! loader turns trace entries into 32-byte records this way). A **fast path**
//! offers the hook flat dicts that are being appended to a list — `EMPTY_DICT
//! MEMOIZE MARK (key value)* SETITEMS` with memo-fetched keys and integer or
//! memo-fetched values, the shape of every trace entry — straight from the
//! buffer, before any value is built; anything else falls back to the generic
//! path having consumed nothing. The memo slots of taken objects are cut off the
//! memo as each batch is appended, so millions of trace entries leave no memo
//! behind; fetching a taken object again is an error (no real snapshot does).

use oomkit_core::read_ahead::ReadAhead;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::{self, Read};
use std::rc::Rc;

/// The deepest nesting of containers accepted.
pub const MAX_DEPTH: u32 = 64;

/// Why a pickle could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickleError {
    /// The input does not start like a protocol 2–5 pickle.
    #[error("not a pickle of protocol 2-5 (it starts with {0})")]
    NotPickle(String),
    /// A protocol this decoder does not read.
    #[error("unsupported pickle protocol {0} (memory snapshots use 2 to 5)")]
    Protocol(u8),
    /// The input ends too early.
    #[error("truncated pickle: {what} at byte {at} needs {need} more bytes, {left} left")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Byte offset of the opcode.
        at: usize,
        /// Bytes needed.
        need: u64,
        /// Bytes left.
        left: usize,
    },
    /// The input ends without the STOP opcode.
    #[error("truncated pickle: it ends at byte {0} without the STOP opcode")]
    NoStop(usize),
    /// An opcode that imports or calls Python code.
    #[error(
        "refused opcode {name} (0x{op:02x}) at byte {at}: it would import or call Python code, which a memory snapshot never contains; nothing was executed"
    )]
    Refused {
        /// Opcode name as in pickletools.
        name: &'static str,
        /// Opcode byte.
        op: u8,
        /// Byte offset.
        at: usize,
    },
    /// An opcode this decoder does not know or support.
    #[error("unsupported pickle opcode 0x{op:02x} at byte {at}")]
    Unsupported {
        /// Opcode byte.
        op: u8,
        /// Byte offset.
        at: usize,
    },
    /// A structurally impossible sequence (stack underflow, bad memo index, …).
    #[error("malformed pickle at byte {at}: {why}")]
    Malformed {
        /// Byte offset.
        at: usize,
        /// What was wrong.
        why: &'static str,
    },
    /// Reading the input failed.
    #[error("read error: {0}")]
    Io(String),
    /// Nesting beyond [`MAX_DEPTH`].
    #[error("pickle nests containers deeper than {limit} levels (at byte {at})")]
    TooDeep {
        /// The limit.
        limit: u32,
        /// Byte offset.
        at: usize,
    },
}

/// A decoded pickle value. Containers are shared by reference.
pub enum Value {
    /// `None`.
    None,
    /// `True`/`False`.
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// An integer in `i64::MAX + 1 ..= u64::MAX`.
    U64(u64),
    /// An integer outside `i64::MIN ..= u64::MAX` (value not kept).
    Big,
    /// A float.
    Float(f64),
    /// A string (a thin pointer keeps `Value` at 16 bytes).
    Str(Rc<String>),
    /// Bytes (contents kept).
    Bytes(Rc<Vec<u8>>),
    /// A list (or a set).
    List(Rc<Node<Vec<Value>>>),
    /// A tuple.
    Tuple(Rc<Node<Vec<Value>>>),
    /// A dict, as key/value pairs in insertion order.
    Dict(Rc<Node<Vec<(Value, Value)>>>),
    /// A flat dict the [`Hook`] took as a record while decoding
    /// ([`Hook::record`]); a list that receives it hands it to [`Hook::place`].
    Taken,
}

impl Clone for Value {
    fn clone(&self) -> Self {
        match self {
            Value::None => Value::None,
            Value::Bool(b) => Value::Bool(*b),
            Value::Int(i) => Value::Int(*i),
            Value::U64(u) => Value::U64(*u),
            Value::Big => Value::Big,
            Value::Float(f) => Value::Float(*f),
            Value::Str(s) => Value::Str(Rc::clone(s)),
            Value::Bytes(b) => Value::Bytes(Rc::clone(b)),
            Value::List(l) => Value::List(Rc::clone(l)),
            Value::Tuple(t) => Value::Tuple(Rc::clone(t)),
            Value::Dict(d) => Value::Dict(Rc::clone(d)),
            Value::Taken => Value::Taken,
        }
    }
}

/// A container: its items, nesting depth, and whether it was shared (put inside
/// another container), after which it may not change.
pub struct Node<T> {
    depth: Cell<u32>,
    sealed: Cell<bool>,
    /// Memo index it was stored under (`u32::MAX`: none).
    memo: Cell<u32>,
    /// Free for the [`Hook`]'s use (`u32::MAX` until set): the loader keeps
    /// the interned id of a shared frames list here, saving a map lookup per
    /// trace entry.
    tag: Cell<u32>,
    /// The items.
    pub items: RefCell<T>,
}

impl<T> Node<T> {
    fn new(items: T, depth: u32, sealed: bool) -> Rc<Self> {
        Rc::new(Node {
            depth: Cell::new(depth),
            sealed: Cell::new(sealed),
            memo: Cell::new(u32::MAX),
            tag: Cell::new(u32::MAX),
            items: RefCell::new(items),
        })
    }

    /// The hook's tag, if set.
    pub fn tag(&self) -> Option<u32> {
        let t = self.tag.get();
        (t != u32::MAX).then_some(t)
    }

    /// Sets the hook's tag.
    pub fn set_tag(&self, t: u32) {
        self.tag.set(t);
    }
}

impl Value {
    /// Nesting depth: 0 for scalars, 1 for an empty container.
    fn depth(&self) -> u32 {
        match self {
            Value::List(n) | Value::Tuple(n) => n.depth.get(),
            Value::Dict(n) => n.depth.get(),
            _ => 0,
        }
    }

    /// Marks a container as shared: it may not change any more.
    fn seal(&self) {
        match self {
            Value::List(n) | Value::Tuple(n) => n.sealed.set(true),
            Value::Dict(n) => n.sealed.set(true),
            _ => {}
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A short name of the type, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "a bool",
            Value::Int(_) | Value::U64(_) | Value::Big => "an int",
            Value::Float(_) => "a float",
            Value::Str(_) => "a string",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "a list",
            Value::Tuple(_) => "a tuple",
            Value::Dict(_) => "a dict",
            Value::Taken => "a trace entry",
        }
    }
}

/// Sees every item appended to a list and may take it.
pub trait Hook {
    /// Returns true when the hook took `item` (it is then not stored in the
    /// list, and a later memo fetch of it is an error). `list` identifies the
    /// list (its address; the list outlives the decode).
    fn take(&mut self, list: usize, item: &Value) -> bool;

    /// Fast path, step 1: which record field a dict key is (an index below
    /// [`FIELDS`]), or `None` for a key the hook ignores. Asked once per
    /// memoized key string, not once per record.
    fn field(&mut self, _key: &str) -> Option<usize> {
        None
    }

    /// Fast path, step 2: offered the fields of a flat dict (keys fetched from
    /// the memo, values integers or memo fetches) that is being appended to a
    /// list, before any value is built for it, indexed as [`Hook::field`] said
    /// (a repeated key: the last value, as in Python). Returns true to take it;
    /// it is then handed over with [`Hook::place`] when the list receives it.
    fn record(&mut self, _fields: &[Raw<'_>; FIELDS]) -> bool {
        false
    }

    /// Fast path, between the steps: a code of the hook's own for a value
    /// fetched from the memo as record field `field` (an action string, a
    /// stack). Asked once per memo index and field, not once per record: the
    /// record then holds [`Raw::Code`] and nothing is read from the value.
    fn code(&mut self, _field: usize, _value: &Value) -> Option<u32> {
        None
    }

    /// The next `n` records taken by [`Hook::record`] were appended to `list`.
    fn place(&mut self, _list: usize, _n: usize) {}
}

/// A hook that keeps every item.
pub struct Keep;

impl Hook for Keep {
    fn take(&mut self, _list: usize, _item: &Value) -> bool {
        false
    }
}

/// How many record fields [`Hook::field`] may name.
pub const FIELDS: usize = 8;

/// A value in a fast-path record: built without allocating, nothing to drop.
#[derive(Clone, Copy)]
pub enum Raw<'a> {
    /// The key was not in the record.
    Absent,
    /// `None`.
    None,
    /// `True`/`False`.
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// An integer in `i64::MAX + 1 ..= u64::MAX`.
    U64(u64),
    /// An integer outside `i64::MIN ..= u64::MAX`.
    Big,
    /// Anything else: a decoded value (a memo fetch on the fast path).
    Val(&'a Value),
    /// A memo fetch that [`Hook::code`] gave this code.
    Code(u32),
}

impl<'a> Raw<'a> {
    /// A decoded value as a record field (integers unpacked).
    pub fn of(v: &'a Value) -> Raw<'a> {
        match v {
            Value::None => Raw::None,
            Value::Bool(b) => Raw::Bool(*b),
            Value::Int(i) => Raw::Int(*i),
            Value::U64(u) => Raw::U64(*u),
            Value::Big => Raw::Big,
            other => Raw::Val(other),
        }
    }

    /// A non-negative integer.
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Raw::Int(i) => u64::try_from(i).ok(),
            Raw::U64(u) => Some(u),
            Raw::Val(v) => match Raw::of(v) {
                Raw::Int(i) => u64::try_from(i).ok(),
                Raw::U64(u) => Some(u),
                _ => None,
            },
            _ => None,
        }
    }
}

/// One decoded instruction.
enum Op<'a> {
    Proto(u8),
    Frame,
    Stop,
    Mark,
    Pop,
    PopMark,
    Dup,
    None,
    Bool(bool),
    Int(i64),
    Long(&'a [u8]),
    Float(f64),
    Str(&'a [u8]),
    Bytes(&'a [u8]),
    EmptyList,
    EmptyDict,
    EmptyTuple,
    EmptySet,
    List,
    Dict,
    Tuple,
    TupleN(usize),
    FrozenSet,
    Append,
    Appends,
    SetItem,
    SetItems,
    AddItems,
    Put(u64),
    Memoize,
    Get(u64),
}

/// Names of the opcodes that would run Python code (pickletools names).
fn refused_name(op: u8) -> Option<&'static str> {
    Some(match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return None,
    })
}

/// Reads opcodes one at a time from a stream. The bytes come in chunks read
/// ahead on another thread ([`ReadAhead`]); the buffer is the current chunk,
/// swapped in whole, and holds more than one chunk only while a single
/// argument is longer (never more than what is left of the input).
struct Reader {
    src: ReadAhead,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    /// Offset of `buf[lo]` in the input.
    pos: u64,
    /// Input length (`u64::MAX` for a stream until its end is seen).
    total: u64,
    /// Whether `total` is the stream's length as told (else it is read to
    /// its end, and lengths are checked against what arrives).
    known: bool,
}

/// Bytes per chunk read ahead (256 KiB measured no slower than 1 MiB, and
/// three buffers stay within a core's L2).
const CHUNK: usize = 256 << 10;
/// Spare room in front of each chunk: an opcode cut by the chunk's end (at
/// most this long) is copied in front of the next chunk instead of the
/// chunk being copied after it.
const HEAD: usize = 64 << 10;

impl Reader {
    fn new(src: ReadAhead, total: Option<u64>) -> Self {
        Reader {
            src,
            buf: Vec::new(),
            lo: 0,
            hi: 0,
            pos: 0,
            total: total.unwrap_or(u64::MAX),
            known: total.is_some(),
        }
    }

    /// Bytes buffered from `lo`.
    fn avail(&self) -> usize {
        self.hi.saturating_sub(self.lo)
    }

    /// Makes up to `n` bytes available at `buf[lo..]`, fewer only at the end
    /// of the input (then the length of a stream becomes known).
    fn fill_upto(&mut self, n: usize) -> Result<(), PickleError> {
        match self.fill(n) {
            Err(PickleError::NoStop(_)) => {
                if !self.known {
                    let left = u64::try_from(self.avail()).unwrap_or(u64::MAX);
                    self.total = self.pos.saturating_add(left);
                    self.known = true;
                }
                Ok(())
            }
            other => other,
        }
    }

    fn at(&self) -> usize {
        usize::try_from(self.pos).unwrap_or(usize::MAX)
    }

    /// Makes `n` bytes available at `buf[lo..]`; `n` is at most what is left.
    fn fill(&mut self, n: usize) -> Result<(), PickleError> {
        while self.hi.saturating_sub(self.lo) < n {
            let chunk = match self.src.next_chunk() {
                Some(Ok(c)) => c,
                Some(Err(e)) => return Err(PickleError::Io(e.to_string())),
                // The stream is shorter than the length we were told.
                None => {
                    return Err(PickleError::NoStop(
                        self.at().saturating_add(self.hi.saturating_sub(self.lo)),
                    ));
                }
            };
            let left = self.hi.saturating_sub(self.lo);
            let data = chunk.head..chunk.head.saturating_add(chunk.len);
            if left <= chunk.head {
                // The usual case: the few bytes left go in front of the new chunk.
                let mut buf = chunk.buf;
                let start = chunk.head.saturating_sub(left);
                if let (Some(dst), Some(src)) = (
                    buf.get_mut(start..chunk.head),
                    self.buf.get(self.lo..self.hi),
                ) {
                    dst.copy_from_slice(src);
                }
                let old = std::mem::replace(&mut self.buf, buf);
                self.src.recycle(old);
                self.lo = start;
                self.hi = data.end;
            } else {
                // A long argument: the new bytes go after the old ones.
                self.buf.copy_within(self.lo..self.hi, 0);
                self.buf.truncate(left);
                self.buf
                    .extend_from_slice(chunk.buf.get(data).unwrap_or_default());
                self.src.recycle(chunk.buf);
                self.lo = 0;
                self.hi = self.buf.len();
            }
        }
        Ok(())
    }

    fn take(&mut self, n: u64, what: &'static str, at: usize) -> Result<&[u8], PickleError> {
        if !self.known {
            // A stream: the claimed length is checked against the bytes that
            // actually arrive (the buffer grows only as they do).
            self.fill_upto(usize::try_from(n).unwrap_or(usize::MAX))?;
        }
        let left = self.total.saturating_sub(self.pos);
        if n > left {
            return Err(PickleError::Truncated {
                what,
                at,
                need: n,
                left: usize::try_from(left).unwrap_or(usize::MAX),
            });
        }
        let k = usize::try_from(n).map_err(|_| PickleError::Truncated {
            what,
            at,
            need: n,
            left: 0,
        })?;
        self.fill(k)?;
        let start = self.lo;
        let end = start.saturating_add(k);
        self.lo = end;
        self.pos = self.pos.saturating_add(n);
        self.buf.get(start..end).ok_or(PickleError::NoStop(at))
    }

    #[inline]
    fn le(&mut self, n: u64, what: &'static str, at: usize) -> Result<u64, PickleError> {
        if n == 1
            && self.lo < self.hi
            && let Some(&b) = self.buf.get(self.lo)
        {
            self.lo = self.lo.saturating_add(1);
            self.pos = self.pos.saturating_add(1);
            return Ok(u64::from(b));
        }
        let s = self.take(n, what, at)?;
        Ok(s.iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// The next opcode and its position, or `None` at the end of input.
    fn next(&mut self) -> Result<Option<(usize, Op<'_>)>, PickleError> {
        let at = self.at();
        if !self.known && self.lo >= self.hi {
            self.fill_upto(1)?;
        }
        if self.pos >= self.total {
            return Ok(None);
        }
        let op = match self.buf.get(self.lo) {
            // Fast path: the byte is buffered.
            Some(&b) if self.lo < self.hi => {
                self.lo = self.lo.saturating_add(1);
                self.pos = self.pos.saturating_add(1);
                b
            }
            _ => self.take(1, "opcode", at)?.first().copied().unwrap_or(0),
        };
        if let Some(name) = refused_name(op) {
            return Err(PickleError::Refused { name, op, at });
        }
        let o = match op {
            0x80 => Op::Proto(self.take(1, "PROTO", at)?.first().copied().unwrap_or(0)),
            0x95 => {
                self.take(8, "FRAME", at)?;
                Op::Frame
            }
            b'.' => Op::Stop,
            b'(' => Op::Mark,
            b'0' => Op::Pop,
            b'1' => Op::PopMark,
            b'2' => Op::Dup,
            b'N' => Op::None,
            0x88 => Op::Bool(true),
            0x89 => Op::Bool(false),
            b'J' => {
                let v = self.le(4, "BININT", at)?;
                Op::Int(i64::from(u32::try_from(v).unwrap_or(0) as i32))
            }
            b'K' => Op::Int(i64::try_from(self.le(1, "BININT1", at)?).unwrap_or(0)),
            b'M' => Op::Int(i64::try_from(self.le(2, "BININT2", at)?).unwrap_or(0)),
            0x8a => {
                let n = self.le(1, "LONG1", at)?;
                Op::Long(self.take(n, "LONG1", at)?)
            }
            0x8b => {
                let n = self.le(4, "LONG4", at)?;
                Op::Long(self.take(n, "LONG4", at)?)
            }
            b'G' => {
                let s = self.take(8, "BINFLOAT", at)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(s);
                Op::Float(f64::from_be_bytes(a))
            }
            0x8c => {
                let n = self.le(1, "SHORT_BINUNICODE", at)?;
                Op::Str(self.take(n, "SHORT_BINUNICODE", at)?)
            }
            b'X' => {
                let n = self.le(4, "BINUNICODE", at)?;
                Op::Str(self.take(n, "BINUNICODE", at)?)
            }
            0x8d => {
                let n = self.le(8, "BINUNICODE8", at)?;
                Op::Str(self.take(n, "BINUNICODE8", at)?)
            }
            b'C' => {
                let n = self.le(1, "SHORT_BINBYTES", at)?;
                Op::Bytes(self.take(n, "SHORT_BINBYTES", at)?)
            }
            b'B' => {
                let n = self.le(4, "BINBYTES", at)?;
                Op::Bytes(self.take(n, "BINBYTES", at)?)
            }
            0x8e => {
                let n = self.le(8, "BINBYTES8", at)?;
                Op::Bytes(self.take(n, "BINBYTES8", at)?)
            }
            0x96 => {
                let n = self.le(8, "BYTEARRAY8", at)?;
                Op::Bytes(self.take(n, "BYTEARRAY8", at)?)
            }
            b']' => Op::EmptyList,
            b'}' => Op::EmptyDict,
            b')' => Op::EmptyTuple,
            0x8f => Op::EmptySet,
            b'l' => Op::List,
            b'd' => Op::Dict,
            b't' => Op::Tuple,
            0x85 => Op::TupleN(1),
            0x86 => Op::TupleN(2),
            0x87 => Op::TupleN(3),
            0x91 => Op::FrozenSet,
            b'a' => Op::Append,
            b'e' => Op::Appends,
            b's' => Op::SetItem,
            b'u' => Op::SetItems,
            0x90 => Op::AddItems,
            b'q' => Op::Put(self.le(1, "BINPUT", at)?),
            b'r' => Op::Put(self.le(4, "LONG_BINPUT", at)?),
            0x94 => Op::Memoize,
            b'h' => Op::Get(self.le(1, "BINGET", at)?),
            b'j' => Op::Get(self.le(4, "LONG_BINGET", at)?),
            _ => return Err(PickleError::Unsupported { op, at }),
        };
        Ok(Some((at, o)))
    }
}

/// Integer from a little-endian two's-complement byte string (LONG1/LONG4).
fn long_value(b: &[u8]) -> Value {
    if b.is_empty() {
        return Value::Int(0);
    }
    let negative = b.last().is_some_and(|&x| x & 0x80 != 0);
    if b.len() <= 8 {
        let mut a = [if negative { 0xFF } else { 0 }; 8];
        for (d, s) in a.iter_mut().zip(b) {
            *d = *s;
        }
        return Value::Int(i64::from_le_bytes(a));
    }
    // Longer: fits u64 only when positive and every byte past the 8th is zero.
    let (low, high) = b.split_at(8);
    if !negative && high.iter().all(|&x| x == 0) {
        let mut a = [0u8; 8];
        a.copy_from_slice(low);
        let v = u64::from_le_bytes(a);
        return match i64::try_from(v) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::U64(v),
        };
    }
    if negative && high.iter().all(|&x| x == 0xFF) {
        let mut a = [0u8; 8];
        a.copy_from_slice(low);
        let v = i64::from_le_bytes(a);
        if v < 0 {
            return Value::Int(v);
        }
    }
    Value::Big
}

/// A memo slot.
enum Slot {
    Val(Value),
    /// The hook took this object: fetching it again is not supported.
    Taken,
}

/// A run of memo indices whose objects the hook took, cut off the end of the
/// dense vector so that a trace of millions of entries does not keep a memo
/// slot per entry.
struct Gap {
    /// First memo index of the run.
    start: u64,
    /// One past the last.
    end: u64,
    /// Indices removed up to `end` (this gap and all before it).
    shift: u64,
}

/// The memo: dense indices in a vector (minus the gaps), others in a map.
///
/// Bounds (the file decides the indices, so both are checked here):
/// - memory: a slot is only ever added by a PUT, MEMOIZE or taken record, one
///   per opcode. The vector grows only by appending the index right after its
///   end (how `pickle.py` numbers its memo: `len(self.memo)`); any other index
///   goes to the map, so a LONG_BINPUT of index 4 billion costs one map entry,
///   not a vector of 4 billion slots;
/// - time: [`Memo::trim`] removes every taken slot it looks at, so each slot is
///   looked at once however many APPENDS follow, and adjacent gaps merge.
struct Memo {
    dense: Vec<Slot>,
    gaps: Vec<Gap>,
    sparse: HashMap<u64, Slot>,
    next: u64,
    /// Slots [`Memo::trim`] looked at ([`decode_counting`]'s work).
    work: u64,
}

/// Where a memo index lives.
enum Pos {
    Dense(usize),
    Taken,
    Elsewhere,
}

impl Memo {
    fn shift(&self) -> u64 {
        self.gaps.last().map_or(0, |g| g.shift)
    }

    fn pos(&self, i: u64) -> Pos {
        // Common case first: keys and frames are memoized before any gap.
        if self.gaps.first().is_none_or(|g| i < g.start) {
            return usize::try_from(i).map_or(Pos::Elsewhere, Pos::Dense);
        }
        // And the newest entries, after the last gap.
        if let Some(last) = self.gaps.last()
            && i >= last.end
        {
            return usize::try_from(i.saturating_sub(last.shift))
                .map_or(Pos::Elsewhere, Pos::Dense);
        }
        let g = self.gaps.partition_point(|g| g.start <= i);
        let shift = match g.checked_sub(1).and_then(|k| self.gaps.get(k)) {
            Some(gap) if i < gap.end => return Pos::Taken,
            Some(gap) => gap.shift,
            None => 0,
        };
        match usize::try_from(i.saturating_sub(shift)) {
            Ok(k) => Pos::Dense(k),
            Err(_) => Pos::Elsewhere,
        }
    }

    /// Stores `slot` under memo index `i`: in the vector when `i` is in it or
    /// right after it, else in the map.
    fn store(&mut self, i: u64, slot: Slot) {
        match self.pos(i) {
            Pos::Dense(k) if k < self.dense.len() => {
                if let Some(s) = self.dense.get_mut(k) {
                    *s = slot;
                }
                // A value stored before in the map for this index is stale.
                if !self.sparse.is_empty() {
                    self.sparse.remove(&i);
                }
            }
            Pos::Dense(k) if k == self.dense.len() => {
                self.dense.push(slot);
                if !self.sparse.is_empty() {
                    self.sparse.remove(&i);
                }
            }
            _ => {
                self.sparse.insert(i, slot);
            }
        }
    }

    fn put(&mut self, i: u64, v: &Value) {
        let idx = u32::try_from(i).unwrap_or(u32::MAX);
        match v {
            Value::List(n) | Value::Tuple(n) => n.memo.set(idx),
            Value::Dict(n) => n.memo.set(idx),
            _ => {}
        }
        self.store(i, Slot::Val(v.clone()));
    }

    fn slot(&self, i: u64) -> Option<&Slot> {
        let dense = match self.pos(i) {
            Pos::Dense(k) => self.dense.get(k),
            Pos::Taken => return Some(&Slot::Taken),
            Pos::Elsewhere => None,
        };
        dense.or_else(|| self.sparse.get(&i))
    }

    fn get(&self, i: u64, at: usize) -> Result<Value, PickleError> {
        match self.slot(i) {
            Some(Slot::Val(v)) => Ok(v.clone()),
            Some(Slot::Taken) => Err(PickleError::Malformed {
                at,
                why: "a trace entry is fetched again from the memo (shared trace entries are not supported)",
            }),
            None => Err(PickleError::Malformed {
                at,
                why: "GET of a memo entry that was never stored",
            }),
        }
    }

    /// The value at a memo index, without cloning it.
    fn get_ref(&self, i: u64) -> Option<&Value> {
        match self.slot(i) {
            Some(Slot::Val(v)) => Some(v),
            _ => None,
        }
    }

    /// Memoizes an object the hook took before it was built.
    fn put_taken(&mut self, i: u64) {
        if matches!(self.pos(i), Pos::Taken) {
            return;
        }
        self.store(i, Slot::Taken);
    }

    /// Frees the memo's reference to an object the hook took.
    fn taken(&mut self, v: &Value) {
        let Value::Dict(n) = v else { return };
        let i = u64::from(n.memo.get());
        let is_it = |slot: &Slot| matches!(slot, Slot::Val(Value::Dict(m)) if Rc::ptr_eq(m, n));
        if let Pos::Dense(k) = self.pos(i)
            && let Some(slot) = self.dense.get_mut(k)
            && is_it(slot)
        {
            *slot = Slot::Taken;
        } else if let Some(slot) = self.sparse.get_mut(&i)
            && is_it(slot)
        {
            *slot = Slot::Taken;
        }
    }

    /// Cuts the run of taken slots off the end of the dense vector. Every slot
    /// it counts is removed, so the work over a whole decode is linear.
    fn trim(&mut self) {
        if !matches!(self.dense.last(), Some(Slot::Taken)) {
            return;
        }
        let taken = self
            .dense
            .iter()
            .rev()
            .take_while(|s| matches!(s, Slot::Taken))
            .count();
        self.work = self
            .work
            .saturating_add(u64::try_from(taken).unwrap_or(u64::MAX));
        let keep = self.dense.len().saturating_sub(taken);
        let shift = self.shift();
        let start = u64::try_from(keep)
            .unwrap_or(u64::MAX)
            .saturating_add(shift);
        let n = u64::try_from(taken).unwrap_or(0);
        let end = start.saturating_add(n);
        self.dense.truncate(keep);
        match self.gaps.last_mut() {
            // Adjacent to the last gap: one longer gap.
            Some(last) if last.end == start => {
                last.end = end;
                last.shift = last.shift.saturating_add(n);
            }
            _ => self.gaps.push(Gap {
                start,
                end,
                shift: shift.saturating_add(n),
            }),
        }
    }
}

/// Checks the first bytes: a protocol 2–5 pickle starts with PROTO.
pub fn check_header(head: &[u8]) -> Result<(), PickleError> {
    match head {
        [0x80, p, ..] if (2..=5).contains(p) => Ok(()),
        [0x80, p, ..] => Err(PickleError::Protocol(*p)),
        _ => {
            let hex: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
            Err(PickleError::NotPickle(if hex.is_empty() {
                "nothing: it is empty".to_string()
            } else {
                format!("bytes {}", hex.join(" "))
            }))
        }
    }
}

/// Memo indices below this have their key classification cached.
const KEY_CACHE: usize = 1 << 16;

/// Memo indices below this have the hook's code of their value cached.
const VALUE_CACHE: usize = 1 << 20;

/// What [`Hook::field`] said about the string at each memo index, so the fast
/// path compares no strings per record: 0 unknown, 1 ignored, 2 + k field k.
/// And what [`Hook::code`] said about the value at each memo index: 0 unknown,
/// else `(field + 1) << 32 | code`, so a record's memo-fetched values (the
/// action string, the shared `frames` list) are not read at all: on a 1 GiB
/// file, reading each entry's `frames` list node was a cache miss per entry.
/// Both are forgotten whenever the memo index is stored again.
#[derive(Default)]
struct KeyCache(Vec<u8>, Vec<u64>);

impl KeyCache {
    fn forget(&mut self, i: u64) {
        let Ok(k) = usize::try_from(i) else { return };
        if let Some(c) = self.0.get_mut(k) {
            *c = 0;
        }
        if let Some(c) = self.1.get_mut(k) {
            *c = 0;
        }
    }

    /// The value at memo index `i` as record field `field`: its cached code,
    /// or the hook's code for it (then cached), or the value itself; `None`
    /// when the memo has no such index.
    #[inline]
    fn value<'m>(
        &mut self,
        i: u64,
        field: usize,
        memo: &'m Memo,
        hook: &mut impl Hook,
    ) -> Option<Raw<'m>> {
        let idx = usize::try_from(i).ok();
        let tag = u64::try_from(field).unwrap_or(u64::MAX).saturating_add(1);
        if let Some(&c) = idx.and_then(|k| self.1.get(k))
            && c >> 32 == tag
        {
            return Some(Raw::Code(
                u32::try_from(c & 0xFFFF_FFFF).unwrap_or(u32::MAX),
            ));
        }
        let v = memo.get_ref(i)?;
        let Some(code) = hook.code(field, v) else {
            return Some(Raw::Val(v));
        };
        if let Some(k) = idx.filter(|&k| k < VALUE_CACHE) {
            if self.1.len() <= k {
                self.1.resize(k.saturating_add(1), 0);
            }
            if let Some(c) = self.1.get_mut(k) {
                *c = (tag << 32) | u64::from(code);
            }
        }
        Some(Raw::Code(code))
    }

    /// The field of the key at memo index `i`: `None` when it is not a
    /// string (the fast path gives up), `Some(None)` for an ignored key.
    #[inline]
    fn lookup(&mut self, i: u64, memo: &Memo, hook: &mut impl Hook) -> Option<Option<usize>> {
        let idx = usize::try_from(i).ok();
        match idx.and_then(|k| self.0.get(k)) {
            Some(1) => return Some(None),
            Some(&c) if c >= 2 => return Some(Some(usize::from(c.saturating_sub(2)))),
            _ => {}
        }
        let Some(Value::Str(key)) = memo.get_ref(i) else {
            return None;
        };
        let field = hook.field(key).filter(|&k| k < FIELDS);
        if let Some(k) = idx.filter(|&k| k < KEY_CACHE) {
            if self.0.len() <= k {
                self.0.resize(k.saturating_add(1), 0);
            }
            if let Some(c) = self.0.get_mut(k) {
                *c = field
                    .and_then(|f| u8::try_from(f).ok())
                    .map_or(1, |f| f.saturating_add(2));
            }
        }
        Some(field)
    }
}

/// An integer from LONG1 bytes, as a record field.
#[inline]
fn long_raw(b: &[u8]) -> Raw<'static> {
    // Addresses and sizes: up to 8 bytes, sign-extended.
    // Shifted in registers: copying the bytes into an array and reading it
    // back as a word stalled store forwarding on every address.
    if let (n @ 1..=8, Some(&last)) = (b.len(), b.last()) {
        let v = b
            .iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
        let bits = u32::try_from(n).unwrap_or(8).saturating_mul(8);
        let sign = if last & 0x80 != 0 {
            u64::MAX.checked_shl(bits).unwrap_or(0)
        } else {
            0
        };
        return Raw::Int(i64::from_le_bytes((v | sign).to_le_bytes()));
    }
    match long_value(b) {
        Value::Int(i) => Raw::Int(i),
        Value::U64(u) => Raw::U64(u),
        _ => Raw::Big,
    }
}

/// The fast path for trace entries: right after an `EMPTY_DICT` whose MARK
/// region feeds a list, reads `MEMOIZE|BINPUT|LONG_BINPUT? MARK (key value)*
/// SETITEMS` straight from the buffer — keys fetched from the memo and
/// classified once per memo index ([`KeyCache`]), values small integers,
/// LONG1, None, bools or memo fetches — and offers the fields to
/// [`Hook::record`]. Nothing is allocated or cloned per record. Anything else,
/// or a record that is not fully buffered, returns false having consumed
/// nothing, and the generic path decodes it.
fn fast_record(
    r: &mut Reader,
    memo: &mut Memo,
    keys: &mut KeyCache,
    hook: &mut impl Hook,
) -> Result<bool, PickleError> {
    // Usually 4 KiB are buffered already: no call.
    if r.hi.saturating_sub(r.lo) < 4096 {
        let left = usize::try_from(r.total.saturating_sub(r.pos)).unwrap_or(usize::MAX);
        r.fill_upto(left.min(4096))?;
    }
    let Some(b) = r.buf.get(r.lo..r.hi) else {
        return Ok(false);
    };
    // Slice patterns: one length check per opcode, the cursor in a register.
    let u32le = |a: &u8, b: &u8, c: &u8, d: &u8| u32::from_le_bytes([*a, *b, *c, *d]);
    let (dict_memo, mut rest) = match b {
        [0x94, b'(', rest @ ..] => (Some((memo.next, true)), rest),
        [b'q', i, b'(', rest @ ..] => (Some((u64::from(*i), false)), rest),
        [b'r', w, x, y, z, b'(', rest @ ..] => (Some((u64::from(u32le(w, x, y, z)), false)), rest),
        [b'(', rest @ ..] => (None, rest),
        _ => return Ok(false),
    };
    let m: &Memo = memo;
    // A memo fetch as a value: coded for a field the hook reads, else only
    // checked to exist.
    let fetch = |keys: &mut KeyCache, i: u64, slot: Option<usize>, hook: &mut _| match slot {
        Some(k) => keys.value(i, k, m, hook),
        None => m.get_ref(i).map(Raw::Val),
    };
    let mut fields = [Raw::Absent; FIELDS];
    // Strings inlined as values of keys the hook ignores (`compile_context`'s
    // "N/A" in real files, a new string per entry): memoized after the record
    // with the indices MEMOIZE gives them, as the generic path would.
    let mut next = match dict_memo {
        Some((i, true)) => i.saturating_add(1),
        _ => memo.next,
    };
    let mut strings: [Option<(u64, &[u8])>; 4] = [None; 4];
    let mut n_strings = 0usize;
    loop {
        let (key, after) = match rest {
            [b'u', tail @ ..] => {
                rest = tail;
                break;
            }
            [b'h', i, tail @ ..] => (u64::from(*i), tail),
            [b'j', w, x, y, z, tail @ ..] => (u64::from(u32le(w, x, y, z)), tail),
            _ => return Ok(false),
        };
        let Some(slot) = keys.lookup(key, m, hook) else {
            return Ok(false);
        };
        // Written straight into its field (building it aside and copying it
        // over stalled store forwarding on every pair).
        let mut ignored = Raw::Absent;
        let dst = match slot.and_then(|k| fields.get_mut(k)) {
            Some(f) => f,
            None => &mut ignored,
        };
        rest = match after {
            [b'K', v, tail @ ..] => {
                *dst = Raw::Int(i64::from(*v));
                tail
            }
            [b'M', x, y, tail @ ..] => {
                *dst = Raw::Int(i64::from(u16::from_le_bytes([*x, *y])));
                tail
            }
            [b'J', w, x, y, z, tail @ ..] => {
                *dst = Raw::Int(i64::from(i32::from_le_bytes([*w, *x, *y, *z])));
                tail
            }
            [0x8a, n, tail @ ..] => {
                let Some((digits, rest)) = tail.split_at_checked(usize::from(*n)) else {
                    return Ok(false);
                };
                *dst = match (digits, tail.first_chunk::<8>()) {
                    // An address or size: one 8-byte load from the buffer, the
                    // bytes past the integer masked off, sign-extended.
                    ([.., last], Some(word)) if digits.len() <= 8 => {
                        let bits = u32::try_from(digits.len()).unwrap_or(8).saturating_mul(8);
                        let keep = u64::MAX
                            .checked_shr(64u32.saturating_sub(bits))
                            .unwrap_or(0);
                        let v = u64::from_le_bytes(*word) & keep;
                        let sign = if last & 0x80 != 0 { !keep } else { 0 };
                        Raw::Int(i64::from_le_bytes((v | sign).to_le_bytes()))
                    }
                    _ => long_raw(digits),
                };
                rest
            }
            [b'N', tail @ ..] => {
                *dst = Raw::None;
                tail
            }
            [0x8c, _, ..] | [b'X', _, _, _, _, ..] if slot.is_none() => {
                let (text, tail) = match after {
                    [0x8c, n, tail @ ..] => match tail.split_at_checked(usize::from(*n)) {
                        Some(x) => x,
                        None => return Ok(false),
                    },
                    [_, w, x, y, z, tail @ ..] => {
                        let n = usize::try_from(u32le(w, x, y, z)).unwrap_or(usize::MAX);
                        match tail.split_at_checked(n) {
                            Some(x) => x,
                            None => return Ok(false),
                        }
                    }
                    _ => return Ok(false),
                };
                let (index, tail) = match tail {
                    [0x94, tail @ ..] => {
                        let i = next;
                        next = next.saturating_add(1);
                        (Some(i), tail)
                    }
                    [b'q', i, tail @ ..] => (Some(u64::from(*i)), tail),
                    [b'r', w, x, y, z, tail @ ..] => (Some(u64::from(u32le(w, x, y, z))), tail),
                    _ => (None, tail),
                };
                if let Some(i) = index {
                    let Some(slot) = strings.get_mut(n_strings) else {
                        return Ok(false);
                    };
                    *slot = Some((i, text));
                    n_strings = n_strings.saturating_add(1);
                    next = next.max(i.saturating_add(1));
                }
                tail
            }
            [0x88, tail @ ..] => {
                *dst = Raw::Bool(true);
                tail
            }
            [0x89, tail @ ..] => {
                *dst = Raw::Bool(false);
                tail
            }
            [b'h', i, tail @ ..] => {
                let Some(v) = fetch(keys, u64::from(*i), slot, hook) else {
                    return Ok(false);
                };
                *dst = v;
                tail
            }
            [b'j', w, x, y, z, tail @ ..] => {
                let Some(v) = fetch(keys, u64::from(u32le(w, x, y, z)), slot, hook) else {
                    return Ok(false);
                };
                *dst = v;
                tail
            }
            _ => return Ok(false),
        };
    }
    if !hook.record(&fields) {
        return Ok(false);
    }
    let c = b.len().saturating_sub(rest.len());
    r.lo = r.lo.saturating_add(c);
    r.pos = r.pos.saturating_add(u64::try_from(c).unwrap_or(0));
    if let Some((i, _)) = dict_memo {
        keys.forget(i);
        memo.put_taken(i);
        next = next.max(i.saturating_add(1));
    }
    for (i, text) in strings.iter().flatten() {
        keys.forget(*i);
        let v = Value::Str(Rc::new(String::from_utf8_lossy(text).into_owned()));
        memo.put(*i, &v);
    }
    memo.next = next;
    Ok(true)
}

/// Decodes a whole pickle of `len` bytes, read once from `open()`. `hook` sees
/// every item appended to a list.
pub fn decode<R: Read + Send>(
    mut open: impl FnMut() -> io::Result<R>,
    len: u64,
    hook: &mut impl Hook,
) -> Result<Value, PickleError> {
    let input = open().map_err(|e| PickleError::Io(e.to_string()))?;
    decode_input(input, Some(len), hook, &mut 0)
}

/// [`decode`], also counting the work done: opcodes read, items moved into
/// containers, fast-path records and memo slots examined. Each of these is
/// bounded by the number of opcodes (an item is moved once, a memo slot is
/// trimmed once), so the count stays within a small multiple of the input's
/// length on every input; the tests and the fuzz target check that it does,
/// which bounds time without timing anything.
pub fn decode_counting<R: Read + Send>(
    mut open: impl FnMut() -> io::Result<R>,
    len: u64,
    hook: &mut impl Hook,
) -> (Result<Value, PickleError>, u64) {
    let mut work = 0;
    let r = open()
        .map_err(|e| PickleError::Io(e.to_string()))
        .and_then(|input| decode_input(input, Some(len), hook, &mut work));
    (r, work)
}

/// Decodes a pickle from a stream of unknown length (standard input, a pipe,
/// a process substitution), read once to its end. Every claimed length is
/// checked against the bytes that arrive, so memory stays proportional to
/// the input.
pub fn decode_stream<R: Read + Send>(input: R, hook: &mut impl Hook) -> Result<Value, PickleError> {
    decode_input(input, None, hook, &mut 0)
}

fn decode_input<R: Read + Send>(
    input: R,
    len: Option<u64>,
    hook: &mut impl Hook,
    work: &mut u64,
) -> Result<Value, PickleError> {
    std::thread::scope(|scope| {
        // Small inputs (every test) get small buffers.
        let small = len.map_or(usize::MAX, |l| {
            usize::try_from(l).unwrap_or(usize::MAX).max(1)
        });
        let src = ReadAhead::spawn(
            scope,
            input,
            len.unwrap_or(u64::MAX),
            HEAD.min(small),
            CHUNK.min(small),
        );
        decode_from(&mut Reader::new(src, len), hook, work)
    })
}

/// [`decode`] once the input is being read ahead.
fn decode_from(r: &mut Reader, hook: &mut impl Hook, work: &mut u64) -> Result<Value, PickleError> {
    r.fill_upto(2)?;
    check_header(r.buf.get(r.lo..r.hi).unwrap_or_default())?;
    let mut memo = Memo {
        dense: Vec::new(),
        gaps: Vec::new(),
        sparse: HashMap::new(),
        next: 0,
        work: 0,
    };
    let result = decode_ops(r, hook, &mut memo, work);
    *work = work.saturating_add(memo.work);
    result
}

/// The opcode loop of [`decode_from`].
fn decode_ops(
    r: &mut Reader,
    hook: &mut impl Hook,
    memo: &mut Memo,
    work: &mut u64,
) -> Result<Value, PickleError> {
    let mut stack: Vec<Value> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    let mal = |at, why| PickleError::Malformed { at, why };
    // The depth of a container built from `items`, checked against the
    // limit; the items are sealed first, so a container later put into
    // itself is refused.
    let seal_items = |items: &[Value], at, work: &mut u64| {
        *work = work.saturating_add(u64::try_from(items.len()).unwrap_or(u64::MAX));
        let depth = items
            .iter()
            .map(Value::depth)
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        if depth > MAX_DEPTH {
            return Err(PickleError::TooDeep {
                limit: MAX_DEPTH,
                at,
            });
        }
        items.iter().for_each(Value::seal);
        Ok(depth)
    };
    let mut keys = KeyCache::default();
    let mut try_record = false;
    while let Some((at, op)) = r.next()? {
        *work = work.saturating_add(1);
        match op {
            Op::Proto(p) => {
                if !(2..=5).contains(&p) {
                    return Err(PickleError::Protocol(p));
                }
            }
            Op::Frame => {}
            Op::Stop => {
                let v = stack
                    .pop()
                    .ok_or_else(|| mal(at, "STOP on an empty stack"))?;
                return Ok(v);
            }
            Op::Mark => marks.push(stack.len()),
            Op::Pop => {
                if marks.last() == Some(&stack.len()) {
                    // pickle.py: POP of an empty frame above a mark pops the mark.
                    marks.pop();
                } else {
                    stack
                        .pop()
                        .ok_or_else(|| mal(at, "POP on an empty stack"))?;
                }
            }
            Op::PopMark => {
                let m = marks
                    .pop()
                    .ok_or_else(|| mal(at, "POP_MARK without MARK"))?;
                stack.truncate(m);
            }
            Op::Dup => {
                let v = stack
                    .last()
                    .cloned()
                    .ok_or_else(|| mal(at, "DUP on an empty stack"))?;
                stack.push(v);
            }
            Op::None => stack.push(Value::None),
            Op::Bool(b) => stack.push(Value::Bool(b)),
            Op::Int(i) => stack.push(Value::Int(i)),
            Op::Long(b) => stack.push(long_value(b)),
            Op::Float(f) => stack.push(Value::Float(f)),
            Op::Str(s) => stack.push(Value::Str(Rc::new(String::from_utf8_lossy(s).into_owned()))),
            Op::Bytes(b) => stack.push(Value::Bytes(Rc::new(b.to_vec()))),
            Op::EmptyList | Op::EmptySet => {
                stack.push(Value::List(Node::new(Vec::new(), 1, false)))
            }
            Op::EmptyDict => {
                let in_list = marks
                    .last()
                    .and_then(|m| m.checked_sub(1))
                    .is_some_and(|p| matches!(stack.get(p), Some(Value::List(_))));
                if in_list {
                    // Tried after this match, when `op` no longer borrows `r`.
                    try_record = true;
                } else {
                    stack.push(Value::Dict(Node::new(Vec::new(), 1, false)));
                }
            }
            Op::EmptyTuple => stack.push(Value::Tuple(Node::new(Vec::new(), 1, true))),
            Op::List | Op::Tuple | Op::FrozenSet => {
                let m = marks
                    .pop()
                    .ok_or_else(|| mal(at, "LIST/TUPLE without MARK"))?;
                let items = stack.split_off(m.min(stack.len()));
                let depth = seal_items(&items, at, work)?;
                stack.push(if matches!(op, Op::Tuple) {
                    Value::Tuple(Node::new(items, depth, true))
                } else {
                    let list = Node::new(Vec::with_capacity(items.len()), depth, false);
                    let id = Rc::as_ptr(&list) as usize;
                    let mut kept = list.items.borrow_mut();
                    for item in items {
                        if matches!(item, Value::Taken) {
                            hook.place(id, 1);
                        } else if hook.take(id, &item) {
                            memo.taken(&item);
                        } else {
                            kept.push(item);
                        }
                    }
                    drop(kept);
                    Value::List(list)
                });
            }
            Op::TupleN(n) => {
                let start = stack
                    .len()
                    .checked_sub(n)
                    .ok_or_else(|| mal(at, "TUPLE1/2/3 on a short stack"))?;
                let items = stack.split_off(start);
                let depth = seal_items(&items, at, work)?;
                stack.push(Value::Tuple(Node::new(items, depth, true)));
            }
            Op::Dict => {
                let m = marks.pop().ok_or_else(|| mal(at, "DICT without MARK"))?;
                let items = stack.split_off(m.min(stack.len()));
                if !items.len().is_multiple_of(2) {
                    return Err(mal(at, "DICT with an odd number of items"));
                }
                let depth = seal_items(&items, at, work)?;
                let mut pairs = Vec::with_capacity(items.len() / 2);
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                stack.push(Value::Dict(Node::new(pairs, depth, false)));
            }
            Op::Append | Op::Appends | Op::AddItems => {
                let m = if matches!(op, Op::Append) {
                    stack.len().checked_sub(1)
                } else {
                    marks.pop()
                }
                .ok_or_else(|| mal(at, "APPEND(S) without an item or MARK"))?
                .min(stack.len());
                let list = match m.checked_sub(1).and_then(|p| stack.get(p)) {
                    Some(Value::List(l)) => Rc::clone(l),
                    _ => return Err(mal(at, "APPEND to something that is not a list")),
                };
                let items = stack.get(m..).unwrap_or_default();
                let depth = seal_items(items, at, work)?;
                if list.sealed.get() {
                    return Err(mal(
                        at,
                        "a list is changed after it was shared (a recursive structure?)",
                    ));
                }
                list.depth.set(list.depth.get().max(depth));
                let id = Rc::as_ptr(&list) as usize;
                let mut v = list.items.borrow_mut();
                v.reserve(items.len());
                // In order: records taken early and items taken now interleave;
                // a run of taken records is placed at once.
                let mut run = 0usize;
                for item in stack.drain(m..) {
                    if matches!(item, Value::Taken) {
                        run = run.saturating_add(1);
                        continue;
                    }
                    if run > 0 {
                        hook.place(id, std::mem::take(&mut run));
                    }
                    if hook.take(id, &item) {
                        memo.taken(&item);
                    } else {
                        v.push(item);
                    }
                }
                hook.place(id, run);
                memo.trim();
            }
            Op::SetItem | Op::SetItems => {
                let m = if matches!(op, Op::SetItem) {
                    stack.len().checked_sub(2)
                } else {
                    marks.pop()
                }
                .ok_or_else(|| mal(at, "SETITEM(S) without items or MARK"))?
                .min(stack.len());
                let dict = match m.checked_sub(1).and_then(|p| stack.get(p)) {
                    Some(Value::Dict(d)) => Rc::clone(d),
                    _ => return Err(mal(at, "SETITEM on something that is not a dict")),
                };
                let items = stack.get(m..).unwrap_or_default();
                if !items.len().is_multiple_of(2) {
                    return Err(mal(at, "SETITEMS with an odd number of items"));
                }
                let depth = seal_items(items, at, work)?;
                if dict.sealed.get() {
                    return Err(mal(
                        at,
                        "a dict is changed after it was shared (a recursive structure?)",
                    ));
                }
                dict.depth.set(dict.depth.get().max(depth));
                let mut d = dict.items.borrow_mut();
                d.reserve(items.len() / 2);
                // A repeated key is kept twice; lookups take the last one, so
                // the later value wins, as in Python.
                let mut it = stack.drain(m..);
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    d.push((k, v));
                }
            }
            Op::Put(i) => {
                let v = stack
                    .last()
                    .ok_or_else(|| mal(at, "PUT on an empty stack"))?;
                keys.forget(i);
                memo.put(i, v);
            }
            Op::Memoize => {
                let v = stack
                    .last()
                    .ok_or_else(|| mal(at, "MEMOIZE on an empty stack"))?;
                let i = memo.next;
                memo.next = memo.next.saturating_add(1);
                keys.forget(i);
                memo.put(i, v);
            }
            Op::Get(i) => {
                stack.push(memo.get(i, at)?);
            }
        }
        // MEMOIZE counts every memoized object, PUT sets explicit indices;
        // keep `next` past explicit ones so a mix stays consistent.
        if let Op::Put(i) = op {
            memo.next = memo.next.max(i.saturating_add(1));
        }
        if try_record {
            try_record = false;
            // Consecutive entries of the same list: the next `EMPTY_DICT` is
            // in the same MARK region, so it is tried here directly.
            // Each pass stands for one `EMPTY_DICT` already read.
            let mut taken = 0usize;
            let generic = loop {
                if !fast_record(r, memo, &mut keys, hook)? {
                    break true;
                }
                taken = taken.saturating_add(1);
                *work = work.saturating_add(1);
                if r.lo < r.hi && r.buf.get(r.lo) == Some(&b'}') {
                    r.lo = r.lo.saturating_add(1);
                    r.pos = r.pos.saturating_add(1);
                } else {
                    break false;
                }
            };
            // Pushed together, after the loop (a push per record reloaded a
            // half-written temporary).
            stack.resize_with(stack.len().saturating_add(taken), || Value::Taken);
            if generic {
                // The last `EMPTY_DICT` read is decoded the generic way.
                stack.push(Value::Dict(Node::new(Vec::new(), 1, false)));
            }
        }
    }
    Err(PickleError::NoStop(r.at()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects the `a`/`b` integer fields of every record the fast path offers.
    #[derive(Default)]
    struct Fields(Vec<[Option<i64>; 2]>);

    impl Hook for Fields {
        fn take(&mut self, _list: usize, _item: &Value) -> bool {
            false
        }
        fn field(&mut self, key: &str) -> Option<usize> {
            ["a", "b"].iter().position(|k| *k == key)
        }
        fn record(&mut self, fields: &[Raw<'_>; FIELDS]) -> bool {
            let int = |r: Raw<'_>| match r {
                Raw::Int(i) => Some(i),
                _ => None,
            };
            self.0.push([int(fields[0]), int(fields[1])]);
            true
        }
    }

    #[test]
    fn fast_path_rereads_a_key_whose_memo_slot_was_stored_again() {
        let mut p = vec![0x80, 2, b']', b'q', 0, b'('];
        // A first entry, decoded the generic way, memoizes the keys "a" (2), "b" (3).
        p.extend_from_slice(b"}q\x01(X\x01\x00\x00\x00aq\x02K\x01X\x01\x00\x00\x00bq\x03K\x02u");
        // The fast path: {"a": 11, "b": 12} with both keys fetched from the memo.
        p.extend_from_slice(b"}q\x04(h\x02K\x0bh\x03K\x0cu");
        // Memo slot 2 now holds "b" (and the string is popped again).
        p.extend_from_slice(b"X\x01\x00\x00\x00bq\x020");
        // {slot 2: 21} is {"b": 21}, not {"a": 21}.
        p.extend_from_slice(b"}q\x05(h\x02K\x15ue.");
        let mut hook = Fields::default();
        let v = decode(|| Ok(&p[..]), p.len() as u64, &mut hook).unwrap();
        assert_eq!(hook.0, vec![[Some(11), Some(12)], [None, Some(21)]]);
        let Value::List(l) = v else {
            panic!("not a list")
        };
        assert_eq!(l.items.borrow().len(), 1, "only the generic entry is kept");
    }

    /// Records the `a` integer and the `b` string of every fast-path record.
    #[derive(Default)]
    struct IntAndText(Vec<(Option<i64>, Option<String>)>);

    impl Hook for IntAndText {
        fn take(&mut self, _list: usize, _item: &Value) -> bool {
            false
        }
        fn field(&mut self, key: &str) -> Option<usize> {
            ["a", "b"].iter().position(|k| *k == key)
        }
        fn record(&mut self, fields: &[Raw<'_>; FIELDS]) -> bool {
            let a = match fields[0] {
                Raw::Int(i) => Some(i),
                _ => None,
            };
            let b = match fields[1] {
                Raw::Val(v) => v.as_str().map(str::to_string),
                _ => None,
            };
            self.0.push((a, b));
            true
        }
    }

    #[test]
    fn fast_path_memoizes_strings_inlined_under_ignored_keys() {
        // Protocol 4, MEMOIZE numbering: list 0; a generic first entry: dict 1,
        // keys "a" 2, "b" 3, "z" 4.
        let mut p =
            b"\x80\x04]\x94(}\x94(\x8c\x01a\x94K\x01\x8c\x01b\x94K\x02\x8c\x01z\x94K\x00u".to_vec();
        // Fast: dict 5, {"a": 11, "z": "N/A"} with "N/A" memoized as 6.
        p.extend_from_slice(b"}\x94(h\x02K\x0bh\x04\x8c\x03N/A\x94u");
        // Fast: dict 7, {"a": 12, "b": memo 6}.
        p.extend_from_slice(b"}\x94(h\x02K\x0ch\x03h\x06ue.");
        let mut hook = IntAndText::default();
        decode(|| Ok(&p[..]), p.len() as u64, &mut hook).unwrap();
        assert_eq!(
            hook.0,
            vec![(Some(11), None), (Some(12), Some("N/A".to_string()))]
        );
    }

    #[test]
    fn fast_path_long1_values_match_the_generic_decoder() {
        let mut p =
            b"\x80\x02]q\x00(}q\x01(X\x01\x00\x00\x00aq\x02K\x01X\x01\x00\x00\x00bq\x03K\x02u"
                .to_vec();
        // {"a": -1, "b": 0x7f8a400000}, {"a": -2 (8 bytes), "b": -32768 (2 bytes)}
        p.extend_from_slice(b"}q\x04(h\x02\x8a\x01\xffh\x03\x8a\x06\x00\x00\x40\x8a\x7f\x00u");
        p.extend_from_slice(
            b"}q\x05(h\x02\x8a\x08\xfe\xff\xff\xff\xff\xff\xff\xffh\x03\x8a\x02\x00\x80u",
        );
        // The last one near the end of the input (fewer than 8 bytes follow).
        p.extend_from_slice(b"}q\x06(h\x02\x8a\x01\x05ue.");
        let mut hook = Fields::default();
        decode(|| Ok(&p[..]), p.len() as u64, &mut hook).unwrap();
        assert_eq!(
            hook.0,
            vec![
                [Some(-1), Some(0x007f_8a40_0000)],
                [Some(-2), Some(-32768)],
                [Some(5), None]
            ]
        );
    }

    #[test]
    fn long_raw_agrees_with_long_value() {
        let samples: [&[u8]; 9] = [
            &[0x01],
            &[0xff],
            &[0x00, 0x80],
            &[0x00, 0x00, 0x40, 0x8a, 0x7f],
            &[0x00, 0x02, 0x40, 0x8a, 0x7f, 0x00],
            &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00],
            &[0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x01],
        ];
        for b in samples {
            let want = match long_value(b) {
                Value::Int(i) => format!("int {i}"),
                Value::U64(u) => format!("u64 {u}"),
                _ => "big".to_string(),
            };
            let got = match long_raw(b) {
                Raw::Int(i) => format!("int {i}"),
                Raw::U64(u) => format!("u64 {u}"),
                _ => "big".to_string(),
            };
            assert_eq!(got, want, "{b:02x?}");
        }
    }

    fn dec(b: &[u8]) -> Result<Value, PickleError> {
        decode(|| Ok(b), b.len() as u64, &mut Keep)
    }

    #[test]
    fn decodes_shared_lists_by_reference() {
        // pickle.dumps([x, x], protocol=4) with x = [1]
        let b = b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00]\x94(]\x94K\x01ah\x01e.";
        let v = dec(b).unwrap();
        let Value::List(l) = v else { panic!() };
        let items = l.items.borrow();
        assert_eq!(items.len(), 2);
        let (Value::List(a), Value::List(b)) = (&items[0], &items[1]) else {
            panic!()
        };
        assert!(Rc::ptr_eq(a, b));
    }

    #[test]
    fn values_stay_small() {
        assert_eq!(std::mem::size_of::<Value>(), 16);
        assert_eq!(std::mem::size_of::<Slot>(), 16);
    }

    #[test]
    fn refuses_globals_with_offset() {
        // pickle.dumps(os.system) protocol 2 style: GLOBAL 'posix system'
        let b = b"\x80\x02cposix\nsystem\nq\x00.";
        let e = dec(b).err().unwrap();
        assert!(e.to_string().contains("GLOBAL (0x63) at byte 2"), "{e}");
    }

    #[test]
    fn refuses_huge_claimed_lengths_without_allocating() {
        let b = b"\x80\x04X\xff\xff\xff\xff";
        let e = dec(b).err().unwrap();
        assert!(matches!(e, PickleError::Truncated { .. }), "{e}");
    }

    #[test]
    fn long_integers_beyond_u64_do_not_panic() {
        // LONG1 of u64::MAX (9 bytes) and 2**80
        let b = b"\x80\x04\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00.";
        assert!(matches!(dec(b).unwrap(), Value::U64(u64::MAX)));
        let b = b"\x80\x04\x8a\x0b\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01.";
        assert!(matches!(dec(b).unwrap(), Value::Big));
        let b = b"\x80\x04\x8a\x01\xff.";
        assert!(matches!(dec(b).unwrap(), Value::Int(-1)));
    }

    #[test]
    fn bounds_nesting_depth() {
        let mut b = b"\x80\x04".to_vec();
        b.extend(std::iter::repeat_n(b']', 100));
        b.extend(std::iter::repeat_n(b'a', 99));
        b.push(b'.');
        let e = dec(&b).err().unwrap();
        assert!(e.to_string().contains("deeper than 64"), "{e}");
    }

    #[test]
    fn refuses_recursive_structures() {
        // a = []; a.append(a)  → ]q\x00h\x00a
        let b = b"\x80\x02]q\x00h\x00a.";
        assert!(dec(b).is_err());
    }

    #[test]
    fn rejects_non_pickles_and_missing_stop() {
        assert!(matches!(dec(b"hello"), Err(PickleError::NotPickle(_))));
        assert!(matches!(dec(b""), Err(PickleError::NotPickle(_))));
        assert!(matches!(dec(b"\x80\x04]"), Err(PickleError::NoStop(_))));
        assert!(matches!(dec(b"\x80\x01."), Err(PickleError::Protocol(1))));
    }
}
