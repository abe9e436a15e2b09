//! `estimate --hub`: a model's `config.json` and safetensors headers fetched
//! from the Hugging Face Hub, never the weights.
//!
//! What huggingface_hub does, and this follows (`constants.py`,
//! `file_download.py`, `utils/_auth.py`):
//! - files are at `{HF_ENDPOINT}/{repo_id}/resolve/{revision}/{filename}`,
//!   `HF_ENDPOINT` defaulting to `https://huggingface.co`;
//! - the token is `HF_TOKEN`, else the file at `HF_TOKEN_PATH`, else
//!   `$HF_HOME/token` (`~/.cache/huggingface/token`), sent as
//!   `Authorization: Bearer …` — gated and private repos need it;
//! - `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) set to 1/ON/YES/TRUE means
//!   no network at all.
//!
//! Weights: a sharded checkpoint's `model.safetensors.index.json` names the
//! shards; each shard's header is read with two HTTP Range requests (the
//! 8-byte length, then the JSON header), as the safetensors format allows —
//! a few KiB per shard instead of gigabytes. A single `model.safetensors`
//! the same way. A server that ignores ranges (200) is read only as far as
//! the header needs.

use std::io::Read;
use std::time::Duration;

use anyhow::{Context, bail};
use oomkit_estimate::ModelConfig;
use oomkit_estimate::checkpoint::{self, Checkpoint};

const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// The most of a `config.json` or index read (real ones: KiB; DeepSeek-V3's
/// index: ~10 MiB).
const CONFIG_LIMIT: u64 = 4 << 20;

/// Where and how to reach the Hub, from the environment.
pub struct Hub {
    endpoint: String,
    token: Option<String>,
    agent: ureq::Agent,
}

/// huggingface_hub's `_is_true`: 1, ON, YES, TRUE (any case).
fn is_true(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_uppercase().as_str(),
        "1" | "ON" | "YES" | "TRUE"
    )
}

