//! OOM201 `from-pretrained-default-dtype`.

use crate::context::{Checker, is_model_class, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::Rule;

rule_doc! {
    /// ## What it does
    /// Flags `AutoModel*.from_pretrained(...)` and `*ForCausalLM.from_pretrained(...)`
    /// without `torch_dtype=`/`dtype=` or a quantization config. Tokenizers, processors
    /// and configs are not flagged, nor calls that pass `**kwargs`.
    ///
    /// ## Why it costs memory
    /// Without a dtype, transformers (before v5) loads the weights in float32 even when the
    /// checkpoint is stored in bf16/fp16: twice the memory, and often the difference
    /// between fitting on the GPU or not.
    ///
    /// ## Example
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", dtype=torch.bfloat16)
    /// ```
}

/// `X.from_pretrained(...)` on a model class: the class text.
pub(crate) fn model_class(call: &ast::ExprCall) -> Option<String> {
    let Expr::Attribute(a) = &*call.func else {
        return None;
    };
    if a.attr.as_str() != "from_pretrained" {
        return None;
    }
    let class = text_of(&a.value);
    is_model_class(&class).then_some(class)
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::FromPretrainedDefaultDtype) {
        return;
    }
    let Some(class) = model_class(call) else {
        return;
    };
    let kws = &call.arguments.keywords;
    let set = kws.iter().any(|k| match &k.arg {
        None => true,
        Some(a) => matches!(
            a.as_str(),
            "torch_dtype" | "dtype" | "quantization_config" | "load_in_8bit" | "load_in_4bit"
        ),
    });
    if set {
        return;
    }
    ch.report(
        Rule::FromPretrainedDefaultDtype,
        call.range(),
        format!("`{class}.from_pretrained(...)` without `dtype=` loads the weights in float32, twice the memory of bf16"),
        "Pass `dtype=torch.bfloat16` (or `torch_dtype=` before transformers 4.56)".to_string(),
        Vec::new(),
    );
}
