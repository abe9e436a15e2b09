//! Evidence from the other files of the linted tree: a checkpoint that
//! `train.py` loads may be written from CPU tensors by `save.py`, and a loader helper
//! that nothing in its file calls may be called from another module.
//!
//! Files are linted in parallel, each on its own; a finding that needs evidence from
//! elsewhere carries a [`Pending`] condition, and each file leaves a small
//! [`Summary`]. After the parallel pass the caller gathers the summaries into a
//! [`Tree`], notes which other files name a pending helper ([`mentions`]: only then
//! are those files read again, and only searched for words), and [`settle`] drops the
//! findings whose condition holds. [`crate::lint_source`] does all of it for a tree
//! of one file.

use foldhash::HashSet;

use crate::Diagnostic;

/// What a finding still needs from the rest of the tree: it is dropped when one of the
/// set conditions holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pending {
    /// The file writes no checkpoint itself: dropped when every checkpoint of the tree
    /// is written from CPU tensors (OOM202).
    pub unless_tree_saves_cpu: bool,
    /// The finding lies in this module-level helper, which nothing in its own file
    /// names: dropped when no other file of the tree names it either (dead code).
    pub unless_unused: Option<String>,
}

impl Pending {
    /// Whether the finding depends on the tree at all.
    pub fn is_empty(&self) -> bool {
        !self.unless_tree_saves_cpu && self.unless_unused.is_none()
    }
}

/// What one file tells the rest of the tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// `torch.save(...)` calls in the file.
    pub saves: u32,
    /// …of which save a value moved to the CPU.
    pub cpu_saves: u32,
    /// The file gathers its state dicts to the CPU (`offload_to_cpu`).
    pub offloads_to_cpu: bool,
    /// What the file's training steps (functions and methods that backpropagate) return,
    /// by name (`train_step`): whether the value holds an autograd graph ([`Returned`]).
    pub returns: Vec<(String, Returned)>,
}

/// What a function of the tree returns, as other files see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returned {
    /// A tensor that carries an autograd graph (`loss.backward()` … `return loss`).
    Graph,
    /// A dict, list or tuple holding such tensors; `all` when each element is one.
    HoldsGraph {
        /// Every element carries a graph.
        all: bool,
    },
    /// Anything else (a number, a detached tensor, nothing known).
    Other,
}

/// Names too common to resolve across files by name alone (`optimizer.step()`,
/// `meter.update(...)`, `model(...)`'s `forward`).
const UNRESOLVED: &[&str] = &[
    "step", "update", "forward", "run", "get", "item", "backward", "apply", "train", "eval",
    "main", "call", "compute", "load", "save", "predict", "evaluate",
];

/// Whether a function's name may be resolved across the files of the tree.
pub fn resolvable(name: &str) -> bool {
    !name.starts_with("__") && !UNRESOLVED.contains(&name)
}

/// What the tree's functions return, by name: only names whose every definition in the
/// tree agrees (a name defined twice with different results is not resolved).
#[derive(Debug, Default, Clone)]
pub struct Returns {
    by_name: std::collections::HashMap<String, Option<Returned>>,
}

impl Returns {
    /// What every function of the tree named `name` returns, when they agree.
    pub fn get(&self, name: &str) -> Option<Returned> {
        self.by_name.get(name).copied().flatten()
    }

    /// The names whose functions return a graph (or a container of graphs).
    pub fn graph_names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .by_name
            .iter()
            .filter(|(_, r)| matches!(r, Some(Returned::Graph | Returned::HoldsGraph { .. })))
            .map(|(n, _)| n.as_str())
            .collect();
        out.sort_unstable();
        out
    }

    fn add(&mut self, name: &str, r: Returned) {
        self.by_name
            .entry(name.to_string())
            .and_modify(|known| {
                if *known != Some(r) {
                    *known = None;
                }
            })
            .or_insert(Some(r));
    }
}

/// The evidence of the whole tree.
#[derive(Debug, Default)]
pub struct Tree {
    saves: u32,
    cpu_saves: u32,
    offloads_to_cpu: bool,
    /// Pending helpers that some other file of the tree names.
    mentioned: HashSet<String>,
    /// What the tree's functions return, by name.
    pub returns: Returns,
}

impl Tree {
    /// Adds one file's summary.
    pub fn add(&mut self, s: Summary) {
        self.saves = self.saves.saturating_add(s.saves);
        self.cpu_saves = self.cpu_saves.saturating_add(s.cpu_saves);
        self.offloads_to_cpu |= s.offloads_to_cpu;
        for (name, r) in &s.returns {
            self.returns.add(name, *r);
        }
    }

    /// Records that a file other than the helper's own names `helper`.
    pub fn mentioned(&mut self, helper: &str) {
        self.mentioned.insert(helper.to_string());
    }

    /// Whether the tree writes checkpoints and every one holds CPU tensors.
    pub fn saves_cpu_state(&self) -> bool {
        self.saves > 0 && (self.cpu_saves == self.saves || self.offloads_to_cpu)
    }
}