impl Hub {
    /// Reads `HF_ENDPOINT`, the token and the offline switch; refuses in
    /// offline mode.
    pub fn from_env() -> anyhow::Result<Hub> {
        Hub::from_vars(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<Hub> {
        for k in ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"] {
            if var(k).is_some_and(|v| is_true(&v)) {
                bail!(
                    "--hub: {k} is set, so the Hugging Face Hub is not contacted (unset it, or download the model first: the local cache is read without --hub)"
                );
            }
        }
        let endpoint = var("HF_ENDPOINT")
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
            .trim()
            .trim_end_matches('/')
            .to_string();
        if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
            bail!("HF_ENDPOINT {endpoint:?} is not an http(s) URL");
        }
        let token = var("HF_TOKEN").or_else(|| {
            let path = var("HF_TOKEN_PATH")
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    super::hf_cache::home_from(|k| var(k).map(std::ffi::OsString::from))
                        .map(|h| h.join("token"))
                })?;
            let t = std::fs::read_to_string(path).ok()?;
            let t = t.trim();
            (!t.is_empty()).then(|| t.to_string())
        });
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .timeout_connect(Some(Duration::from_secs(15)))
            // Status codes are answers here (404: no such file), not errors.
            .http_status_as_error(false)
            .user_agent(concat!("oomkit/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Ok(Hub {
            endpoint,
            token: token.map(|t| t.trim().to_string()),
            agent,
        })
    }

    fn url(&self, repo: &str, file: &str) -> String {
        format!("{}/{repo}/resolve/main/{file}", self.endpoint)
    }

    /// GET `file` of `repo` (optionally a byte range); `Ok(None)` when the
    /// Hub has no such file. At most `limit` + 1 bytes are read: more than
    /// `limit` means the file is longer.
    fn get(
        &self,
        repo: &str,
        file: &str,
        range: Option<(u64, u64)>,
        limit: u64,
    ) -> anyhow::Result<Option<(u16, Vec<u8>)>> {
        let url = self.url(repo, file);
        let mut req = self.agent.get(&url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        if let Some((from, to)) = range {
            req = req.header("Range", format!("bytes={from}-{to}"));
        }
        let mut resp = req.call().with_context(|| format!("cannot reach {url}"))?;
        let status = resp.status().as_u16();
        match status {
            200 | 206 => {}
            404 => return Ok(None),
            401 | 403 => bail!(
                "{url}: HTTP {status}: the repository is gated or private, or the id is wrong (accept its licence on the Hub and set HF_TOKEN)"
            ),
            _ => bail!("{url}: HTTP {status}"),
        }
        let mut body = Vec::new();
        resp.body_mut()
            .as_reader()
            .take(limit.saturating_add(1))
            .read_to_end(&mut body)
            .with_context(|| format!("cannot read {url}"))?;
        Ok(Some((status, body)))
    }

    /// A whole small file (config, index); `Ok(None)` when there is none.
    fn small(&self, repo: &str, file: &str, limit: u64) -> anyhow::Result<Option<Vec<u8>>> {
        let Some((_, body)) = self.get(repo, file, None, limit)? else {
            return Ok(None);
        };
        if body.len() as u64 > limit {
            bail!(
                "{}: larger than {} (not a config or index file?)",
                self.url(repo, file),
                oomkit_core::Bytes(limit)
            );
        }
        Ok(Some(body))
    }

    /// Bytes `from..=to` of a file, when the server honours the range (206)
    /// or sends the whole file (200: the prefix is kept). `None`: no such
    /// file, or too short.
    fn range(&self, repo: &str, file: &str, from: u64, to: u64) -> anyhow::Result<Option<Vec<u8>>> {
        let want = to.saturating_sub(from).saturating_add(1);
        // A 200 sends the whole file: read only what a prefix needs.
        let Some((status, body)) = self.get(repo, file, Some((from, to)), to)? else {
            return Ok(None);
        };
        let part = if status == 206 {
            body
        } else {
            body.get(usize::try_from(from).unwrap_or(usize::MAX)..)
                .unwrap_or_default()
                .to_vec()
        };
        Ok((part.len() as u64 >= want).then(|| {
            part.into_iter()
                .take(usize::try_from(want).unwrap_or(usize::MAX))
                .collect()
        }))
    }

    /// One safetensors file's header, by two range requests; `Ok(None)` when
    /// the file does not exist.
    fn header(
        &self,
        repo: &str,
        file: &str,
        budget: &mut u64,
    ) -> anyhow::Result<Option<Checkpoint>> {
        let name = self.url(repo, file);
        let Some(prefix) = self.range(repo, file, 0, 7)? else {
            return Ok(None);
        };
        let prefix: [u8; 8] = prefix
            .try_into()
            .map_err(|_| anyhow::anyhow!("{name}: malformed safetensors header"))?;
        let n = checkpoint::header_len(prefix).with_context(|| name.clone())?;
        *budget = budget.checked_sub(n).with_context(|| {
            format!(
                "the safetensors headers of this repository add up to more than {}",
                oomkit_core::Bytes(checkpoint::MAX_HEADERS_TOTAL)
            )
        })?;
        let json = self
            .range(repo, file, 8, n.saturating_add(7))?
            .with_context(|| format!("{name}: malformed safetensors header: truncated"))?;
        checkpoint::parse_header(&json)
            .map(Some)
            .with_context(|| name.clone())
    }

    /// The model `repo` on the Hub: its `config.json`, and its weights from
    /// the safetensors headers (or the index's total).
    pub fn model(&self, repo: &str) -> anyhow::Result<ModelConfig> {
        let repo = valid_repo(repo)?;
        let config_url = self.url(repo, "config.json");
        let Some(bytes) = self.small(repo, "config.json", CONFIG_LIMIT)? else {
            bail!(
                "{config_url}: HTTP 404: no config.json (not a transformers model, or the id is wrong)"
            );
        };
        let text = String::from_utf8(bytes)
            .with_context(|| format!("{config_url}: not a text config.json"))?;
        let mut cfg = ModelConfig::from_hf_json(repo, &text)
            .with_context(|| format!("{config_url}: not a usable Hugging Face config.json"))?;
        cfg.config_file = Some(config_url);
        cfg.checkpoint = self.weights(repo)?;
        Ok(cfg)
    }

    fn weights(&self, repo: &str) -> anyhow::Result<Option<Checkpoint>> {
        let mut budget = checkpoint::MAX_HEADERS_TOTAL;
        let index_name = "model.safetensors.index.json";
        let Some(ix) = self.small(repo, index_name, checkpoint::MAX_INDEX)? else {
            // Unsharded, or no safetensors at all (then the config alone).
            return self.header(repo, "model.safetensors", &mut budget);
        };
        let index_url = self.url(repo, index_name);
        let ix = checkpoint::parse_index(&ix).with_context(|| index_url.clone())?;
        let mut total = Checkpoint::default();
        for shard in &ix.shards {
            if !valid_file(shard) {
                bail!("{index_url}: shard name {shard:?} is not a plain file name");
            }
            let url = self.url(repo, shard);
            let c = self
                .header(repo, shard, &mut budget)?
                .with_context(|| format!("{url}: HTTP 404: a shard the index names is missing"))?;
            total.merge(c).with_context(|| url.clone())?;
        }
        Ok(Some(total))
    }
}

