//! SARIF 2.1.0 output (for GitHub code scanning), after ruff's `sarif.rs`.

use serde_json::{Value, json};

use crate::diagnostic::Diagnostic;
use crate::rules::RULES;

/// The SARIF log for a run.
pub fn to_sarif(diagnostics: &[Diagnostic], version: &str) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            let summary = r
                .doc
                .lines()
                .map(str::trim)
                .skip_while(|l| l.is_empty() || l.starts_with('#'))
                .take_while(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            json!({
                "id": r.code,
                "name": r.name,
                "shortDescription": { "text": summary },
                "fullDescription": { "text": crate::explain(r) },
                "help": { "text": crate::explain(r) },
                "defaultConfiguration": { "level": "warning" },
                "properties": { "remedy": r.remedy },
            })
        })
        .collect();
    let results: Vec<Value> = diagnostics
        .iter()
        .map(|d| {
            // a notebook cell: the region is within the cell, which the text names too
            let cell = d.cell.map(|c| format!("cell {c}: ")).unwrap_or_default();
            let mut result = json!({
                "ruleId": d.code,
                "level": "warning",
                "message": { "text": format!("{cell}{} ({})", d.message, d.fix) },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": d.path.replace('\\', "/").trim_start_matches("./") },
                        "region": {
                            "startLine": d.line,
                            "startColumn": d.column,
                            "endLine": d.end_line,
                            "endColumn": d.end_column,
                        }
                    }
                }],
            });
            if let (Some(c), Some(obj)) = (d.cell, result.as_object_mut()) {
                obj.insert("properties".into(), json!({ "cell": c }));
            }
            result
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "oomkit",
                "version": version,
                "rules": rules,
            }},
            "results": results,
        }],
    })
}
