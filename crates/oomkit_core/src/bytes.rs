//! Byte quantities: the one place where sizes are parsed and formatted.
//!
//! Real OOM messages print sizes in a dozen styles (`2.00 GiB`, `1024.00 KiB`,
//! `0 bytes`, `560.44MiB`, `8.41G`, `17.79G (19104890880 bytes)`, `25,600,000`,
//! `98.000244MB`, `0.000000B`, plain integers). [`Bytes`] parses all of them
//! into an exact integer and formats sizes the way PyTorch's `format_size`
//! (`c10/cuda/CUDACachingAllocator.cpp`) and nvidia-smi do: binary units.
//!
//! Why binary for `KB`/`MB`/`GB` too: every framework that prints those
//! letters in an OOM message computes them with powers of 1024 (PyTorch MPS
//! before ~2.6, Paddle, A1111's `A:/R:` line, TF's device-creation line), see
//! `docs/reference/oom-messages.md` §0. Use [`Bytes::parse_si`] where a user
//! means decimal gigabytes.
//!
//! Sizes are stored as `u64` and are never floats; a printed value larger
//! than `u64::MAX` (PyTorch prints SIZE_MAX as `17179869184.00 GiB`)
//! saturates to [`Bytes::MAX`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A regular-expression fragment matching one size token as messages print it:
/// a number (optionally with thousands commas, decimals or an exponent),
/// an optional space and a unit, optionally followed by the exact byte count in
/// parentheses (`8.41G (9029127168 bytes)`, `128.00MiB (134217728B)`).
///
/// Capture-free so it can be embedded anywhere; feed the matched text to
/// [`Bytes::from_str`], which prefers the exact count when present.
pub const SIZE_PATTERN: &str = r"\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?\s?(?:bytes|byte|KiB|MiB|GiB|TiB|KB|kB|MB|GB|TB|B|K|M|G|T)(?:\s?\(\d+\s?(?:bytes|B)\))?";

/// A number of bytes.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

/// Why a size could not be parsed; keeps the offending input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {input:?}: {reason}")]
pub struct ParseSizeError {
    /// The text that was given.
    pub input: String,
    /// What was wrong with it.
    pub reason: &'static str,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

impl Bytes {
    /// Zero bytes.
    pub const ZERO: Bytes = Bytes(0);
    /// The largest representable size (what PyTorch's SIZE_MAX means).
    pub const MAX: Bytes = Bytes(u64::MAX);

    /// `n` KiB.
    pub const fn kib(n: u64) -> Bytes {
        Bytes(n * KIB)
    }
    /// `n` MiB.
    pub const fn mib(n: u64) -> Bytes {
        Bytes(n * MIB)
    }
    /// `n` GiB.
    pub const fn gib(n: u64) -> Bytes {
        Bytes(n * GIB)
    }
    /// The raw count.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// `self - other`, or zero.
    pub const fn saturating_sub(self, other: Bytes) -> Bytes {
        Bytes(self.0.saturating_sub(other.0))
    }
    /// `self + other`, saturating at [`Bytes::MAX`].
    pub const fn saturating_add(self, other: Bytes) -> Bytes {
        Bytes(self.0.saturating_add(other.0))
    }

    /// `self + other`, or `None` on overflow.
    pub const fn checked_add(self, other: Bytes) -> Option<Bytes> {
        match self.0.checked_add(other.0) {
            Some(v) => Some(Bytes(v)),
            None => None,
        }
    }
    /// `self - other`, or `None` when `other` is larger.
    pub const fn checked_sub(self, other: Bytes) -> Option<Bytes> {
        match self.0.checked_sub(other.0) {
            Some(v) => Some(Bytes(v)),
            None => None,
        }
    }
    /// `self × n`, or `None` on overflow.
    pub const fn checked_mul(self, n: u64) -> Option<Bytes> {
        match self.0.checked_mul(n) {
            Some(v) => Some(Bytes(v)),
            None => None,
        }
    }
    /// `self × n`, saturating at [`Bytes::MAX`].
    pub const fn saturating_mul(self, n: u64) -> Bytes {
        Bytes(self.0.saturating_mul(n))
    }
    /// `self − other` as a signed count (headroom: negative when `other` is
    /// larger), clamped to `i64`.
    pub fn signed_sub(self, other: Bytes) -> i64 {
        let d = i128::from(self.0) - i128::from(other.0);
        i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
    }

