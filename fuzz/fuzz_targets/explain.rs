//! Log bytes → `Explainer::explain_reader` → human rendering: no panic, no
//! hang, events within bounds. Seed with `crates/oomkit_explain/tests/fixtures`.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use oomkit_explain::Explainer;

static EXPLAINER: LazyLock<Explainer> = LazyLock::new(Explainer::new);

fuzz_target!(|data: &[u8]| {
    let Ok(report) = EXPLAINER.explain_reader(data) else {
        return;
    };
    assert!(report.events.len() <= oomkit_explain::MAX_EVENTS);
    let _ = oomkit_explain::render::human(&report, "fuzz");
});
