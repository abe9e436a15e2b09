//! Applying the edits of safe autofixes to a file's text.

use std::collections::BTreeMap;

use crate::diagnostic::Edit;

/// Applies non-overlapping edits (overlapping ones are skipped); returns the new text
/// and how many fixes were applied. Each inner `Vec` is one fix, applied whole or not.
/// O(n log n) in the number of edits: taken ranges are kept ordered, and a new edit is
/// compared with its neighbours only.
pub fn apply(source: &str, fixes: &[Vec<Edit>]) -> (String, usize) {
    let mut all: Vec<&Vec<Edit>> = fixes.iter().filter(|f| !f.is_empty()).collect();
    all.sort_by_key(|edits| edits.iter().map(|e| e.range.start()).min());
    // start → (end, edit) of every edit taken so far
    let mut taken: BTreeMap<(u32, u32), &Edit> = BTreeMap::new();
    let mut applied = 0usize;
    for edits in all {
        let overlaps = edits.iter().any(|e| {
            let (s, end) = (u32::from(e.range.start()), u32::from(e.range.end()));
            // the taken edit starting last before `end` is the only one that can reach in
            taken
                .range(..(end, 0))
                .next_back()
                .is_some_and(|(&(ts, te), _)| s < te && ts < end)
                || taken
                    .range((s, 0)..)
                    .next()
                    .is_some_and(|(&(ts, te), _)| s < te && ts < end)
        });
        if overlaps {
            continue;
        }
        for e in edits {
            taken.insert((e.range.start().into(), e.range.end().into()), e);
        }
        applied = applied.saturating_add(1);
    }
    let mut out = String::with_capacity(source.len().saturating_add(32));
    let mut pos = 0usize;
    for e in taken.values() {
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