/// The helpers that `diagnostics` still wait on, with the file each is defined in:
/// the caller searches every other file for them ([`mentions`]).
pub fn pending_helpers(diagnostics: &[Diagnostic]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = diagnostics
        .iter()
        .filter_map(|d| {
            d.pending
                .unless_unused
                .as_ref()
                .map(|h| (h.clone(), d.path.clone()))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether `text` contains `name` as a whole word (an identifier, in code, a comment or
/// a string: any mention counts as a possible call, which only ever keeps a finding).
pub fn mentions(text: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text.get(..at).and_then(|t| t.chars().next_back());
        let after = text
            .get(at.saturating_add(name.len())..)
            .and_then(|t| t.chars().next());
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// Drops the findings whose pending condition holds in `tree`.
pub fn settle(diagnostics: &mut Vec<Diagnostic>, tree: &Tree) {
    diagnostics.retain(|d| {
        let p = &d.pending;
        let cpu = p.unless_tree_saves_cpu && tree.saves_cpu_state();
        let dead = p
            .unless_unused
            .as_ref()
            .is_some_and(|h| !tree.mentioned.contains(h));
        !(cpu || dead)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lint(path: &str, src: &str) -> crate::Linted {
        let settings = crate::Settings {
            rules: crate::RuleSet::matching("OOM202").expect("code"),
            ..crate::Settings::default()
        };
        crate::lint_file(path, src, &settings).expect("parses")
    }

    const HELPER: &str = "import torch\nimport torch.distributed as dist\ndef load_ckpt(p):\n    s = torch.load(p)\n    return s\n";

    #[test]
    fn a_helper_nothing_calls_waits_for_the_tree_only_in_scripts_or_when_private() {
        // a module that others may import: the finding stands
        let l = lint("lib.py", HELPER);
        assert_eq!(l.diagnostics[0].pending.unless_unused, None);
        assert_eq!(l.alone().len(), 1);
        // a script: dead code unless another file names the helper
        let script =
            format!("{HELPER}if __name__ == '__main__':\n    dist.init_process_group('nccl')\n");
        let l = lint("train.py", &script);
        assert_eq!(
            l.diagnostics[0].pending.unless_unused.as_deref(),
            Some("load_ckpt")
        );
        assert_eq!(
            pending_helpers(&l.diagnostics),
            vec![("load_ckpt".to_string(), "train.py".to_string())]
        );
        let mut tree = Tree::default();
        tree.mentioned("load_ckpt");
        let mut d = l.diagnostics.clone();
        settle(&mut d, &tree);
        assert_eq!(d.len(), 1);
        assert!(l.alone().is_empty());
        // called in its own file, or decorated: never dead
        for src in [
            format!("{script}    load_ckpt('a')\n"),
            format!("{script}    f = getattr(m, 'load_ckpt')\n"),
            script.replace("def load_ckpt", "@cache\ndef load_ckpt"),
        ] {
            assert_eq!(lint("t.py", &src).alone().len(), 1, "{src}");
        }
        // a pytest test is never dead either, but pytest runs it in one process: not
        // "every rank" (OOM202_pytest_tests.py)
        let pytest = script.replace("load_ckpt", "test_load");
        assert_eq!(lint("t.py", &pytest).diagnostics.len(), 0, "{pytest}");
        // private helpers are dead in any module
        let private = HELPER.replace("load_ckpt", "_load_ckpt");
        assert!(lint("lib.py", &private).alone().is_empty());
    }

    #[test]
    fn checkpoints_written_from_cpu_elsewhere_in_the_tree_settle_a_load() {
        let load = "import torch\nimport torch.distributed as dist\nstate = torch.load('a.pt')\n";
        let l = lint("train.py", load);
        assert!(l.diagnostics[0].pending.unless_tree_saves_cpu);
        let save = lint(
            "save.py",
            "import torch\ntorch.save({k: v.cpu() for k, v in sd.items()}, 'a.pt')\n",
        );
        assert_eq!(save.summary.cpu_saves, 1);
        let gpu = lint(
            "other.py",
            "import torch\ntorch.save(model.state_dict(), 'b.pt')\n",
        );
        let mut tree = Tree::default();
        tree.add(l.summary);
        tree.add(save.summary);
        let mut d = l.diagnostics.clone();
        settle(&mut d, &tree);
        assert!(d.is_empty());
        tree.add(gpu.summary);
        let mut d = l.diagnostics.clone();
        settle(&mut d, &tree);
        assert_eq!(d.len(), 1);
        // a file that saves GPU tensors itself is decided by its own evidence
        let own = format!("{load}torch.save(model.state_dict(), 'a.pt')\n");
        assert!(
            !lint("t.py", &own).diagnostics[0]
                .pending
                .unless_tree_saves_cpu
        );
    }

    #[test]
    fn mentions_are_whole_words() {
        assert!(mentions("x = load_ckpt(p)", "load_ckpt"));
        assert!(mentions("from utils import load_ckpt\n", "load_ckpt"));
        assert!(!mentions("x = load_ckpt_v2(p)", "load_ckpt"));
        assert!(!mentions("x = my_load_ckpt(p)", "load_ckpt"));
        assert!(mentions("é load_ckpt", "load_ckpt"));
        assert!(!mentions("anything", ""));
    }

    #[test]
    fn the_tree_saves_cpu_state_only_when_every_save_does() {
        let mut t = Tree::default();
        assert!(!t.saves_cpu_state());
        t.add(Summary {
            saves: 1,
            cpu_saves: 1,
            ..Summary::default()
        });
        assert!(t.saves_cpu_state());
        t.add(Summary {
            saves: 1,
            ..Summary::default()
        });
        assert!(!t.saves_cpu_state());
        t.add(Summary {
            offloads_to_cpu: true,
            ..Summary::default()
        });
        assert!(t.saves_cpu_state());
    }
}
