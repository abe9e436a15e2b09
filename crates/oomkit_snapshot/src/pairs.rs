//! The address replay of a trace, fed batch by batch: which `free_completed`
//! frees which `alloc`. The loader runs it on a second thread while the
//! decoder is still reading (see `load.rs`), so the analysis starts with it
//! done; [`crate::analyze()`] runs it itself for a [`crate::Snapshot`] built
//! some other way.
//!
//! MemoryViz replays the same way (`_memory_viz.py`, `trace_plot`): an
//! allocation lives from its `alloc` to the `free_completed` at its address; a
//! `free_completed` with no `alloc` before it frees memory allocated before
//! the trace started.

use foldhash::{HashMap, HashMapExt};

use crate::load::{Action, Event};

/// No partner: alive at the end, freed before the trace, or beyond `u32` events.
pub(crate) const UNPAIRED: u32 = u32::MAX;

/// The address replay so far.
#[derive(Debug, Clone)]
pub struct Pairs {
    /// Allocations alive after the last event fed: address → (requested
    /// size, event index).
    pub(crate) alive: HashMap<u64, (u64, usize)>,
    /// Per event, its partner: an `alloc`'s is the `free_completed` that
    /// frees it (or the `alloc` that reuses its address without a free, which
    /// ends it too); a `free_completed`'s is the `alloc` it frees;
    /// [`UNPAIRED`] otherwise.
    pub(crate) pair: Vec<u32>,
    /// `alloc`s at an address that was already allocated and not freed.
    pub(crate) realloc: u64,
    /// `free_completed`s with no `alloc` before them, in order.
    pub(crate) unmatched_frees: Vec<usize>,
}

impl Default for Pairs {
    fn default() -> Self {
        Pairs {
            alive: HashMap::new(),
            pair: Vec::new(),
            realloc: 0,
            unmatched_frees: Vec::new(),
        }
    }
}

impl Pairs {
    /// The replay of a whole trace.
    pub fn of(events: &[Event]) -> Pairs {
        let mut p = Pairs::default();
        p.feed(events);
        p
    }

    /// Replays `batch`, the events that follow those fed so far.
    pub fn feed(&mut self, batch: &[Event]) {
        let start = self.pair.len();
        self.pair
            .resize(start.saturating_add(batch.len()), UNPAIRED);
        for (k, e) in batch.iter().enumerate() {
            let i = start.saturating_add(k);
            match e.action {
                Action::Alloc => {
                    if let Some((_, j)) = self.alive.insert(e.addr, (e.size, i)) {
                        self.realloc = self.realloc.saturating_add(1);
                        self.link(j, i);
                    }
                }
                Action::FreeCompleted => match self.alive.remove(&e.addr) {
                    Some((_, j)) => {
                        self.link(j, i);
                        self.link(i, j);
                    }
                    None => self.unmatched_frees.push(i),
                },
                _ => {}
            }
        }
    }

    fn link(&mut self, a: usize, b: usize) {
        if let (Some(pa), Ok(b32)) = (self.pair.get_mut(a), u32::try_from(b)) {
            *pa = b32;
        }
    }

    /// The partner of event `i`.
    pub(crate) fn partner(&self, i: usize) -> Option<usize> {
        match self.pair.get(i) {
            Some(&p) if p != UNPAIRED => usize::try_from(p).ok(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(action: Action, addr: u64, size: u64) -> Event {
        Event::bare(action, addr, size)
    }

    #[test]
    fn batches_replay_like_the_whole_trace() {
        let t = vec![
            ev(Action::FreeCompleted, 8, 1), // allocated before the trace
            ev(Action::Alloc, 1, 10),
            ev(Action::Alloc, 2, 20),
            ev(Action::FreeRequested, 1, 10),
            ev(Action::FreeCompleted, 1, 10),
            ev(Action::Alloc, 2, 30), // reuses 2 without a free
            ev(Action::Alloc, 1, 40),
        ];
        let whole = Pairs::of(&t);
        let mut parts = Pairs::default();
        for chunk in t.chunks(3) {
            parts.feed(chunk);
        }
        for p in [&whole, &parts] {
            assert_eq!(p.partner(1), Some(4));
            assert_eq!(p.partner(4), Some(1));
            assert_eq!(p.partner(2), Some(5), "ended by the re-allocation");
            assert_eq!(p.partner(5), None);
            assert_eq!(p.partner(3), None);
            assert_eq!(p.unmatched_frees, vec![0]);
            assert_eq!(p.realloc, 1);
            let mut alive: Vec<_> = p.alive.values().copied().collect();
            alive.sort();
            assert_eq!(alive, vec![(30, 5), (40, 6)]);
        }
    }
}
