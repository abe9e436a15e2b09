//! Opening inputs: files or stdin, sniffed so that a model checkpoint passed
//! by mistake is refused in one line (exit 2) instead of being scanned, and
//! UTF-16 logs (PowerShell's `>` redirect) are decoded. Invalid UTF-8 inside
//! a text log is normal (progress bars, other encodings) and is replaced
//! later, line by line.

use std::fs::File;
use std::io::{self, Cursor, Read};
use std::path::Path;

use anyhow::{Context, bail};

const SNIFF: usize = 8192;

/// An opened input.
pub struct Input {
    /// How to name it in messages (`-` is "standard input").
    pub name: String,
    /// The text, decoded to UTF-8 where it was UTF-16.
    pub reader: Box<dyn Read + Send>,
}

/// Opens a path, or stdin for `-`.
pub fn open(path: &Path) -> anyhow::Result<Input> {
    if path.as_os_str() == "-" {
        return sniffed("standard input".into(), Box::new(io::stdin()));
    }
    let name = path.display().to_string();
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {name}"))?;
    if meta.is_dir() {
        bail!("{name} is a directory, not a log file (pass the log files inside it)");
    }
    let file = File::open(path).with_context(|| format!("cannot read {name}"))?;
    sniffed(name, Box::new(file))
}

/// Reads a whole small input (a config, a header, a source file) into memory,
/// refusing more than `limit` bytes with an error naming the input and the
/// limit. Regular files are checked by size first; devices, FIFOs and process
/// substitutions (`<(…)`) are read, but never past the limit, so an endless
/// device (`/dev/zero`, `/dev/urandom`) ends in an error instead of exhausting
/// memory.
pub fn read_limited(name: &str, reader: impl Read, limit: u64) -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .with_context(|| format!("cannot read {name}"))?;
    if buf.len() as u64 > limit {
        bail!(
            "{name} is larger than the {} limit for this kind of input (an endless device or the wrong file?)",
            oomkit_core::Bytes(limit)
        );
    }
    Ok(buf)
}

/// [`read_limited`] for a path: a directory or a regular file over the limit
/// is refused before anything is read.
pub fn read_file_limited(path: &Path, limit: u64) -> anyhow::Result<Vec<u8>> {
    let name = path.display().to_string();
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {name}"))?;
    if meta.is_dir() {
        bail!("{name} is a directory, not a file");
    }
    if meta.is_file() && meta.len() > limit {
        bail!(
            "{name} is {} long, over the {} limit for this kind of input",
            oomkit_core::Bytes(meta.len()),
            oomkit_core::Bytes(limit)
        );
    }
    let file = File::open(path).with_context(|| format!("cannot read {name}"))?;
    read_limited(&name, file, limit)
}

fn sniffed(name: String, mut r: Box<dyn Read + Send>) -> anyhow::Result<Input> {
    let mut head = Vec::with_capacity(SNIFF);
    (&mut r)
        .take(SNIFF as u64)
        .read_to_end(&mut head)
        .with_context(|| format!("cannot read {name}"))?;
    if let Some(rest) = head.strip_prefix(&[0xFF, 0xFE]) {
        let inner = Cursor::new(rest.to_vec()).chain(r);
        return Ok(Input {
            name,
            reader: Box::new(Utf16Reader::new(inner, true)),
        });
    }
    if let Some(rest) = head.strip_prefix(&[0xFE, 0xFF]) {
        let inner = Cursor::new(rest.to_vec()).chain(r);
        return Ok(Input {
            name,
            reader: Box::new(Utf16Reader::new(inner, false)),
        });
    }
    if let Some(kind) = binary_kind(&head) {
        bail!("{name} is not a text log: it looks like {kind}");
    }
    let head = head
        .strip_prefix(&[0xEF, 0xBB, 0xBF])
        .map(<[u8]>::to_vec)
        .unwrap_or(head);
    Ok(Input {
        name,
        reader: Box::new(Cursor::new(head).chain(r)),
    })
}

