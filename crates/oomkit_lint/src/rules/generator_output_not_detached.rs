//! OOM116 `generator-output-not-detached`.

use crate::context::{Checker, last_segment, optimizer_step, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags the generator's output handed to the discriminator without `.detach()` in
    /// the discriminator's step of a GAN training loop.
    ///
    /// ## Evidence it needs
    /// In a loop over data or steps: a call of a model named like a discriminator
    /// (`discriminator`, `netD`, `disc`, `D`, `d_model`, `critic`) whose argument is a
    /// name bound in the loop from a model named like a generator (`generator`, `netG`,
    /// `gen`, `G`, `g_model`), not detached; and the first optimizer step after the
    /// call, in source order, is the discriminator's (`optimizerD.step()`,
    /// `opt_d.step()`, `d_optimizer.step()`…). The generator's own step passes the same
    /// output on purpose and steps the generator's optimizer: not flagged; nor a fake
    /// made again under `no_grad` before the discriminator's call (the fix of
    /// kan-bayashi/ParallelWaveGAN#132).
    ///
    /// ## Why it costs memory
    /// Without `.detach()`, the discriminator's loss reaches back through the generator:
    /// its backward runs through the generator too (computing generator gradients that
    /// the generator's step then zeroes) and the generator's activations are part of the
    /// discriminator's graph, so a step holds both networks' activations at once.
    ///
    /// ## Example
    /// ```python
    /// for real in loader:
    ///     fake = netG(torch.randn(n, nz, device=device))
    ///     loss_d = crit(netD(real), ones) + crit(netD(fake), zeros)
    ///     loss_d.backward()
    ///     optimizerD.step()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for real in loader:
    ///     fake = netG(torch.randn(n, nz, device=device))
    ///     loss_d = crit(netD(real), ones) + crit(netD(fake.detach()), zeros)
    ///     loss_d.backward()
    ///     optimizerD.step()
    /// ```
}

/// The generator's output fed to the discriminator in its own step, undetached.
pub(crate) struct GeneratorOutputNotDetached {
    /// The discriminator call's callee (`netD`).
    pub discriminator: String,
    /// The generator's output (`fake`).
    pub value: String,
}

impl Violation for GeneratorOutputNotDetached {
    const RULE: Rule = Rule::GeneratorOutputNotDetached;

    fn message(&self) -> String {
        let (d, v) = (&self.discriminator, &self.value);
        format!(
            "`{d}({v})` in the discriminator's step without `.detach()`: its backward runs through the generator and keeps the generator's activations in the discriminator's graph"
        )
    }

    fn fix_title(&self) -> String {
        format!("Pass `{}.detach()` to the discriminator", self.value)
    }
}

/// The name a callee goes by: its last segment, or the string key of a lookup
/// (`self.model["discriminator"]`).
fn name_of(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Subscript(s) => match &*s.slice {
            Expr::StringLiteral(k) => Some(k.value.to_str().to_string()),
            _ => None,
        },
        e => last_segment(e).map(str::to_string),
    }
}

fn named(expr: &Expr, names: &[&str], suffixes: &[&str]) -> bool {
    let Some(last) = name_of(expr) else {
        return false;
    };
    let l = last.to_ascii_lowercase();
    names.contains(&l.as_str()) || suffixes.iter().any(|s| l.ends_with(s) || l.starts_with(s))
}

fn is_discriminator(e: &Expr) -> bool {
    named(e, &["discriminator", "netd", "disc", "d", "critic", "d_net"], &["d_model", "model_d", "discriminator"])
}

fn is_generator(e: &Expr) -> bool {
    named(e, &["generator", "netg", "gen", "g", "g_net"], &["g_model", "model_g", "generator"])
}

/// Whether an optimizer's text names the discriminator's (`optimizerD`, `opt_d`,
/// `d_optimizer`, `optim_disc`).
fn is_discriminator_optimizer(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    let l = last.to_ascii_lowercase();
    last.ends_with('D')
        || l.ends_with("_d")
        || l.starts_with("d_")
        || l.contains("disc")
        || l.contains("critic")
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::GeneratorOutputNotDetached) || !is_discriminator(&call.func) {
        return;
    }
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    if !lp.is_data_loop {
        return;
    }
    let [Expr::Name(arg)] = &*call.arguments.args else {
        return;
    };
    // bound in the loop from a generator call (`fake = netG(noise)`), never detached
    let from_generator = lp.facts.assigns().iter().any(|(targets, value, aug)| {
        !aug && targets.iter().any(|t| t == arg.id.as_str())
            && matches!(value, Expr::Call(c) if is_generator(&c.func))
    });
    let detached = lp.facts.assigns().iter().any(|(targets, value, _)| {
        targets.iter().any(|t| t == arg.id.as_str()) && ch.snippet(value.range()).contains("detach")
    });
    if !from_generator || detached {
        return;
    }
    // its latest binding was made with gradients off (`with torch.no_grad(): fake =
    // netG(z)`, ParallelWaveGAN's fix in kan-bayashi/ParallelWaveGAN#132), or holds no graph
    if ch.scope().bound_without_grad.contains(arg.id.as_str())
        || matches!(
            call.arguments.args.first().map(|a| ch.kind(a)),
            Some(
                crate::context::Kind::Host
                    | crate::context::Kind::Number
                    | crate::context::Kind::Tensor { graph: false }
            )
        )
    {
        return;
    }
    // the discriminator's step: the first optimizer step after the call is D's
    let at = call.range().start();
    let keyed_optimizer = |call: &ast::ExprCall| match &*call.func {
        // `self.optimizer["discriminator"].step()`
        Expr::Attribute(a) if a.attr.as_str() == "step" && call.arguments.is_empty() => {
            match &*a.value {
                Expr::Subscript(sub) if text_of(&sub.value).to_ascii_lowercase().contains("optim") => {
                    name_of(&a.value)
                }
                _ => None,
            }
        }
        _ => None,
    };
    let next = lp
        .facts
        .step_calls()
        .filter(|s| s.call.range().start() > at)
        .filter_map(|s| {
            optimizer_step(ch, s.call)
                .or_else(|| keyed_optimizer(s.call))
                .map(|o| (s.call.range().start(), o))
        })
        .min_by_key(|(start, _)| *start);
    let Some((_, optimizer)) = next else {
        return;
    };
    if !is_discriminator_optimizer(&optimizer) {
        return;
    }
    let d = ch.snippet(call.func.range()).to_string();
    let v = arg.id.to_string();
    ch.report(
        call.range(),
        GeneratorOutputNotDetached {
            discriminator: d,
            value: v,
        },
    );
}
