//! OOM201 `from-pretrained-default-dtype`.

use crate::context::{Checker, is_model_class, last_segment_of_text, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `AutoModel*.from_pretrained(...)` and `*ForCausalLM.from_pretrained(...)`
    /// without `torch_dtype=`/`dtype=` or a quantization config, where the weights are
    /// not trained in float32 on purpose. Tokenizers, processors and configs are not
    /// flagged, nor calls that pass `**kwargs`.
    ///
    /// ## Evidence it needs
    /// The loaded weights must be frozen, so float32 buys nothing:
    /// - the file uses PEFT (`get_peft_model`, `LoraConfig`, `import peft`): a LoRA base,
    ///   unless the file shards the model with DeepSpeed ZeRO or FSDP (`deepspeed_plugin`,
    ///   `fsdp_plugin`, `FSDP(...)`, `import deepspeed`…), which cast it to their own
    ///   dtype (ZeRO) or want one dtype per flat parameter (FSDP);
    /// - the model is a reference or teacher (`ref_model`, `teacher`, `frozen_*`), is
    ///   frozen (`m.requires_grad_(False)`, `for p in m.parameters(): p.requires_grad =
    ///   False`, `...from_pretrained(...).eval()`), or is loaded under `no_grad`;
    /// - or the file trains nothing (no `backward`, optimizer or `*Trainer`): inference
    ///   or generation — not a load that a model class wraps as its submodule
    ///   (`self.transformer = …` in `__init__`), trained wherever the class is used.
    ///
    /// Full fine-tuning keeps float32 master weights on purpose (AMP, FSDP and DeepSpeed
    /// mixed precision), so a trained model is never flagged. Never reported when the
    /// project requires transformers 5 or newer (`pyproject.toml`, `requirements*.txt`,
    /// `uv.lock`/`poetry.lock`), where `from_pretrained` keeps the checkpoint's dtype.
    ///
    /// ## Why it costs memory
    /// Without a dtype, transformers (before v5) loads the weights in float32 even when the
    /// checkpoint is stored in bf16/fp16: twice the memory, and often the difference
    /// between fitting on the GPU or not.
    ///
    /// ## Example
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")
    /// model = get_peft_model(model, LoraConfig(r=16))
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", dtype=torch.bfloat16)
    /// ```
}

/// A frozen model loaded in float32 by default.
pub(crate) struct FromPretrainedDefaultDtype {
    /// The model class (`AutoModelForCausalLM`).
    pub class: String,
    /// The evidence that its weights are frozen, as a clause.
    pub why: String,
}

impl Violation for FromPretrainedDefaultDtype {
    const RULE: Rule = Rule::FromPretrainedDefaultDtype;

    fn message(&self) -> String {
        let (class, why) = (&self.class, &self.why);
        format!(
            "`{class}.from_pretrained(...)` without `dtype=` loads the weights in float32, twice the memory of bf16, and {why}"
        )
    }

    fn fix_title(&self) -> String {
        "Pass `dtype=torch.bfloat16` (or `torch_dtype=` before transformers 4.56)".to_string()
    }
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
    if set || ch.project.transformers_at_least(5) {
        return;
    }
    let Some(why) = frozen_evidence(ch, call) else {
        return;
    };
    ch.report(
        call.range(),
        FromPretrainedDefaultDtype {
            class: class.to_string(),
            why: why.to_string(),
        },
    );
}

/// Why the weights of this load are not trained in float32, if the file says so.
fn frozen_evidence(ch: &Checker<'_>, call: &ast::ExprCall) -> Option<&'static str> {
    if !ch.grad_enabled() {
        return Some("they are loaded under `no_grad`");
    }
    let file = ch.file();
    let targets = file.bound_to.get(&call.range());
    let named_frozen = targets.into_iter().flatten().any(|t| {
        let last = last_segment_of_text(t).to_ascii_lowercase();
        last.starts_with("ref_")
            || last.ends_with("_ref")
            || last == "ref"
            || ["reference", "teacher", "frozen"]
                .iter()
                .any(|w| last.contains(w))
    });
    if named_frozen {
        return Some("they belong to a reference/teacher model that is never trained");
    }
    if file.frozen_calls.contains(&call.range())
        || targets
            .into_iter()
            .flatten()
            .any(|t| file.frozen.contains(t))
    {
        return Some("they are frozen");
    }
    // a PEFT base that DeepSpeed ZeRO or FSDP shards: the engine casts (ZeRO) or keeps
    // one dtype per flat parameter (FSDP), so the float32 load is not what the GPU holds
    if file.peft && !file.sharded {
        return Some("they are the frozen base of a PEFT/LoRA model");
    }
    // a model class that wraps the load as a submodule (`self.transformer = …` in
    // `__init__`) is trained wherever it is used, not in the file that defines it
    // (pytorch-ignite's `examples/transformers/model.py`)
    let submodule = ch.scope().name == "__init__"
        && file
            .bound_to
            .get(&call.range())
            .into_iter()
            .flatten()
            .any(|t| t.starts_with("self."));
    if !file.trains && !submodule {
        return Some("nothing in this file trains them");
    }
    None
}
