//! Python source bytes → text, as Python reads them (PEP 263 and PEP 3120), and back.
//!
//! - A UTF-8 BOM is dropped (and kept when `--fix` writes the file back).
//! - A coding declaration on line 1 or 2 (`# -*- coding: latin-1 -*-`,
//!   `# vim: set fileencoding=cp1252 :`) names the encoding; its PEP 263 / Python name is
//!   mapped to a WHATWG label and decoded with `encoding_rs`. Note that WHATWG reads
//!   `latin-1`/`iso-8859-1` as windows-1252, which differs from Python only in
//!   0x80–0x9F (C1 controls in Python, `€`-style characters here), bytes that do not
//!   occur in code. An unknown coding is an error.
//! - Without a declaration the file must be UTF-8.
//! - UTF-16/UTF-32 (a BOM, or a declaration naming them) are refused: Python itself
//!   only reads ASCII-compatible source encodings.
//! - A NUL byte means a binary file (a checkpoint, a pickle), not source.
//!
//! Diagnostics refer to the decoded text: lines and character columns are what an
//! editor shows for the file in its own encoding.

use encoding_rs::{Encoding, UTF_8};

/// A decoded source file.
#[derive(Debug)]
pub struct Decoded {
    /// The text.
    pub text: String,
    /// The encoding it was read in (UTF-8 unless a coding declaration said otherwise).
    pub encoding: &'static Encoding,
    /// The coding as the file names it (`latin-1`), if it has a declaration.
    pub declared: Option<String>,
    /// Whether the file began with a UTF-8 BOM.
    pub bom: bool,
}

/// Why bytes are not Python source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A NUL byte.
    #[error("a binary file (it contains NUL bytes), not Python source")]
    Binary,
    /// A UTF-16 or UTF-32 BOM.
    #[error(
        "UTF-16 or UTF-32 text: Python only reads ASCII-compatible source encodings; convert it to UTF-8"
    )]
    Utf16,
    /// A coding declaration naming an encoding oomkit does not know.
    #[error("unknown encoding `{0}` in the coding declaration (PEP 263)")]
    UnknownCoding(String),
    /// A coding declaration naming an encoding Python cannot read source in.
    #[error(
        "the coding declaration names `{0}`, which is not ASCII-compatible: Python cannot read source in it"
    )]
    UnsupportedCoding(String),
    /// The bytes are not valid in the declared encoding.
    #[error("not valid {0} (the encoding its coding declaration names)")]
    InvalidDeclared(String),
    /// A BOM and a declaration of another encoding.
    #[error("it starts with a UTF-8 BOM but declares the coding `{0}`")]
    BomMismatch(String),
    /// Not UTF-8, and no declaration.
    #[error(
        "not valid UTF-8, and no coding declaration (`# -*- coding: latin-1 -*-`) on line 1 or 2 (is it a Python file?)"
    )]
    NotUtf8,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Decodes a Python file's bytes.
pub fn decode(bytes: &[u8]) -> Result<Decoded, DecodeError> {
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err(DecodeError::Utf16);
    }
    if bytes.contains(&0) {
        return Err(DecodeError::Binary);
    }
    let (bom, body) = match bytes.strip_prefix(BOM) {
        Some(rest) => (true, rest),
        None => (false, bytes),
    };
    let declared = coding_declaration(body);
    let encoding = match &declared {
        None => UTF_8,
        Some(name) => {
            let enc = lookup(name).ok_or_else(|| DecodeError::UnknownCoding(name.clone()))?;
            if !enc.is_ascii_compatible() || enc.output_encoding() != enc {
                return Err(DecodeError::UnsupportedCoding(name.clone()));
            }
            if bom && enc != UTF_8 {
                return Err(DecodeError::BomMismatch(name.clone()));
            }
            enc
        }
    };
    let text = encoding
        .decode_without_bom_handling_and_without_replacement(body)
        .ok_or_else(|| match &declared {
            Some(name) => DecodeError::InvalidDeclared(name.clone()),
            None => DecodeError::NotUtf8,
        })?
        .into_owned();
    Ok(Decoded {
        text,
        encoding,
        declared,
        bom,
    })
}

/// The bytes to write for `new_text` in the file's own encoding (and BOM), or `None`
/// when that cannot be done byte-exactly: the unchanged text must encode back to the
/// original bytes and the new text must be representable, so a file is never silently
/// re-encoded or altered outside the fixes.
pub fn encode(original: &[u8], decoded: &Decoded, new_text: &str) -> Option<Vec<u8>> {
    let encode = |text: &str| -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(text.len().saturating_add(BOM.len()));
        if decoded.bom {
            out.extend_from_slice(BOM);
        }
        if decoded.encoding == UTF_8 {
            out.extend_from_slice(text.as_bytes());
        } else {
            let (bytes, _, unmappable) = decoded.encoding.encode(text);
            if unmappable {
                return None;
            }
            out.extend_from_slice(&bytes);
        }
        Some(out)
    };
    if encode(&decoded.text)?.as_slice() != original {
        return None;
    }
    encode(new_text)
}

/// The encoding named on line 1 or 2 (`coding[:=]\s*([-\w.]+)` in a comment line, as
/// PEP 263 says; line 2 only counts when line 1 is a comment or blank).
fn coding_declaration(bytes: &[u8]) -> Option<String> {
    let mut lines = bytes.split(|&b| b == b'\n');
    let first = lines.next()?;
    if let Some(name) = coding_in_line(first) {
        return Some(name);
    }
    let first_is_comment_or_blank = first
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\x0c' | b'\r'))
        .is_none_or(|&b| b == b'#');
    if !first_is_comment_or_blank {
        return None;
    }
    coding_in_line(lines.next()?)
}

