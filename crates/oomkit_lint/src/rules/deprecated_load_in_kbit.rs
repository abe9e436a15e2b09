//! OOM203 `deprecated-load-in-kbit`.

use crate::context::{Checker, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `from_pretrained(..., load_in_8bit=True)` and `load_in_4bit=True`.
    ///
    /// ## Evidence it needs
    /// The keyword itself. This is an `upgrade` rule (opt-in): it matters when upgrading
    /// transformers, not for memory today.
    ///
    /// ## Why it costs memory
    /// The bare `load_in_8bit`/`load_in_4bit` arguments are deprecated in transformers and
    /// removed in v5; when they are dropped the model silently loads unquantized (2-4× the
    /// memory). `BitsAndBytesConfig` also exposes the settings that matter for memory
    /// (`bnb_4bit_quant_type="nf4"`, double quantization, compute dtype).
    ///
    /// ## Example
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained(name, load_in_4bit=True)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// from transformers import BitsAndBytesConfig
    /// model = AutoModelForCausalLM.from_pretrained(
    ///     name, quantization_config=BitsAndBytesConfig(load_in_4bit=True)
    /// )
    /// ```
}

/// `load_in_8bit=`/`load_in_4bit=` passed to `from_pretrained`.
pub(crate) struct DeprecatedLoadInKbit {
    /// `load_in_8bit` or `load_in_4bit`.
    pub argument: String,
}

impl Violation for DeprecatedLoadInKbit {
    const RULE: Rule = Rule::DeprecatedLoadInKbit;

    fn message(&self) -> String {
        let a = &self.argument;
        format!("`{a}=` in `from_pretrained` is deprecated (removed in transformers v5)")
    }

    fn fix_title(&self) -> String {
        let a = &self.argument;
        format!("Pass `quantization_config=BitsAndBytesConfig({a}=True)` instead")
    }
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::DeprecatedLoadInKbit) {
        return;
    }
    if !text_of(&call.func).ends_with("from_pretrained") {
        return;
    }
    for k in &call.arguments.keywords {
        let Some(arg) = &k.arg else { continue };
        let a = arg.as_str();
        if matches!(a, "load_in_8bit" | "load_in_4bit")
            && !matches!(&k.value, Expr::BooleanLiteral(b) if !b.value)
        {
            ch.report(
                k.range(),
                DeprecatedLoadInKbit {
                    argument: a.to_string(),
                },
            );
        }
    }
}
