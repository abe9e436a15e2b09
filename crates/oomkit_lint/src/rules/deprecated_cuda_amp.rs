//! OOM109 `deprecated-cuda-amp`.

use crate::context::Checker;
use crate::diagnostic::Edit;
use crate::parse::ast::{self, Expr, Stmt};
use crate::parse::{Ranged, TextRange};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `torch.cuda.amp.autocast` and `torch.cuda.amp.GradScaler`, imported or used
    /// (through any alias). `--fix` rewrites `torch.cuda.amp.autocast(...)` to
    /// `torch.autocast("cuda", ...)` and `torch.cuda.amp.GradScaler(...)` to
    /// `torch.amp.GradScaler("cuda", ...)`.
    ///
    /// ## Evidence it needs
    /// The import or use itself. This is an `upgrade` rule (opt-in): the deprecated API
    /// costs no memory today, so it does not run by default.
    ///
    /// ## Why it costs memory
    /// Mixed precision halves activation memory; the `torch.cuda.amp` spellings are
    /// deprecated since PyTorch 2.4 (a `FutureWarning` every call) and will be removed, and
    /// code that drops AMP to silence the warning loses that saving.
    ///
    /// ## Example
    /// ```python
    /// scaler = torch.cuda.amp.GradScaler()
    /// with torch.cuda.amp.autocast(dtype=torch.float16):
    ///     loss = model(batch).loss
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// scaler = torch.amp.GradScaler("cuda")
    /// with torch.autocast("cuda", dtype=torch.float16):
    ///     loss = model(batch).loss
    /// ```
}

/// A use of `torch.cuda.amp.autocast`/`GradScaler`.
pub(crate) struct DeprecatedCudaAmp {
    /// `autocast` or `GradScaler`.
    pub member: String,
    /// What replaces it (`torch.autocast("cuda")`).
    pub replacement: &'static str,
}

impl Violation for DeprecatedCudaAmp {
    const RULE: Rule = Rule::DeprecatedCudaAmp;

    fn message(&self) -> String {
        format!("`torch.cuda.amp.{}` is deprecated", self.member)
    }

    fn fix_title(&self) -> String {
        format!("Use `{}` instead", self.replacement)
    }
}

fn replacement(member: &str) -> Option<&'static str> {
    match member {
        "autocast" => Some("torch.autocast(\"cuda\")"),
        "GradScaler" => Some("torch.amp.GradScaler(\"cuda\")"),
        _ => None,
    }
}

fn report(ch: &mut Checker<'_>, range: TextRange, member: &str, edits: Vec<Edit>) {
    let Some(new) = replacement(member) else {
        return;
    };
    ch.report_fix(
        range,
        DeprecatedCudaAmp {
            member: member.to_string(),
            replacement: new,
        },
        edits,
    );
}

/// `from torch.cuda.amp import autocast, GradScaler`, `import torch.cuda.amp`.
pub(crate) fn check_import(ch: &mut Checker<'_>, stmt: &Stmt) {
    if !ch.enabled(Rule::DeprecatedCudaAmp) {
        return;
    }
    match stmt {
        Stmt::ImportFrom(i) if i.level == 0 => match i.module.as_ref().map(|m| m.as_str()) {
            Some("torch.cuda.amp") => {
                for a in &i.names {
                    report(ch, a.range(), a.name.as_str(), Vec::new());
                }
            }
            Some("torch.cuda.amp.autocast_mode") => {
                for a in &i.names {
                    report(ch, a.range(), a.name.as_str(), Vec::new());
                }
            }
            _ => {}
        },
        _ => {}
    }
}

/// `X.cuda.amp.autocast(...)` called: flagged with a fix when `X` is `torch`'s name.
pub(crate) fn check_call(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::DeprecatedCudaAmp) {
        return;
    }
    let Expr::Attribute(member) = &*call.func else {
        return;
    };
    let Some(q) = ch.qualified(&call.func) else {
        return;
    };
    let Some(name) = q.strip_prefix("torch.cuda.amp.") else {
        return;
    };
    let Some(new_callee) = fix_callee(ch, &member.value, name) else {
        return check_attribute_named(ch, &call.func, name);
    };
    let has_args = !call.arguments.is_empty();
    let Some(open) = call
        .arguments
        .range()
        .start()
        .checked_add(crate::parse::TextSize::from(1))
    else {
        return;
    };
    let edits = vec![
        Edit {
            range: call.func.range(),
            content: new_callee,
        },
        Edit {
            range: TextRange::empty(open),
            content: if has_args {
                "\"cuda\", ".into()
            } else {
                "\"cuda\"".into()
            },
        },
    ];
    ch.handled.insert(call.func.range());
    report(ch, call.func.range(), name, edits);
}

/// `torch.autocast` / `torch.amp.GradScaler` spelled with the same torch name, when the
/// callee is literally `<torch>.cuda.amp.<member>`.
fn fix_callee(ch: &Checker<'_>, amp: &Expr, member: &str) -> Option<String> {
    let Expr::Attribute(amp_attr) = amp else {
        return None;
    };
    let Expr::Attribute(cuda) = &*amp_attr.value else {
        return None;
    };
    let Expr::Name(torch) = &*cuda.value else {
        return None;
    };
    if amp_attr.attr.as_str() != "amp" || cuda.attr.as_str() != "cuda" {
        return None;
    }
    if ch.qualified(&cuda.value).as_deref() != Some("torch") {
        return None;
    }
    let t = torch.id.as_str();
    match member {
        "autocast" => Some(format!("{t}.autocast")),
        "GradScaler" => Some(format!("{t}.amp.GradScaler")),
        _ => None,
    }
}

fn check_attribute_named(ch: &mut Checker<'_>, expr: &Expr, member: &str) {
    if replacement(member).is_some() {
        ch.handled.insert(expr.range());
        report(ch, expr.range(), member, Vec::new());
    }
}

/// A use that is not a call (`autocast = torch.cuda.amp.autocast`, `amp.GradScaler`).
pub(crate) fn check_attribute(ch: &mut Checker<'_>, expr: &Expr) {
    if !ch.enabled(Rule::DeprecatedCudaAmp) {
        return;
    }
    if let Some(q) = ch.qualified(expr)
        && let Some(member) = q.strip_prefix("torch.cuda.amp.")
    {
        check_attribute_named(ch, expr, member);
    }
}