    /// Parses a size where `KB`/`MB`/`GB` mean 10^3/10^6/10^9 (what a user
    /// typing "24GB" on a command line usually means); `KiB`/`MiB`/`GiB` stay binary.
    pub fn parse_si(s: &str) -> Result<Bytes, ParseSizeError> {
        parse(s, Prefixes::Si)
    }

    /// Formats as nvidia-smi does: whole MiB, rounded down, e.g. `81559MiB`.
    pub fn display_mib(self) -> String {
        format!("{}MiB", self.0 / MIB)
    }
}

/// Formats in the largest binary unit that keeps the printed number at least
/// 1: `N bytes` below 1 KiB, then `x.xx KiB`, `x.xx MiB`, `x.xx GiB` — so 1 GiB
/// prints as `1.00 GiB` and 1023.999 MiB (which two decimals would round up to
/// `1024.00 MiB`) as `1.00 GiB` too. PyTorch's `format_size` switches units one
/// step later (it prints 1 GiB as `1024.00 MiB`); the numbers are the same
/// binary units, and parsing (`str::parse`) reads both spellings.
impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v < KIB {
            return write!(f, "{v} bytes");
        }
        // The unit whose two-decimal rounding stays below 1024.
        let x = v as f64;
        let (value, unit) = if x / (KIB as f64) < 1023.995 {
            (x / KIB as f64, "KiB")
        } else if x / (MIB as f64) < 1023.995 {
            (x / MIB as f64, "MiB")
        } else {
            (x / GIB as f64, "GiB")
        };
        write!(f, "{value:.2} {unit}")
    }
}

/// Sums saturate at [`Bytes::MAX`], like [`Bytes::saturating_add`].
impl std::iter::Sum for Bytes {
    fn sum<I: Iterator<Item = Bytes>>(iter: I) -> Bytes {
        iter.fold(Bytes::ZERO, Bytes::saturating_add)
    }
}

impl From<Bytes> for u64 {
    fn from(b: Bytes) -> u64 {
        b.0
    }
}

impl FromStr for Bytes {
    type Err = ParseSizeError;

    /// Parses any size style found in OOM messages; `KB`/`MB`/`GB`/`G` are binary.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s, Prefixes::Binary)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Prefixes {
    Binary,
    Si,
}

fn err(input: &str, reason: &'static str) -> ParseSizeError {
    ParseSizeError {
        input: input.to_string(),
        reason,
    }
}

