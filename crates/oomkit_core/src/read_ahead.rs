//! Reading a large input on a second thread while the caller works on what
//! was read before.
//!
//! Why: on a 1 GiB log or snapshot, the kernel's copy out of the page cache
//! (`read`) was 5–40 % of a single-threaded run. A thread that fills chunk
//! buffers ahead of the consumer takes that copy off the critical path, and
//! nothing is copied twice: each filled buffer is handed over whole and handed
//! back empty for the next read ([`ReadAhead::recycle`]). At most
//! [`IN_FLIGHT`] + 1 buffers exist, so memory stays bounded whatever the input.
//!
//! Each buffer keeps `head` spare bytes in front of the data, so a consumer
//! that has an unfinished record at the end of one chunk can copy those few
//! bytes in front of the next chunk's data instead of copying the chunk.

use std::io::{self, Read};
use std::sync::mpsc;
use std::thread::Scope;

/// Buffers filled and not yet taken, at most.
pub const IN_FLIGHT: usize = 2;

/// Reads go to a page-aligned window of each buffer: the kernel copied a file
/// into malloc's 16-byte-offset buffers at a third of the speed (perf:
/// `_copy_to_iter`; measured on explain's 1 GiB log), as grep and dd do not.
const PAGE: usize = 4096;

/// A filled buffer: the input's bytes are `buf[head..head + len]`.
#[derive(Debug)]
pub struct Chunk {
    /// The buffer; `buf[..head]` is spare room for the consumer.
    pub buf: Vec<u8>,
    /// Spare bytes before the data: at least the `head` asked for (more, to
    /// start the data on a page).
    pub head: usize,
    /// Bytes of input in this chunk (never 0).
    pub len: usize,
}

impl Chunk {
    /// The input's bytes in this chunk.
    pub fn data(&self) -> &[u8] {
        self.buf
            .get(self.head..self.head.saturating_add(self.len))
            .unwrap_or_default()
    }
}

/// The consuming end: chunks in input order, then `None` at the end of the
/// input (or after an error, which is returned once).
pub struct ReadAhead {
    full: mpsc::Receiver<io::Result<Chunk>>,
    empty: mpsc::SyncSender<Vec<u8>>,
}

impl ReadAhead {
    /// Starts reading `reader` on a thread of `scope`: at most `limit` bytes,
    /// in chunks of up to `chunk` bytes, each with `head` spare bytes in front.
    /// The thread ends at the end of the input, after an error, or when the
    /// returned `ReadAhead` is dropped.
    pub fn spawn<'scope, R: Read + Send + 'scope>(
        scope: &'scope Scope<'scope, '_>,
        reader: R,
        limit: u64,
        head: usize,
        chunk: usize,
    ) -> ReadAhead {
        let chunk = chunk.max(1);
        let (full_tx, full) = mpsc::sync_channel::<io::Result<Chunk>>(IN_FLIGHT);
        let (empty, empty_rx) = mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT.saturating_add(1));
        for _ in 0..=IN_FLIGHT {
            // The receiver is alive: this cannot fail.
            let _ = empty.send(Vec::new());
        }
        scope.spawn(move || {
            let mut reader = reader.take(limit);
            // Ends when the input does, or when the consumer is gone.
            for mut buf in empty_rx {
                let want = head.saturating_add(chunk).saturating_add(PAGE);
                if buf.len() != want {
                    // Zeroed by the allocator (a fresh mapping), not byte by byte.
                    buf = vec![0u8; want];
                }
                let align = buf
                    .get(head..)
                    .map_or(0, |s| s.as_ptr().align_offset(PAGE))
                    .min(PAGE);
                let start = head.saturating_add(align);
                let msg = loop {
                    let Some(dst) = buf.get_mut(start..start.saturating_add(chunk)) else {
                        return;
                    };
                    match reader.read(dst) {
                        Ok(0) => return,
                        Ok(len) => {
                            break Ok(Chunk {
                                buf,
                                head: start,
                                len,
                            });
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => break Err(e),
                    }
                };
                let failed = msg.is_err();
                if full_tx.send(msg).is_err() || failed {
                    return;
                }
            }
        });
        ReadAhead { full, empty }
    }

    /// The next chunk; `None` at the end of the input.
    pub fn next_chunk(&mut self) -> Option<io::Result<Chunk>> {
        self.full.recv().ok()
    }

    /// Hands a buffer back to be filled again (any buffer: its size is reset).
    pub fn recycle(&self, buf: Vec<u8>) {
        // The reader may have stopped (end of input): then the buffer is dropped.
        let _ = self.empty.try_send(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that returns at most 7 bytes per call, and one `Interrupted`.
    struct Trickle<'a> {
        data: &'a [u8],
        interrupted: bool,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if !self.interrupted {
                self.interrupted = true;
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(7).min(self.data.len());
            let (now, rest) = self.data.split_at(n);
            buf.get_mut(..n).unwrap_or_default().copy_from_slice(now);
            self.data = rest;
            Ok(n)
        }
    }

    fn collect(data: &[u8], limit: u64, head: usize, chunk: usize) -> (Vec<u8>, usize) {
        std::thread::scope(|s| {
            let r = Trickle {
                data,
                interrupted: false,
            };
            let mut ra = ReadAhead::spawn(s, r, limit, head, chunk);
            let mut out = Vec::new();
            let mut chunks = 0;
            while let Some(c) = ra.next_chunk() {
                let c = c.expect("no error");
                assert!(c.len > 0 && c.len <= chunk);
                assert!(c.head >= head && c.head < head + PAGE);
                assert_eq!(c.data().as_ptr().align_offset(PAGE), 0, "page-aligned");
                out.extend_from_slice(c.data());
                chunks += 1;
                ra.recycle(c.buf);
            }
            (out, chunks)
        })
    }

    #[test]
    fn every_byte_arrives_once_in_order() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (out, chunks) = collect(&data, u64::MAX, 16, 5);
        assert_eq!(out, data);
        assert_eq!(chunks, 2000);
    }

    #[test]
    fn reading_stops_at_the_limit() {
        let data = vec![1u8; 1000];
        let (out, _) = collect(&data, 100, 0, 64);
        assert_eq!(out.len(), 100);
    }

    #[test]
    fn errors_arrive_once_and_end_the_input() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        std::thread::scope(|s| {
            let mut ra = ReadAhead::spawn(s, Broken, u64::MAX, 0, 8);
            let first = ra.next_chunk().expect("an error");
            assert_eq!(first.expect_err("error").to_string(), "disk on fire");
            assert!(ra.next_chunk().is_none());
        });
    }

    #[test]
    fn dropping_the_consumer_ends_the_thread() {
        // An endless input: the scope would never end if the thread did not.
        std::thread::scope(|s| {
            let mut ra = ReadAhead::spawn(s, io::repeat(0), u64::MAX, 0, 1024);
            let c = ra.next_chunk().expect("a chunk").expect("no error");
            assert_eq!(c.len, 1024);
            drop(ra);
        });
    }
}
