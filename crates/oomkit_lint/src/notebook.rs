//! Jupyter notebooks (`.ipynb`): the code cells are joined into one Python source (as
//! ruff does, so a model defined in one cell is known in the next), linted once, and
//! each finding is mapped back to its cell and the line within that cell.
//!
//! IPython syntax that is not Python is blanked, line for line, so lines keep their
//! numbers: line magics and shell escapes (`%matplotlib inline`, `!pip install …`,
//! `x = !ls`), help (`model?`), and whole cells that start with a cell magic
//! (`%%bash`, `%%time`).

use serde::Deserialize;

/// A notebook's code, joined.
#[derive(Debug)]
pub struct Joined {
    /// The code cells, one after another, each ending with a newline.
    pub source: String,
    /// For each code cell: its 1-based position among all the notebook's cells and the
    /// 1-based line of `source` it starts at.
    pub cells: Vec<(usize, usize)>,
}

#[derive(Deserialize)]
struct Notebook {
    cells: Vec<Cell>,
}

#[derive(Deserialize)]
struct Cell {
    cell_type: String,
    #[serde(default)]
    source: Source,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Source {
    Lines(Vec<String>),
    Text(String),
}

impl Default for Source {
    fn default() -> Self {
        Source::Text(String::new())
    }
}

/// Parses a notebook's JSON and joins its code cells; `Err` names what is wrong.
pub fn join(json: &str) -> Result<Joined, String> {
    let nb: Notebook =
        serde_json::from_str(json).map_err(|e| format!("not a Jupyter notebook: {e}"))?;
    let mut source = String::new();
    let mut cells = Vec::new();
    let mut line = 1usize;
    for (i, cell) in nb.cells.iter().enumerate() {
        if cell.cell_type != "code" {
            continue;
        }
        let text = match &cell.source {
            Source::Lines(l) => l.concat(),
            Source::Text(t) => t.clone(),
        };
        cells.push((i.saturating_add(1), line));
        let cell_magic = text.trim_start().starts_with("%%");
        let mut count = 0usize;
        for l in text.lines() {
            if cell_magic || is_ipython_line(l) {
                // keep the line (and the noqa comment a user may have put there) out
                source.push('#');
            } else {
                source.push_str(l);
            }
            source.push('\n');
            count = count.saturating_add(1);
        }
        // an empty cell still takes one line, so the next cell starts on its own
        if count == 0 {
            source.push('\n');
            count = 1;
        }
        line = line.saturating_add(count);
    }
    Ok(Joined { source, cells })
}

/// A line that IPython rewrites: `%magic`, `!shell`, `x = !shell`, `obj?`.
fn is_ipython_line(line: &str) -> bool {
    let t = line.trim_start();
    if t.starts_with('%') || t.starts_with('!') || (t.ends_with('?') && !t.starts_with('#')) {
        return true;
    }
    // `files = !ls` / `x = %time f()`
    t.split_once('=').is_some_and(|(lhs, rhs)| {
        let r = rhs.trim_start();
        !lhs.ends_with(['!', '=', '<', '>']) && (r.starts_with('!') || r.starts_with('%'))
    })
}

impl Joined {
    /// `(cell, line within the cell)` of a 1-based line of [`Joined::source`].
    pub fn locate(&self, line: usize) -> (usize, usize) {
        let at = self.cells.partition_point(|&(_, start)| start <= line);
        match at.checked_sub(1).and_then(|i| self.cells.get(i)) {
            Some(&(cell, start)) => (cell, line.saturating_sub(start).saturating_add(1)),
            None => (1, line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_code_cells_blanks_ipython_syntax_and_maps_lines_back() {
        let nb = r##"{"cells": [
            {"cell_type": "markdown", "source": ["# Title\n"]},
            {"cell_type": "code", "source": ["%matplotlib inline\n", "import torch\n"]},
            {"cell_type": "code", "source": "!pip install x\nfiles = !ls\nmodel?\nx = a != b\n"},
            {"cell_type": "code", "source": []},
            {"cell_type": "code", "source": ["%%bash\n", "echo hi\n"]},
            {"cell_type": "code", "source": ["y = 1"]}
        ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}"##;
        let j = join(nb).expect("notebook");
        assert_eq!(
            j.source,
            "#\nimport torch\n#\n#\n#\nx = a != b\n\n#\n#\ny = 1\n"
        );
        assert_eq!(j.cells, vec![(2, 1), (3, 3), (4, 7), (5, 8), (6, 10)]);
        assert_eq!(j.locate(2), (2, 2));
        assert_eq!(j.locate(6), (3, 4));
        assert_eq!(j.locate(10), (6, 1));
        assert!(join("{\"cells\": 3}").is_err());
        assert!(join("not json").is_err());
    }
}
