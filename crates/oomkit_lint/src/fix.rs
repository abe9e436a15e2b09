//! Applying the edits of safe autofixes to a file's text.

use crate::diagnostic::Edit;

/// Applies non-overlapping edits (overlapping ones are skipped); returns the new text
/// and how many fixes were applied. Each inner `Vec` is one fix, applied whole or not.
pub fn apply(source: &str, fixes: &[Vec<Edit>]) -> (String, usize) {
    let mut all: Vec<(usize, &Vec<Edit>)> = fixes.iter().enumerate().collect();
    all.sort_by_key(|(_, edits)| edits.iter().map(|e| e.range.start()).min());
    let mut taken: Vec<&Edit> = Vec::new();
    let mut applied = 0;
    for (_, edits) in all {
        let overlaps = edits.iter().any(|e| {
            taken
                .iter()
                .any(|t| e.range.start() < t.range.end() && t.range.start() < e.range.end())
        });
        if overlaps || edits.is_empty() {
            continue;
        }
        taken.extend(edits.iter());
        applied += 1;
    }
    taken.sort_by_key(|e| (e.range.start(), e.range.end()));
    let mut out = String::with_capacity(source.len() + 32);
    let mut pos = 0usize;
    for e in taken {
        let (s, end) = (e.range.start().to_usize(), e.range.end().to_usize());
        if s < pos {
            continue;
        }
        out.push_str(source.get(pos..s).unwrap_or(""));
        out.push_str(&e.content);
        pos = end;
    }
    out.push_str(source.get(pos..).unwrap_or(""));
    (out, applied)
}
