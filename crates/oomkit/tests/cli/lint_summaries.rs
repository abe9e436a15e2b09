//! `oomkit lint`: values followed through the functions of a file and of the other
//! files of the linted tree (function summaries), dicts and tuples that hold graph
//! tensors, and the rules that left preview, through the binary.

use std::fs;
use std::path::Path;

use crate::support::cli;

fn write(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(p, text).expect("write");
}

/// A trainer class in another module whose `train_step` backpropagates the losses it
/// returns (bubbliiiing/faster-rcnn-pytorch's `FasterRCNNTrainer`, reproduced here).
const TRAINER: &str = "import torch.nn as nn\n\n\nclass Trainer(nn.Module):\n    def __init__(self, net, optimizer):\n        super().__init__()\n        self.net = net\n        self.optimizer = optimizer\n\n    def train_step(self, x, y):\n        self.optimizer.zero_grad()\n        losses = self.net(x, y)\n        losses[-1].backward()\n        self.optimizer.step()\n        return losses\n";

/// The caller sums the returned losses as tensors (the faster-rcnn-pytorch#35 leak).
const CALLER: &str = "from nets.trainer import Trainer\n\n\ndef fit_one_epoch(trainer, loader):\n    total_loss = 0\n    for batch in loader:\n        losses = trainer.train_step(*batch)\n        rpn, total = losses[0], losses[-1]\n        total_loss += total\n    return total_loss / len(loader)\n";

/// A method of another module is resolved by its name once the whole tree is known:
/// the caller's accumulation is flagged when the tree is linted, not when the caller is
/// linted alone, and not when another definition of that name returns a number.
#[test]
fn a_method_of_another_module_is_followed_through_the_tree() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path();
    write(root, "nets/trainer.py", TRAINER);
    write(root, "train.py", CALLER);
    cli(&["lint", "."])
        .cwd(root)
        .run()
        .code(1)
        .stdout_has("train.py:9:9: OOM102 `total_loss` accumulates `total` with its autograd graph")
        .stdout_has("Found 1 problem.");
    // alone, the caller shows nothing about what `train_step` returns
    cli(&["lint", "train.py"]).cwd(root).run().code(0);
    // the fixed trainer returns numbers: nothing to flag
    write(
        root,
        "nets/trainer.py",
        &TRAINER.replace("return losses", "return [l.item() for l in losses]"),
    );
    cli(&["lint", "."]).cwd(root).run().code(0);
    // two definitions of `train_step` that disagree: not resolved by name
    write(root, "nets/trainer.py", TRAINER);
    write(
        root,
        "other.py",
        "class Other:\n    def train_step(self, batch):\n        loss = self.model(batch)\n        loss.backward()\n        return loss.item()\n",
    );
    cli(&["lint", "."]).cwd(root).run().code(0);
}

/// The fixtures of dicts/tuples holding graphs, function summaries, conditional totals,
/// an input kept for `retain_grad`, the fake regenerated under `no_grad` and an
/// evaluation helper method: exactly their markers, by default, with messages and fixes
/// that fit the value.
#[test]
fn summaries_and_containers_give_their_markers_through_the_binary() {
    let dir = crate::lint_fixtures();
    for (file, code) in [
        ("OOM101_containers_and_summaries.py", "OOM101"),
        ("OOM102_conditional_start.py", "OOM102"),
        ("OOM110_retain_grad.py", "OOM110"),
        ("OOM116.py", "OOM116"),
        ("OOM104_eval_helper.py", "OOM104"),
    ] {
        let source = fs::read_to_string(dir.join(file)).expect("fixture");
        let mut want: Vec<u64> = source
            .lines()
            .enumerate()
            .filter(|(_, l)| l.contains(&format!("# expect: {code}")))
            .map(|(i, _)| i as u64 + 1)
            .collect();
        want.sort_unstable();
        let doc = cli(&["lint", "--select", code, "--format", "json", file])
            .cwd(&dir)
            .run()
            .code(1)
            .json();
        let mut got: Vec<u64> = doc["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .map(|d| d["line"].as_u64().expect("line"))
            .collect();
        got.sort_unstable();
        assert_eq!(got, want, "{file}");
    }
    cli(&["lint", "OOM101_containers_and_summaries.py"])
        .cwd(&dir)
        .run()
        .code(1)
        .stdout_has("`store` keeps the tensors in `output` and their autograd graph alive")
        .stdout_has("help: Store detached tensors in `logging_output`");
}

/// OOM113, OOM115, OOM116 and OOM207 met the precision bar and run by default.
#[test]
fn promoted_rules_run_by_default() {
    let dir = crate::lint_fixtures();
    for code in ["OOM113", "OOM115", "OOM116", "OOM207"] {
        cli(&["lint", &format!("{code}.py")])
            .cwd(&dir)
            .run()
            .code(1)
            .stdout_has(code);
        let out = cli(&["lint", "--explain", code]).run();
        out.code(0).stdout_has("Category: memory (on by default)");
    }
}
