//! `# noqa` comments: bare `# noqa` silences every oomkit rule on the line,
//! `# noqa: OOM101, OOM202` only those codes (other tools' codes are ignored).

/// What a line's `# noqa` comment silences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Noqa {
    /// Bare `# noqa`.
    All,
    /// `# noqa: CODE, CODE`.
    Codes(Vec<String>),
}

impl Noqa {
    /// Whether the comment silences `code`.
    pub fn silences(&self, code: &str) -> bool {
        match self {
            Noqa::All => true,
            Noqa::Codes(codes) => codes.iter().any(|c| c.eq_ignore_ascii_case(code)),
        }
    }
}

/// The `# noqa` directive on a line, if any.
pub fn noqa(line: &str) -> Option<Noqa> {
    let mut rest = line;
    while let Some(i) = rest.find('#') {
        // `#` is one byte, so `i + 1` is a character boundary; `get` keeps every cut
        // safe on any text (a comment in Chinese after the code, for one).
        rest = rest.get(i.saturating_add(1)..).unwrap_or("");
        let after = rest.trim_start();
        if let Some(tail) = after
            .get(..4)
            .filter(|w| w.eq_ignore_ascii_case("noqa"))
            .and_then(|_| after.get(4..))
        {
            if let Some(list) = tail.strip_prefix(':') {
                let codes: Vec<String> = list
                    .split(|c: char| c == ',' || c.is_whitespace())
                    .map(str::trim)
                    .take_while(|c| !c.starts_with('#'))
                    .filter(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric()))
                    .map(str::to_string)
                    .collect();
                return Some(Noqa::Codes(codes));
            }
            if tail.is_empty() || tail.starts_with(|c: char| c.is_whitespace() || c == '#') {
                return Some(Noqa::All);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_bare_and_coded_noqa() {
        assert_eq!(noqa("x = 1  # noqa"), Some(Noqa::All));
        assert_eq!(noqa("x = 1  # NOQA  # why"), Some(Noqa::All));
        let n = noqa("xs.append(loss)  # noqa: OOM101, E501").expect("noqa");
        assert!(n.silences("OOM101") && !n.silences("OOM102"));
        assert_eq!(noqa("x = 1  # not noqa here"), None);
        assert_eq!(noqa("x = 1  # noqaXYZ"), None);
        assert_eq!(noqa("x = 1"), None);
        // multi-byte text right after `#` (the byte 4 is inside a character)
        assert_eq!(noqa("torch.cuda.empty_cache()  # 清理显存"), None);
        assert_eq!(noqa("x  # é noqa"), None);
        assert_eq!(
            noqa("x  # 清理 # noqa: OOM105"),
            Some(Noqa::Codes(vec!["OOM105".into()]))
        );
    }
}
