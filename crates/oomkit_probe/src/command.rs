//! The command to supervise: the argv given after `--`, with `{batch}`
//! substituted per trial (fd's `{}`, hyperfine's `{param}`), run without a
//! shell. The batch size is also exported as `OOMKIT_BATCH_SIZE`, as
//! hyperfine exports `HYPERFINE_ITERATION`.

use std::ffi::{OsStr, OsString};

/// The placeholder replaced by the batch size in every argument.
pub const PLACEHOLDER: &str = "{batch}";

/// The environment variable that carries the batch size to the child.
pub const BATCH_ENV: &str = "OOMKIT_BATCH_SIZE";

/// A command line: program and arguments, plus environment to add.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandLine {
    /// Program and arguments.
    pub argv: Vec<OsString>,
    /// Variables set in the child's environment (on top of ours).
    pub env: Vec<(OsString, OsString)>,
}

impl CommandLine {
    /// A command line from the argv after `--`.
    pub fn new(argv: Vec<OsString>) -> CommandLine {
        CommandLine {
            argv,
            env: Vec::new(),
        }
    }

    /// Whether any argument names `{batch}`.
    pub fn has_placeholder(&self) -> bool {
        self.argv
            .iter()
            .any(|a| a.to_string_lossy().contains(PLACEHOLDER))
    }

    /// This command for one trial: `{batch}` replaced in every argument and
    /// `OOMKIT_BATCH_SIZE` set.
    pub fn for_batch(&self, batch: u64) -> CommandLine {
        let value = batch.to_string();
        let mut env = self.env.clone();
        env.push((OsString::from(BATCH_ENV), OsString::from(&value)));
        CommandLine {
            argv: self.argv.iter().map(|a| substitute(a, &value)).collect(),
            env,
        }
    }

    /// The command as a person would type it (for messages).
    pub fn display(&self) -> String {
        self.argv
            .iter()
            .map(|a| quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Replaces `{batch}` in one argument; arguments that are not UTF-8 are kept
/// as they are unless they contain the placeholder in their lossy form.
fn substitute(arg: &OsStr, value: &str) -> OsString {
    match arg.to_str() {
        Some(s) => OsString::from(s.replace(PLACEHOLDER, value)),
        None => {
            let lossy = arg.to_string_lossy();
            if lossy.contains(PLACEHOLDER) {
                OsString::from(lossy.replace(PLACEHOLDER, value))
            } else {
                arg.to_os_string()
            }
        }
    }
}

/// Shell-style single quoting when an argument needs it.
fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%{}".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cl(args: &[&str]) -> CommandLine {
        CommandLine::new(args.iter().map(OsString::from).collect())
    }

    #[test]
    fn substitutes_every_placeholder_and_exports_the_batch() {
        let c = cl(&["python", "train.py", "--bs={batch}", "{batch}x{batch}"]).for_batch(48);
        assert_eq!(c.argv, ["python", "train.py", "--bs=48", "48x48"]);
        assert_eq!(
            c.env,
            [(OsString::from("OOMKIT_BATCH_SIZE"), OsString::from("48"))]
        );
    }

    #[test]
    fn knows_whether_the_placeholder_is_used() {
        assert!(cl(&["a", "--batch", "{batch}"]).has_placeholder());
        assert!(!cl(&["a", "--batch", "{bs}"]).has_placeholder());
    }

    #[test]
    fn displays_arguments_quoted_like_a_shell() {
        assert_eq!(
            cl(&["python", "-c", "print('hi there')", "--bs={batch}"]).display(),
            r"python -c 'print('\''hi there'\'')' --bs={batch}"
        );
    }
}