/// A Hub repo id: `name` or `org/name` of letters, digits, `-`, `_`, `.`
/// (huggingface_hub `validate_repo_id`); anything else never reaches a URL.
fn valid_repo(id: &str) -> anyhow::Result<&str> {
    let id = id.trim();
    let ok = !id.is_empty()
        && id.len() <= 96
        && id.split('/').count() <= 2
        && id.split('/').all(|p| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && !p.starts_with('-')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        });
    if !ok {
        bail!("--hub: {id:?} is not a Hugging Face repo id (org/name)");
    }
    Ok(id)
}

/// A shard file name from an index: a plain name, no folders, no URL syntax.
fn valid_file(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        move |k| owned.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn offline_mode_is_honoured_as_huggingface_hub_reads_it() {
        for v in ["1", "ON", "yes", "True"] {
            let e = Hub::from_vars(vars(&[("HF_HUB_OFFLINE", v)]))
                .err()
                .map(|e| e.to_string());
            assert!(e.is_some_and(|e| e.contains("HF_HUB_OFFLINE")), "{v}");
        }
        assert!(Hub::from_vars(vars(&[("TRANSFORMERS_OFFLINE", "1")])).is_err());
        assert!(Hub::from_vars(vars(&[("HF_HUB_OFFLINE", "0")])).is_ok());
    }

    #[test]
    fn endpoint_and_token_come_from_the_environment() {
        let h = Hub::from_vars(vars(&[
            ("HF_ENDPOINT", "https://hf-mirror.com/"),
            ("HF_TOKEN", " hf_abc \n"),
        ]))
        .ok();
        assert_eq!(
            h.as_ref().map(|h| h.url("org/m", "config.json")),
            Some("https://hf-mirror.com/org/m/resolve/main/config.json".to_string())
        );
        assert_eq!(h.and_then(|h| h.token), Some("hf_abc".to_string()));
        assert!(Hub::from_vars(vars(&[("HF_ENDPOINT", "file:///etc")])).is_err());
    }

    #[test]
    fn the_token_file_is_read_when_hf_token_is_unset() {
        let dir = tempfile::tempdir().map_err(|e| e.to_string());
        let Ok(dir) = dir else { return };
        let path = dir.path().join("token");
        assert!(std::fs::write(&path, "hf_fromfile\n").is_ok());
        let home = dir.path().to_string_lossy().to_string();
        let h = Hub::from_vars(vars(&[("HF_HOME", &home)]));
        assert_eq!(
            h.ok().and_then(|h| h.token),
            Some("hf_fromfile".to_string())
        );
    }

    #[test]
    fn hostile_ids_and_shard_names_never_reach_a_url() {
        for bad in [
            "../etc",
            "a/b/c",
            "",
            "org/..",
            "org/na me",
            "org/x?y",
            "-rf/x",
        ] {
            assert!(valid_repo(bad).is_err(), "{bad}");
        }
        assert!(valid_repo("meta-llama/Llama-3.1-8B").is_ok());
        assert!(valid_repo("gpt2").is_ok());
        for bad in ["../model.safetensors", "a/b.safetensors", "x?y", "..", ""] {
            assert!(!valid_file(bad), "{bad}");
        }
        assert!(valid_file("model-00001-of-00004.safetensors"));
    }
}