fn coding_in_line(line: &[u8]) -> Option<String> {
    let mut rest = line
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\x0c'))
        .and_then(|start| line.get(start..))?;
    if rest.first() != Some(&b'#') {
        return None;
    }
    while let Some(at) = rest.windows(6).position(|w| w == b"coding") {
        rest = rest.get(at.saturating_add(6)..).unwrap_or_default();
        let (&sep, after) = rest.split_first()?;
        if sep != b':' && sep != b'=' {
            continue;
        }
        let after = after
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t'))
            .and_then(|s| after.get(s..))
            .unwrap_or_default();
        let len = after
            .iter()
            .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
            .unwrap_or(after.len());
        let name = after.get(..len).unwrap_or_default();
        if !name.is_empty() {
            return Some(String::from_utf8_lossy(name).into_owned());
        }
    }
    None
}

/// A Python codec name → `encoding_rs`' encoding: Python's spellings (`latin_1`,
/// `utf-8-sig`, `cp1252`, `euc_jp`, `iso8859-15`) are tried as WHATWG labels after
/// normalising `_` to `-`, then with Python's aliases that WHATWG lacks.
fn lookup(name: &str) -> Option<&'static Encoding> {
    let n = name.to_ascii_lowercase().replace('_', "-");
    let n = n.strip_suffix("-sig").filter(|b| is_utf8(b)).unwrap_or(&n);
    if is_utf8(n) {
        return Some(UTF_8);
    }
    if let Some(e) = Encoding::for_label(n.as_bytes()) {
        return Some(e);
    }
    let alias = match n {
        "latin-1" | "l1" | "iso8859-1" | "iso-8859-1" | "8859" | "cp819" => "windows-1252",
        "ascii" | "us-ascii" | "646" => "windows-1252",
        "sjis" | "shift-jis" | "s-jis" | "cp932" | "ms932" | "mskanji" => "shift_jis",
        "euc-jp" | "eucjp" | "ujis" | "u-jis" => "euc-jp",
        "euc-kr" | "euckr" | "cp949" | "uhc" => "euc-kr",
        "gb2312" | "gbk" | "cp936" | "ms936" | "936" => "gbk",
        "big5" | "big5-tw" | "cp950" => "big5",
        _ => {
            // `iso8859-15`, `latin-9`-style spellings → `iso-8859-15`
            if let Some(rest) = n.strip_prefix("iso8859-") {
                return Encoding::for_label(format!("iso-8859-{rest}").as_bytes());
            }
            if let Some(rest) = n.strip_prefix("cp").filter(|r| r.starts_with("125")) {
                return Encoding::for_label(format!("windows-{rest}").as_bytes());
            }
            return None;
        }
    };
    Encoding::for_label(alias.as_bytes())
}

fn is_utf8(n: &str) -> bool {
    matches!(n, "utf-8" | "utf8" | "u8" | "utf" | "cp65001")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pep_263_declarations_are_honoured() {
        let src = b"# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n";
        let d = decode(src).expect("latin-1");
        assert_eq!(d.declared.as_deref(), Some("latin-1"));
        assert!(d.text.contains("café"));
        let src = b"#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\nx = '\x80'\n";
        assert!(decode(src).expect("cp1252").text.contains('€'));
        for (name, ok) in [
            ("utf-8-sig", true),
            ("iso-8859-15", true),
            ("iso8859_15", true),
            ("euc_jp", true),
            ("gbk", true),
            ("shift_jis", true),
            ("latin_1", true),
            ("klingon", false),
        ] {
            let src = format!("# coding={name}\nx = 1\n");
            assert_eq!(decode(src.as_bytes()).is_ok(), ok, "{name}");
        }
        // line 2 counts only after a comment line
        assert!(decode(b"x = 1\n# coding: latin-1\ny = '\xe9'\n").is_err());
        assert_eq!(
            decode(b"# coding: utf-16\n").unwrap_err(),
            DecodeError::UnsupportedCoding("utf-16".into())
        );
        assert_eq!(
            decode(b"# coding: klingon\n").unwrap_err(),
            DecodeError::UnknownCoding("klingon".into())
        );
    }

    #[test]
    fn boms_binary_and_invalid_text() {
        let d = decode(b"\xEF\xBB\xBFx = 1\n").expect("bom");
        assert!(d.bom && d.text == "x = 1\n");
        assert_eq!(decode(b"\xFF\xFEx\0").unwrap_err(), DecodeError::Utf16);
        assert_eq!(decode(b"PK\x03\x04\0\0").unwrap_err(), DecodeError::Binary);
        assert_eq!(decode(b"x = '\xe9'\n").unwrap_err(), DecodeError::NotUtf8);
        assert!(matches!(
            decode(b"# coding: euc-jp\nx = '\xff\xff'\n"),
            Err(DecodeError::InvalidDeclared(_))
        ));
    }

    #[test]
    fn encoding_back_is_byte_exact_or_refused() {
        let src = b"# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n";
        let d = decode(src).expect("latin-1");
        let new = d.text.replace("name", "nom");
        assert_eq!(
            encode(src, &d, &new).expect("encodable"),
            b"# -*- coding: latin-1 -*-\nnom = 'caf\xe9'\n"
        );
        // a character latin-1 cannot hold: refused, not replaced
        assert_eq!(encode(src, &d, &format!("{new}# 清理\n")), None);
        let bom = b"\xEF\xBB\xBFx = 1\n";
        let d = decode(bom).expect("bom");
        assert_eq!(
            encode(bom, &d, "y = 1\n").expect("utf-8"),
            b"\xEF\xBB\xBFy = 1\n"
        );
    }
}