fn parse(input: &str, prefixes: Prefixes) -> Result<Bytes, ParseSizeError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(err(input, "empty"));
    }
    // `17.79G (19104890880 bytes)`: the exact count in parentheses wins.
    if let Some((before, after)) = s.split_once('(') {
        let inner = after.trim_end_matches(')').trim();
        let digits = inner.trim_end_matches("bytes").trim_end_matches('B').trim();
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return digits
                .parse::<u64>()
                .map(Bytes)
                .map_err(|_| err(input, "byte count out of range"));
        }
        return parse(before, prefixes);
    }
    let split = s
        .find(|c: char| {
            !(c.is_ascii_digit()
                || c == '.'
                || c == ','
                || c == 'e'
                || c == 'E'
                || c == '+'
                || c == '-')
        })
        .unwrap_or(s.len());
    // An exponent marker is only part of the number when digits follow it;
    // otherwise `E`… starts a unit (none of ours does, but keep it strict).
    let (num, unit) = s.split_at(split);
    let unit = unit.trim();
    let scale: u64 = match (unit, prefixes) {
        ("" | "B" | "b" | "byte" | "bytes", _) => 1,
        ("KiB" | "kiB", _) => KIB,
        ("MiB", _) => MIB,
        ("GiB", _) => GIB,
        ("TiB", _) => TIB,
        ("K" | "KB" | "kB" | "k", Prefixes::Binary) => KIB,
        ("M" | "MB", Prefixes::Binary) => MIB,
        ("G" | "GB", Prefixes::Binary) => GIB,
        ("T" | "TB", Prefixes::Binary) => TIB,
        ("K" | "KB" | "kB" | "k", Prefixes::Si) => 1_000,
        ("M" | "MB", Prefixes::Si) => 1_000_000,
        ("G" | "GB", Prefixes::Si) => 1_000_000_000,
        ("T" | "TB", Prefixes::Si) => 1_000_000_000_000,
        _ => {
            return Err(err(
                input,
                "unknown unit (expected bytes, KiB, MiB, GiB, KB, MB, GB, K, M or G)",
            ));
        }
    };
    let num = num.replace(',', "");
    if num.is_empty() {
        return Err(err(input, "no number"));
    }
    decimal_times(&num, scale).ok_or_else(|| err(input, "not a number"))
}