/// Recognises files users pass by mistake.
fn binary_kind(head: &[u8]) -> Option<&'static str> {
    let magic: &[(&[u8], &str)] = &[
        (
            b"PK\x03\x04",
            "a zip archive (a PyTorch .pt/.pth checkpoint?)",
        ),
        (b"GGUF", "a GGUF model file"),
        (b"\x89HDF", "an HDF5 file (a Keras .h5 model?)"),
        (
            b"\x1f\x8b",
            "gzip-compressed data (decompress it first: zcat FILE | oomkit explain)",
        ),
        (
            b"\x28\xb5\x2f\xfd",
            "zstd-compressed data (decompress it first: zstdcat FILE | oomkit explain)",
        ),
        (b"\x7fELF", "an executable"),
        (
            b"\x80\x02",
            "a Python pickle (a checkpoint or memory snapshot? try `oomkit snapshot`)",
        ),
        (
            b"\x80\x03",
            "a Python pickle (a checkpoint or memory snapshot? try `oomkit snapshot`)",
        ),
        (
            b"\x80\x04",
            "a Python pickle (a checkpoint or memory snapshot? try `oomkit snapshot`)",
        ),
        (
            b"\x80\x05",
            "a Python pickle (a checkpoint or memory snapshot? try `oomkit snapshot`)",
        ),
        (b"\x93NUMPY", "a NumPy array file"),
        (b"\x89PNG", "a PNG image"),
        (b"\xff\xd8\xff", "a JPEG image"),
        (b"GIF8", "a GIF image"),
        (b"%PDF-", "a PDF document"),
        (
            b"BZh",
            "bzip2-compressed data (decompress it first: bzcat FILE | oomkit explain)",
        ),
        (
            b"\xfd7zXZ\x00",
            "xz-compressed data (decompress it first: xzcat FILE | oomkit explain)",
        ),
        (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
        (b"SQLite format 3\x00", "an SQLite database"),
    ];
    if let Some((_, kind)) = magic.iter().find(|(m, _)| head.starts_with(m)) {
        return Some(kind);
    }
    // safetensors: u64 little-endian header length, then a JSON object.
    if let Some((len, b'{')) = head
        .split_first_chunk::<8>()
        .and_then(|(l, r)| Some((l, *r.first()?)))
    {
        let n = u64::from_le_bytes(*len);
        if n > 1 && n < (100 << 20) {
            return Some("a safetensors model file");
        }
    }
    if head.get(257..262) == Some(b"ustar") {
        return Some("a tar archive");
    }
    not_text(head)
}

/// Whether a head of unknown format is binary. Text in any encoding (UTF-8,
/// Latin-1, CP1251, …) has almost no C0 control bytes besides whitespace,
/// ESC (colours), BS and BEL; random or packed binary data has about one
/// byte in eight. NUL bytes are tolerated after text (a log cut short by a
/// crash ends in zero-filled blocks) but not from the start (`/dev/zero`, a
/// sparse file).
fn not_text(head: &[u8]) -> Option<&'static str> {
    let nul = head.iter().filter(|&&b| b == 0).count();
    if head.first() == Some(&0) && nul * 2 >= head.len() {
        return Some("binary data (it starts with NUL bytes)");
    }
    let control = head
        .iter()
        .filter(|&&b| b < 0x20 && b != 0 && !b"\t\n\r\x0b\x0c\x1b\x08\x07".contains(&b))
        .count();
    let text = head.len() - nul;
    if control * 50 > text {
        return Some("binary data (control bytes that text does not contain)");
    }
    None
}

/// Decodes UTF-16 to UTF-8 in a stream, replacing unpaired surrogates.
struct Utf16Reader<R> {
    inner: R,
    little_endian: bool,
    out: Vec<u8>,
    pos: usize,
    odd: Option<u8>,
    buf: Vec<u8>,
}

