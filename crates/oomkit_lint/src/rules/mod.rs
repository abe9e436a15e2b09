//! THE rule table: one line per rule (code, name, remedy, autofix, docs), then the
//! dispatch that runs every selected rule during the single pass in `context`.
//!
//! To add a rule: write `rules/<name>.rs` (docs in the fixed sections through
//! `rule_doc!`, a `Violation` type that words its message and fix title — see
//! `violation.rs` —, a `check` function that reports it), add one entry to the
//! `rules!` table below (it declares the module, the enum variant and the table row),
//! and add `tests/fixtures/OOMxxx.py`.

use crate::context::Checker;
use crate::parse::ast::{Expr, ExprCall, Stmt};
use oomkit_core::remedies::RemedyId;

/// Declares a rule's documentation: the `///` lines become both rustdoc and a
/// `pub const DOC: &str` that `oomkit lint --explain` prints.
macro_rules! rule_doc {
    ($(#[doc = $doc:literal])*) => {
        $(#[doc = $doc])*
        pub const DOC: &str = concat!($($doc, "\n"),*);
    };
}

mod violation;

pub(crate) use violation::Violation;

/// What a rule reports, as ruff groups its rules. Only [`Category::Memory`] runs by
/// default; the others are opt-in (`--select upgrade`, `--extend-select advice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// A memory problem shown by the code itself (the default set).
    Memory,
    /// A deprecated API: worth upgrading, but not a memory problem today.
    Upgrade,
    /// General placement or setup advice that is right in some projects and not others.
    Advice,
}

impl Category {
    /// Every category, default first.
    pub const ALL: [Category; 3] = [Category::Memory, Category::Upgrade, Category::Advice];

    /// The selector name (`memory`, `upgrade`, `advice`).
    pub fn name(self) -> &'static str {
        match self {
            Category::Memory => "memory",
            Category::Upgrade => "upgrade",
            Category::Advice => "advice",
        }
    }

    /// Whether its rules run without being selected.
    pub fn is_default(self) -> bool {
        self == Category::Memory
    }
}

/// A rule's fixed facts.
#[derive(Debug)]
pub struct RuleInfo {
    /// The rule.
    pub rule: Rule,
    /// `OOM101`…
    pub code: &'static str,
    /// kebab-case name, read as "allow …".
    pub name: &'static str,
    /// The `oomkit_core::remedies` id its help points to.
    pub remedy: Option<RemedyId>,
    /// What it reports: only [`Category::Memory`] rules run by default.
    pub category: Category,
    /// A new rule that runs only with `--preview` (`preview = true`) until it has met
    /// the precision bar on the benchmark (`bench/lint/precision/`).
    pub preview: bool,
    /// Whether `--fix` can fix it (some cases).
    pub fixable: bool,
    /// Whether it also runs on TensorFlow/Keras files that import nothing of PyTorch's
    /// (every other rule is a PyTorch rule, and such files are skipped for it).
    pub tensorflow: bool,
    /// The documentation (`## What it does`, `## Evidence it needs`, `## Why it costs
    /// memory`, `## Example`, `## Use instead`).
    pub doc: &'static str,
}

/// THE table: each rule once — its variant, its module (one file per rule), code,
/// name, remedy, category and flags. The macro declares the modules, the [`Rule`] enum
/// and [`RULES`] (in that order, so `RULES[rule as usize]` is the rule's entry).
macro_rules! rules {
    ($(
        $variant:ident => $vis:vis $module:ident {
            code: $code:literal, name: $name:literal, remedy: $remedy:expr,
            category: $category:ident, preview: $preview:literal, fixable: $fixable:literal,
            tensorflow: $tensorflow:literal $(,)?
        }
    ),* $(,)?) => {
        $($vis mod $module;)*

        /// A rule.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(missing_docs)]
        pub enum Rule {
            $($variant,)*
        }

        /// Every rule, in enum order (the stable rules by code, then the rules added since).
        pub static RULES: &[RuleInfo] = &[
            $(RuleInfo {
                rule: Rule::$variant,
                code: $code,
                name: $name,
                remedy: $remedy,
                category: Category::$category,
                preview: $preview,
                fixable: $fixable,
                tensorflow: $tensorflow,
                doc: $module::DOC,
            },)*
        ];
    };
}

