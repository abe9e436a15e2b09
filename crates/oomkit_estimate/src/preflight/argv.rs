//! Command-line tokens as options and positionals, the way argparse and
//! `HfArgumentParser` read them: `--key value`, `--key=value`, a switch, or a
//! positional.

/// One argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// `--key value`, `--key=value`, `-k value` or a bare switch (`value` None).
    Opt {
        /// As written, dashes included (`--per_device_train_batch_size`, `-c`).
        name: String,
        /// The value, when one follows.
        value: Option<String>,
    },
    /// A positional.
    Pos(String),
}

/// Whether a token reads as a value rather than an option: not starting with
/// `-`, or a negative number.
fn is_value(tok: &str) -> bool {
    !tok.starts_with('-') || tok.parse::<f64>().is_ok()
}

fn is_bool_word(tok: &str) -> bool {
    super::truthy(tok).is_some()
}

/// Splits `tokens` into arguments. `switch(name)` says which options take no
/// value (or only an optional boolean one, as `HfArgumentParser` reads `--bf16`
/// and `--bf16 True`); every other option takes the next token when it reads
/// as a value.
pub fn split(tokens: &[String], switch: &dyn Fn(&str) -> bool) -> Vec<Arg> {
    let mut out = Vec::new();
    let mut it = tokens.iter().peekable();
    while let Some(tok) = it.next() {
        if tok == "--" || !tok.starts_with('-') || tok == "-" || tok.parse::<f64>().is_ok() {
            out.push(Arg::Pos(tok.clone()));
            continue;
        }
        if let Some((name, value)) = tok.split_once('=') {
            out.push(Arg::Opt {
                name: name.to_string(),
                value: Some(value.to_string()),
            });
            continue;
        }
        let takes = match it.peek() {
            Some(next) if switch(tok) => is_bool_word(next),
            Some(next) => is_value(next),
            None => false,
        };
        let value = if takes { it.next().cloned() } else { None };
        out.push(Arg::Opt {
            name: tok.clone(),
            value,
        });
    }
    out
}

/// The option's name without its leading dashes, `-` read as `_`
/// (`HfArgumentParser` accepts both spellings).
pub fn key(name: &str) -> String {
    name.trim_start_matches('-').replace('-', "_")
}