impl<R: Read> Utf16Reader<R> {
    fn new(inner: R, little_endian: bool) -> Self {
        Utf16Reader {
            inner,
            little_endian,
            out: Vec::new(),
            pos: 0,
            odd: None,
            buf: vec![0; 64 << 10],
        }
    }
}

impl<R: Read> Read for Utf16Reader<R> {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.out.len() {
            let n = self.inner.read(&mut self.buf)?;
            if n == 0 {
                return Ok(0);
            }
            let mut bytes: Vec<u8> = self.odd.take().into_iter().collect();
            bytes.extend_from_slice(self.buf.get(..n).unwrap_or_default());
            if bytes.len() % 2 == 1 {
                self.odd = bytes.pop();
            }
            let units = bytes.as_chunks::<2>().0.iter().map(|&c| {
                if self.little_endian {
                    u16::from_le_bytes(c)
                } else {
                    u16::from_be_bytes(c)
                }
            });
            let text: String = char::decode_utf16(units)
                .map(|c| c.unwrap_or('\u{FFFD}'))
                .collect();
            self.out = text.into_bytes();
            self.pos = 0;
        }
        let pending = self.out.get(self.pos..).unwrap_or_default();
        let n = dst.len().min(pending.len());
        if let (Some(to), Some(from)) = (dst.get_mut(..n), pending.get(..n)) {
            to.copy_from_slice(from);
        }
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_checkpoints_and_compressed_files() {
        assert!(
            binary_kind(b"PK\x03\x04rest")
                .unwrap()
                .contains("checkpoint")
        );
        assert!(binary_kind(b"\x1f\x8b\x08").unwrap().contains("zcat"));
        let mut st = 20u64.to_le_bytes().to_vec();
        st.extend_from_slice(b"{\"__metadata__\":{}}");
        assert!(binary_kind(&st).unwrap().contains("safetensors"));
        assert!(binary_kind(b"plain text\n").is_none());
        assert!(binary_kind(b"progress \xff\xfe bar\n").is_none());
        assert!(binary_kind(b"%PDF-1.7\n").unwrap().contains("PDF"));
        assert!(binary_kind(b"\x89PNG\r\n").unwrap().contains("PNG"));
    }

    #[test]
    fn random_bytes_and_zeros_are_binary_but_a_crash_cut_log_is_text() {
        // A fixed pseudo-random sequence (xorshift), like /dev/urandom.
        let mut x: u32 = 0x9E37_79B9;
        let random: Vec<u8> = (0..8192)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x.to_le_bytes()[0]
            })
            .collect();
        assert!(binary_kind(&random).is_some());
        assert!(binary_kind(&[0u8; 8192]).is_some());
        let mut cut = b"step 1 loss 0.5\nRuntimeError: CUDA out of memory.\n".to_vec();
        cut.extend_from_slice(&[0u8; 4096]);
        assert!(binary_kind(&cut).is_none());
        let latin1 = b"\xe9poque 1: perte 0.5 \xe0 l'\xe9tape 3\n".repeat(100);
        assert!(binary_kind(&latin1).is_none());
    }

    #[test]
    fn decodes_utf16_logs() {
        let text = "CUDA out of memory. Tried to allocate 2.00 GiB\n";
        let mut bytes = vec![0xFF, 0xFE];
        for u in text.encode_utf16() {
            bytes.extend_from_slice(&u.to_le_bytes());
        }
        let mut input = sniffed("x".into(), Box::new(Cursor::new(bytes))).unwrap();
        let mut s = String::new();
        input.reader.read_to_string(&mut s).unwrap();
        assert_eq!(s, text);
    }

    #[test]
    fn limited_reads_stop_at_the_limit() {
        assert_eq!(read_limited("x", &b"abc"[..], 3).unwrap(), b"abc");
        let err = read_limited("x", io::repeat(0), 1024).unwrap_err();
        assert!(
            err.to_string().contains("larger than the 1.00 KiB limit"),
            "{err}"
        );
    }
}