/// Exact `num × scale` for a decimal `num` (`12.53`, `4.58e18`), rounded to the
/// nearest byte and saturating at `u64::MAX`. Integer arithmetic only, so
/// `1024.00 KiB` is exactly 1 MiB.
fn decimal_times(num: &str, scale: u64) -> Option<Bytes> {
    let (mantissa, exp) = match num.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (num, 0),
    };
    if mantissa.starts_with('-') || mantissa.starts_with('+') {
        return None;
    }
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, f),
        None => (mantissa, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // value = digits × 10^(exp - frac.len()) × scale
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    let mut pow10 = exp - frac.len() as i32;
    let mut value: u128 = 0;
    for b in digits.bytes() {
        if value > u128::MAX / 100 {
            // Far beyond u64: drop precision, keep the magnitude.
            pow10 += 1;
            continue;
        }
        value = value * 10 + u128::from(b - b'0');
    }
    value = value.saturating_mul(u128::from(scale));
    while pow10 > 0 {
        value = value.saturating_mul(10);
        pow10 -= 1;
    }
    while pow10 < 0 {
        // Round half up on the last division.
        value = if pow10 == -1 {
            (value + 5) / 10
        } else {
            value / 10
        };
        pow10 += 1;
    }
    Some(Bytes(u64::try_from(value).unwrap_or(u64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> u64 {
        s.parse::<Bytes>().unwrap().0
    }

    #[test]
    fn parses_every_style_found_in_real_messages() {
        assert_eq!(b("2.00 GiB"), 2 * GIB);
        assert_eq!(b("1024.00 KiB"), MIB);
        assert_eq!(b("0 bytes"), 0);
        assert_eq!(b("560.44MiB"), (560.44 * MIB as f64).round() as u64);
        assert_eq!(b("8.41G"), (8.41 * GIB as f64).round() as u64);
        assert_eq!(b("17.79G (19104890880 bytes)"), 19_104_890_880);
        assert_eq!(b("128.00MiB (134217728B)"), 134_217_728);
        assert_eq!(b("25,600,000"), 25_600_000);
        assert_eq!(b("25,600,000 bytes"), 25_600_000);
        assert_eq!(b("98.000244MB"), 102_760_704);
        assert_eq!(b("0.000000B"), 0);
        assert_eq!(b("4770354232"), 4_770_354_232);
        assert_eq!(b("4585490524328388608"), 4_585_490_524_328_388_608);
        assert_eq!(b("16.0KiB"), 16 * KIB);
        assert_eq!(b("4.58e18"), 4_580_000_000_000_000_000);
    }

    #[test]
    fn keeps_decimals_exact_without_floats() {
        // 12.53 GiB = 1253 × 2^30 / 100, rounded to the nearest byte.
        assert_eq!(b("12.53 GiB"), ((1253u128 * GIB as u128 + 50) / 100) as u64);
        assert_eq!(b("1.5 KiB"), 1536);
    }

    #[test]
    fn saturates_pytorch_size_max() {
        assert_eq!("17179869184.00 GiB".parse::<Bytes>().unwrap(), Bytes::MAX);
        let almost = b("17179869183.95 GiB");
        assert!(almost > u64::MAX - GIB && almost < u64::MAX);
    }

    #[test]
    fn si_parsing_is_decimal_for_plain_prefixes() {
        assert_eq!(Bytes::parse_si("24GB").unwrap().0, 24_000_000_000);
        assert_eq!(Bytes::parse_si("24GiB").unwrap().0, 24 * GIB);
    }

    #[test]
    fn rejects_garbage_and_names_the_input() {
        let e = "12 parsecs".parse::<Bytes>().unwrap_err();
        assert_eq!(e.input, "12 parsecs");
        assert!(e.to_string().contains("12 parsecs"));
        assert!("".parse::<Bytes>().is_err());
        assert!("GiB".parse::<Bytes>().is_err());
        assert!("1.2.3 GiB".parse::<Bytes>().is_err());
    }

    #[test]
    fn formats_like_pytorch_format_size() {
        assert_eq!(Bytes(0).to_string(), "0 bytes");
        assert_eq!(Bytes(1023).to_string(), "1023 bytes");
        assert_eq!(Bytes(1024).to_string(), "1.00 KiB");
        assert_eq!(Bytes(1025).to_string(), "1.00 KiB");
        assert_eq!(Bytes(MIB - 1).to_string(), "1.00 MiB");
        assert_eq!(Bytes(MIB).to_string(), "1.00 MiB");
        assert_eq!(Bytes(MIB + 1).to_string(), "1.00 MiB");
        assert_eq!(Bytes(GIB - MIB / 1000).to_string(), "1.00 GiB");
        assert_eq!(Bytes(GIB).to_string(), "1.00 GiB");
        assert_eq!(Bytes(1023 * MIB).to_string(), "1023.00 MiB");
        assert_eq!(Bytes(2 * GIB).to_string(), "2.00 GiB");
        assert_eq!(Bytes::MAX.to_string(), "17179869184.00 GiB");
    }

    #[test]
    fn round_trips_through_display() {
        for s in [
            "2.00 GiB",
            "1.00 MiB",
            "576.00 KiB",
            "30.96 MiB",
            "10.84 GiB",
        ] {
            assert_eq!(b(s).to_string().parse::<Bytes>().unwrap().to_string(), s);
            assert_eq!(Bytes(b(s)).to_string(), s);
        }
    }

    #[test]
    fn checked_arithmetic_says_when_it_overflows() {
        assert_eq!(Bytes(2).checked_add(Bytes(3)), Some(Bytes(5)));
        assert_eq!(Bytes::MAX.checked_add(Bytes(1)), None);
        assert_eq!(Bytes(2).checked_sub(Bytes(3)), None);
        assert_eq!(Bytes::gib(1).checked_mul(2), Some(Bytes::gib(2)));
        assert_eq!(Bytes::MAX.checked_mul(2), None);
        assert_eq!(Bytes::MAX.saturating_mul(2), Bytes::MAX);
        assert_eq!(Bytes(2).signed_sub(Bytes(5)), -3);
        assert_eq!(Bytes::MAX.signed_sub(Bytes(0)), i64::MAX);
        assert_eq!(
            [Bytes(1), Bytes::MAX].into_iter().sum::<Bytes>(),
            Bytes::MAX
        );
    }

    #[test]
    fn formats_like_nvidia_smi() {
        assert_eq!(Bytes::mib(81559).display_mib(), "81559MiB");
    }

    #[test]
    fn size_pattern_is_a_valid_fragment() {
        // The pattern is used by regex users; here we only check it is balanced.
        assert_eq!(
            SIZE_PATTERN.matches('(').count(),
            SIZE_PATTERN.matches(')').count()
        );
    }
}
