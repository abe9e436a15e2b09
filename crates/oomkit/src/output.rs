//! Where results go: stdout (styled only on a terminal), errors on stderr.

use std::io::{self, Write};

use crate::cli::ColorChoice;

/// A locked stdout that strips ANSI styles unless colour is wanted.
pub fn stdout(color: ColorChoice) -> anstream::AutoStream<io::StdoutLock<'static>> {
    anstream::AutoStream::new(io::stdout().lock(), anstream_choice(color))
}

/// A stderr that strips ANSI styles unless colour is wanted.
pub fn stderr(color: ColorChoice) -> anstream::AutoStream<io::StderrLock<'static>> {
    anstream::AutoStream::new(io::stderr().lock(), anstream_choice(color))
}

fn anstream_choice(color: ColorChoice) -> anstream::ColorChoice {
    match color {
        ColorChoice::Auto => anstream::ColorChoice::Auto,
        ColorChoice::Always => anstream::ColorChoice::Always,
        ColorChoice::Never => anstream::ColorChoice::Never,
    }
}

/// Prints `error: …` and one `caused by: …` line per source, on stderr.
pub fn print_error(err: &anyhow::Error) {
    let mut e = anstream::stderr();
    let _ = writeln!(e, "error: {err}");
    for cause in err.chain().skip(1) {
        let _ = writeln!(e, "  caused by: {cause}");
    }
}

/// Prints a one-line error about one input, on stderr, and goes on.
pub fn print_input_error(err: &anyhow::Error) {
    let mut e = anstream::stderr();
    let mut msg = err.to_string();
    for cause in err.chain().skip(1) {
        msg.push_str(": ");
        msg.push_str(&cause.to_string());
    }
    // One line, whatever the input's name or text holds.
    let _ = writeln!(e, "error: {}", oomkit_core::text::escape(&msg));
}

/// A closed pipe (`oomkit explain log | head`) is not an error (ripgrep's rule).
/// `serde_json` wraps the write error in its own type, so look inside that too.
/// On Windows a pipe whose reader is gone may also answer
/// `ERROR_PIPE_NOT_CONNECTED` (233), which std does not map to `BrokenPipe`.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        let io = c.downcast_ref::<io::Error>();
        if cfg!(windows) && io.and_then(io::Error::raw_os_error) == Some(233) {
            return true;
        }
        io.map(io::Error::kind).or_else(|| {
            c.downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
        }) == Some(io::ErrorKind::BrokenPipe)
    })
}