rules! {
    TensorAppendedInLoop => tensor_appended_in_loop {
        code: "OOM101", name: "tensor-appended-in-loop", remedy: Some(RemedyId::ReleaseReferences),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    LossAccumulatedWithGraph => loss_accumulated_with_graph {
        code: "OOM102", name: "loss-accumulated-with-graph", remedy: Some(RemedyId::ReleaseReferences),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    MissingZeroGrad => missing_zero_grad {
        code: "OOM103", name: "missing-zero-grad", remedy: None,
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    InferenceWithoutNoGrad => inference_without_no_grad {
        code: "OOM104", name: "inference-without-no-grad", remedy: Some(RemedyId::InferenceMode),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    EmptyCacheInLoop => empty_cache_in_loop {
        code: "OOM105", name: "empty-cache-in-loop", remedy: Some(RemedyId::EmptyCacheBetweenPhases),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    UnscaledGradientAccumulation => unscaled_gradient_accumulation {
        code: "OOM106", name: "unscaled-gradient-accumulation", remedy: Some(RemedyId::GradientAccumulation),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    ZeroGradEveryMicroStep => zero_grad_every_micro_step {
        code: "OOM107", name: "zero-grad-every-micro-step", remedy: Some(RemedyId::GradientAccumulation),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    RetainGraphInLoop => retain_graph_in_loop {
        code: "OOM108", name: "retain-graph-in-loop", remedy: Some(RemedyId::ReleaseReferences),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    DeprecatedCudaAmp => deprecated_cuda_amp {
        code: "OOM109", name: "deprecated-cuda-amp", remedy: Some(RemedyId::MixedPrecision),
        category: Upgrade, preview: false, fixable: true, tensorflow: false,
    },
    TensorStoredOnModule => tensor_stored_on_module {
        code: "OOM110", name: "tensor-stored-on-module", remedy: Some(RemedyId::ReleaseReferences),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    FromPretrainedDefaultDtype => from_pretrained_default_dtype {
        code: "OOM201", name: "from-pretrained-default-dtype", remedy: Some(RemedyId::HalfPrecisionWeights),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    TorchLoadWithoutMapLocation => torch_load_without_map_location {
        code: "OOM202", name: "torch-load-without-map-location", remedy: None,
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    DeprecatedLoadInKbit => deprecated_load_in_kbit {
        code: "OOM203", name: "deprecated-load-in-kbit", remedy: Some(RemedyId::Quantize8bit),
        category: Upgrade, preview: false, fixable: false, tensorflow: false,
    },
    DataParallel => data_parallel {
        code: "OOM204", name: "data-parallel", remedy: Some(RemedyId::ZeroSharding),
        category: Advice, preview: false, fixable: false, tensorflow: false,
    },
    MoveAfterDeviceMap => move_after_device_map {
        code: "OOM205", name: "move-after-device-map", remedy: Some(RemedyId::ModelParallel),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    HookStoresActivation => hook_stores_activation {
        code: "OOM111", name: "hook-stores-activation", remedy: Some(RemedyId::ReleaseReferences),
        category: Memory, preview: true, fixable: false, tensorflow: false,
    },
    HiddenStateNotDetached => hidden_state_not_detached {
        code: "OOM112", name: "hidden-state-not-detached", remedy: Some(RemedyId::ReleaseReferences),
        category: Memory, preview: true, fixable: false, tensorflow: false,
    },
    FsdpFullStateDictOnGpu => fsdp_full_state_dict_on_gpu {
        code: "OOM206", name: "fsdp-full-state-dict-on-gpu", remedy: Some(RemedyId::CpuOffload),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    DdpWithoutSetDevice => ddp_without_set_device {
        code: "OOM207", name: "ddp-without-set-device", remedy: None,
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    GraphKeptByMeter => pub(crate) graph_kept_by_meter {
        code: "OOM113", name: "graph-kept-by-meter", remedy: Some(RemedyId::ReleaseReferences),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    OutputsKeptOnGpu => outputs_kept_on_gpu {
        code: "OOM114", name: "outputs-kept-on-gpu", remedy: Some(RemedyId::ReleaseReferences),
        category: Memory, preview: true, fixable: false, tensorflow: false,
    },
    ObjectRecreatedInLoop => object_recreated_in_loop {
        code: "OOM115", name: "object-recreated-in-loop", remedy: None,
        category: Memory, preview: false, fixable: false, tensorflow: true,
    },
    GeneratorOutputNotDetached => generator_output_not_detached {
        code: "OOM116", name: "generator-output-not-detached", remedy: Some(RemedyId::ReleaseReferences),
        category: Memory, preview: false, fixable: false, tensorflow: false,
    },
    GradientTapeUnused => gradient_tape_unused {
        code: "OOM117", name: "gradient-tape-unused", remedy: None,
        category: Memory, preview: true, fixable: false, tensorflow: true,
    },
}

impl Rule {
    /// The rule's table entry.
    pub fn info(self) -> &'static RuleInfo {
        // In bounds: `RULES` has every rule at its own position, checked when compiling
        // (`RULES_IN_ENUM_ORDER`).
        #[allow(clippy::indexing_slicing)]
        &RULES[self as usize]
    }

    /// Looks a rule up by code (`OOM101`) or name (`tensor-appended-in-loop`).
    pub fn from_code(code: &str) -> Option<Rule> {
        RULES
            .iter()
            .find(|r| r.code.eq_ignore_ascii_case(code) || r.name == code)
            .map(|r| r.rule)
    }
}

/// Compile-time proof that `RULES[rule as usize]` is the rule's own entry.
const RULES_IN_ENUM_ORDER: () = {
    let mut i = 0;
    while i < RULES.len() {
        #[allow(clippy::indexing_slicing)]
        let rule = RULES[i].rule;
        assert!(rule as usize == i, "RULES is out of enum order");
        i += 1;
    }
    assert!(RULES.len() == Rule::GradientTapeUnused as usize + 1);
};
const _: () = RULES_IN_ENUM_ORDER;

/// A set of rules (a bit per rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleSet(u32);

impl RuleSet {
    /// Every rule.
    pub fn all() -> Self {
        Self(
            u32::MAX
                .checked_shr(u32::BITS.saturating_sub(RULES.len() as u32))
                .unwrap_or(0),
        )
    }

    /// The rules that run when nothing is selected: the stable rules of the default
    /// category ([`Category::Memory`]).
    pub fn default_set() -> Self {
        let mut set = Self::empty();
        for r in RULES {
            if r.category.is_default() && !r.preview {
                set.insert(r.rule);
            }
        }
        set
    }

    /// The preview rules (they run only with `--preview`).
    pub fn preview() -> Self {
        let mut set = Self::empty();
        for r in RULES.iter().filter(|r| r.preview) {
            set.insert(r.rule);
        }
        set
    }

    /// The rules that also run on TensorFlow/Keras-only files ([`RuleInfo::tensorflow`]).
    pub fn tensorflow() -> Self {
        let mut set = Self::empty();
        for r in RULES.iter().filter(|r| r.tensorflow) {
            set.insert(r.rule);
        }
        set
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// No rule.
    pub fn empty() -> Self {
        Self(0)
    }

    /// Whether `rule` is in the set.
    pub fn contains(self, rule: Rule) -> bool {
        self.0 & (1 << rule as u32) != 0
    }

    /// Adds a rule.
    pub fn insert(&mut self, rule: Rule) {
        self.0 |= 1 << rule as u32;
    }

    /// Removes a rule.
    pub fn remove(&mut self, rule: Rule) {
        self.0 &= !(1 << rule as u32);
    }

    /// The rules matching a selector: `ALL`, a code, a code prefix (`OOM1`), a name or
    /// a category (`memory`, `upgrade`, `advice`).
    pub fn matching(selector: &str) -> Option<Self> {
        let s = selector.trim();
        if s.eq_ignore_ascii_case("ALL") {
            return Some(Self::all());
        }
        let mut set = Self::empty();
        let upper = s.to_ascii_uppercase();
        for r in RULES {
            if (!upper.is_empty() && r.code.starts_with(&upper))
                || r.name == s
                || r.category.name().eq_ignore_ascii_case(s)
            {
                set.insert(r.rule);
            }
        }
        (set.0 != 0).then_some(set)
    }

    /// Union.
    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Difference.
    pub fn minus(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// Intersection.
    pub fn intersect(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }
}

/// Statement-level rules (before the statement's own bindings take effect).
pub(crate) fn on_stmt<'a>(ch: &mut Checker<'a>, stmt: &'a Stmt) {
    match stmt {
        Stmt::AugAssign(a) => {
            tensor_appended_in_loop::check_aug_assign(ch, a);
            loss_accumulated_with_graph::check_aug_assign(ch, a);
        }
        Stmt::Assign(a) => {
            outputs_kept_on_gpu::note_assign(ch, a);
            hidden_state_not_detached::check(ch, a);
            tensor_appended_in_loop::check_subscript_store(ch, a);
            loss_accumulated_with_graph::check_assign(ch, a);
            tensor_stored_on_module::check(ch, a);
        }
        Stmt::Import(_) | Stmt::ImportFrom(_) => deprecated_cuda_amp::check_import(ch, stmt),
        Stmt::Return(r) => tensor_appended_in_loop::check_step_return(ch, r),
        Stmt::FunctionDef(f) => {
            hook_stores_activation::check(ch, f);
            object_recreated_in_loop::check_function(ch, f);
        }
        Stmt::With(w) => gradient_tape_unused::check(ch, w),
        _ => {}
    }
}

/// Call-level rules.
pub(crate) fn on_call<'a>(ch: &mut Checker<'a>, call: &'a ExprCall) {
    tensor_appended_in_loop::check_call(ch, call);
    inference_without_no_grad::check(ch, call);
    empty_cache_in_loop::check(ch, call);
    retain_graph_in_loop::check(ch, call);
    deprecated_cuda_amp::check_call(ch, call);
    from_pretrained_default_dtype::check(ch, call);
    torch_load_without_map_location::check(ch, call);
    deprecated_load_in_kbit::check(ch, call);
    data_parallel::check(ch, call);
    move_after_device_map::check(ch, call);
    fsdp_full_state_dict_on_gpu::check(ch, call);
    ddp_without_set_device::check(ch, call);
    graph_kept_by_meter::check(ch, call);
    outputs_kept_on_gpu::check(ch, call);
    object_recreated_in_loop::check_call(ch, call);
    generator_output_not_detached::check(ch, call);
}

/// Attribute-level rules (uses that are not calls).
pub(crate) fn on_attribute<'a>(ch: &mut Checker<'a>, expr: &'a Expr) {
    deprecated_cuda_amp::check_attribute(ch, expr);
}

/// Loop-level rules, run when a loop's body has been visited.
pub(crate) fn on_loop_exit(ch: &mut Checker<'_>) {
    missing_zero_grad::check(ch);
    let broken = zero_grad_every_micro_step::check(ch);
    if !broken {
        unscaled_gradient_accumulation::check(ch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_enum_order_with_unique_codes_and_sections() {
        for (i, r) in RULES.iter().enumerate() {
            assert_eq!(r.rule as usize, i, "{}", r.code);
            for section in [
                "## What it does",
                "## Evidence it needs",
                "## Why it costs memory",
                "## Example",
                "## Use instead",
            ] {
                assert!(r.doc.contains(section), "{} lacks {section}", r.code);
            }
            if let Some(id) = r.remedy {
                assert!(oomkit_core::remedies::get(id).is_some(), "{}: {id}", r.code);
            }
        }
        let mut codes: Vec<_> = RULES.iter().map(|r| r.code).collect();
        codes.dedup();
        assert_eq!(codes.len(), RULES.len());
    }

    #[test]
    fn selectors_match_codes_prefixes_and_names() {
        assert_eq!(RuleSet::matching("ALL"), Some(RuleSet::all()));
        let s = RuleSet::matching("OOM1").expect("prefix");
        assert!(s.contains(Rule::TensorStoredOnModule) && !s.contains(Rule::DataParallel));
        let s = RuleSet::matching("data-parallel").expect("name");
        assert!(s.contains(Rule::DataParallel));
        assert_eq!(RuleSet::matching("XYZ"), None);
        let s = RuleSet::matching("upgrade").expect("category");
        assert!(s.contains(Rule::DeprecatedCudaAmp) && s.contains(Rule::DeprecatedLoadInKbit));
        assert!(!s.contains(Rule::DataParallel));
    }

    #[test]
    fn only_the_tensorflow_rules_run_on_tensorflow_files() {
        let tf = RuleSet::tensorflow();
        for r in RULES {
            assert_eq!(tf.contains(r.rule), r.tensorflow, "{}", r.code);
        }
        assert!(tf.contains(Rule::ObjectRecreatedInLoop));
        assert!(!tf.contains(Rule::TensorAppendedInLoop));
        let s = RuleSet::all().intersect(tf);
        assert_eq!(s, tf);
    }

    #[test]
    fn the_default_set_holds_only_stable_memory_rules() {
        let d = RuleSet::default_set();
        for r in RULES {
            assert_eq!(
                d.contains(r.rule),
                r.category == Category::Memory && !r.preview,
                "{}",
                r.code
            );
        }
        for r in [
            Rule::DeprecatedCudaAmp,
            Rule::DeprecatedLoadInKbit,
            Rule::DataParallel,
        ] {
            assert!(!d.contains(r), "{r:?} is opt-in");
        }
    }
}
