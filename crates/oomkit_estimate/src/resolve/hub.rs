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
//!
//! The HTTP client is not here: the caller passes a [`Fetch`] (the binary's
//! wraps `ureq`), so this crate needs no network stack and its tests answer
//! from memory.

use crate::checkpoint::{self, Checkpoint, HeaderError, IndexError};
use crate::model::{ConfigError, ModelConfig};

/// The Hub's address when `HF_ENDPOINT` is unset.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// The most of a `config.json` read (real ones: KiB).
const CONFIG_LIMIT: u64 = super::CONFIG_LIMIT;

/// One HTTP answer: the status and at most `limit` + 1 bytes of the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The body, cut after `limit` + 1 bytes.
    pub body: Vec<u8>,
}

/// An error from the HTTP client, kept as its cause.
pub type ClientError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request got no answer.
#[derive(Debug)]
pub enum FetchError {
    /// No response (DNS, connection, TLS, timeout).
    Connect(ClientError),
    /// The body could not be read to the end.
    Read(ClientError),
}

/// An HTTP GET: the one thing the Hub code needs from a client. Status codes
/// are answers, never errors.
pub trait Fetch {
    /// GETs `url` with these extra headers, reading at most `limit` + 1
    /// bytes of the body.
    fn get(
        &self,
        url: &str,
        headers: &[(&str, String)],
        limit: u64,
    ) -> Result<Response, FetchError>;
}

/// Why the Hub gave no model.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// Offline mode is on.
    #[error("{var} is set, so the Hugging Face Hub is not contacted")]
    Offline {
        /// `HF_HUB_OFFLINE` or `TRANSFORMERS_OFFLINE`.
        var: &'static str,
    },
    /// `HF_ENDPOINT` is not an http(s) URL.
    #[error("HF_ENDPOINT {endpoint:?} is not an http(s) URL")]
    BadEndpoint {
        /// Its value.
        endpoint: String,
    },
    /// Not a repo id (never sent).
    #[error("{id:?} is not a Hugging Face repo id (org/name)")]
    InvalidRepo {
        /// What was given.
        id: String,
    },
    /// No response.
    #[error("cannot reach {url}")]
    Unreachable {
        /// The URL.
        url: String,
        /// The client's error.
        #[source]
        source: ClientError,
    },
    /// The body broke off.
    #[error("cannot read {url}")]
    Unreadable {
        /// The URL.
        url: String,
        /// The client's error.
        #[source]
        source: ClientError,
    },
    /// 401/403.
    #[error(
        "{url}: HTTP {status}: the repository is gated or private, or the id is wrong (accept its licence on the Hub and set HF_TOKEN)"
    )]
    Denied {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// Any other status but 200/206/404.
    #[error("{url}: HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// A config or index longer than its limit.
    #[error("{url}: larger than {} (not a config or index file?)", oomkit_core::Bytes(*limit))]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit.
        limit: u64,
    },
    /// No `config.json`.
    #[error("{url}: HTTP 404: no config.json (not a transformers model, or the id is wrong)")]
    NoConfig {
        /// The URL.
        url: String,
    },
    /// `config.json` is not UTF-8.
    #[error("{url}: not a text config.json")]
    NotText {
        /// The URL.
        url: String,
        /// The decoding error.
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// `config.json` is refused by the parser.
    #[error("{url}: not a usable Hugging Face config.json")]
    Config {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: ConfigError,
    },
    /// Fewer than 8 bytes where the header length should be.
    #[error("{url}: malformed safetensors header")]
    NoPrefix {
        /// The URL.
        url: String,
    },
    /// The header ends early.
    #[error("{url}: malformed safetensors header: truncated")]
    Truncated {
        /// The URL.
        url: String,
    },
    /// A header that cannot be used.
    #[error("{url}")]
    Header {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: HeaderError,
    },
    /// An index that cannot be used.
    #[error("{url}")]
    Index {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: IndexError,
    },
    /// The headers add up to more than [`checkpoint::MAX_HEADERS_TOTAL`].
    #[error(
        "the safetensors headers of this repository add up to more than {}",
        oomkit_core::Bytes(checkpoint::MAX_HEADERS_TOTAL)
    )]
    HeadersTooLarge,
    /// A shard name with folders or URL syntax.
    #[error("{url}: shard name {shard:?} is not a plain file name")]
    BadShard {
        /// The index's URL.
        url: String,
        /// The name.
        shard: String,
    },
    /// A shard the index names is not there.
    #[error("{url}: HTTP 404: a shard the index names is missing")]
    MissingShard {
        /// The shard's URL.
        url: String,
    },
}

/// Where and how to reach the Hub, from the environment.
pub struct Hub {
    endpoint: String,
    token: Option<String>,
    client: Box<dyn Fetch>,
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
    /// offline mode. `client` makes the requests.
    pub fn from_env(client: Box<dyn Fetch>) -> Result<Hub, HubError> {
        Hub::from_vars(
            |k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()),
            client,
        )
    }

    /// [`Hub::from_env`] over any variable lookup.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        client: Box<dyn Fetch>,
    ) -> Result<Hub, HubError> {
        for k in ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"] {
            if var(k).is_some_and(|v| is_true(&v)) {
                return Err(HubError::Offline { var: k });
            }
        }
        let endpoint = var("HF_ENDPOINT")
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
            .trim()
            .trim_end_matches('/')
            .to_string();
        if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
            return Err(HubError::BadEndpoint { endpoint });
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
        Ok(Hub {
            endpoint,
            token: token.map(|t| t.trim().to_string()),
            client,
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
    ) -> Result<Option<(u16, Vec<u8>)>, HubError> {
        let url = self.url(repo, file);
        let mut headers = Vec::new();
        if let Some(t) = &self.token {
            headers.push(("Authorization", format!("Bearer {t}")));
        }
        if let Some((from, to)) = range {
            headers.push(("Range", format!("bytes={from}-{to}")));
        }
        let resp = match self.client.get(&url, &headers, limit) {
            Ok(r) => r,
            Err(FetchError::Connect(source)) => return Err(HubError::Unreachable { url, source }),
            Err(FetchError::Read(source)) => return Err(HubError::Unreadable { url, source }),
        };
        match resp.status {
            200 | 206 => {}
            404 => return Ok(None),
            status @ (401 | 403) => return Err(HubError::Denied { url, status }),
            status => return Err(HubError::Status { url, status }),
        }
        Ok(Some((resp.status, resp.body)))
    }

    /// A whole small file (config, index); `Ok(None)` when there is none.
    fn small(&self, repo: &str, file: &str, limit: u64) -> Result<Option<Vec<u8>>, HubError> {
        let Some((_, body)) = self.get(repo, file, None, limit)? else {
            return Ok(None);
        };
        if body.len() as u64 > limit {
            return Err(HubError::TooLarge {
                url: self.url(repo, file),
                limit,
            });
        }
        Ok(Some(body))
    }

    /// Bytes `from..=to` of a file, when the server honours the range (206)
    /// or sends the whole file (200: the prefix is kept). `None`: no such
    /// file, or too short.
    fn range(
        &self,
        repo: &str,
        file: &str,
        from: u64,
        to: u64,
    ) -> Result<Option<Vec<u8>>, HubError> {
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
    ) -> Result<Option<Checkpoint>, HubError> {
        let url = self.url(repo, file);
        let Some(prefix) = self.range(repo, file, 0, 7)? else {
            return Ok(None);
        };
        let Ok(prefix) = <[u8; 8]>::try_from(prefix) else {
            return Err(HubError::NoPrefix { url });
        };
        let n = checkpoint::header_len(prefix).map_err(|source| HubError::Header {
            url: url.clone(),
            source,
        })?;
        *budget = budget.checked_sub(n).ok_or(HubError::HeadersTooLarge)?;
        let Some(json) = self.range(repo, file, 8, n.saturating_add(7))? else {
            return Err(HubError::Truncated { url });
        };
        checkpoint::parse_header(&json)
            .map(Some)
            .map_err(|source| HubError::Header { url, source })
    }

    /// The model `repo` on the Hub: its `config.json`, and its weights from
    /// the safetensors headers (or the index's total).
    pub fn model(&self, repo: &str) -> Result<ModelConfig, HubError> {
        let repo = valid_repo(repo)?;
        let url = self.url(repo, "config.json");
        let Some(bytes) = self.small(repo, "config.json", CONFIG_LIMIT)? else {
            return Err(HubError::NoConfig { url });
        };
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(source) => return Err(HubError::NotText { url, source }),
        };
        let mut cfg = match ModelConfig::from_hf_json(repo, &text) {
            Ok(c) => c,
            Err(source) => return Err(HubError::Config { url, source }),
        };
        cfg.config_file = Some(url);
        cfg.checkpoint = self.weights(repo)?;
        Ok(cfg)
    }

    fn weights(&self, repo: &str) -> Result<Option<Checkpoint>, HubError> {
        let mut budget = checkpoint::MAX_HEADERS_TOTAL;
        let index_name = super::files::INDEX_NAME;
        let Some(ix) = self.small(repo, index_name, checkpoint::MAX_INDEX)? else {
            // Unsharded, or no safetensors at all (then the config alone).
            return self.header(repo, "model.safetensors", &mut budget);
        };
        let index_url = self.url(repo, index_name);
        let ix = checkpoint::parse_index(&ix).map_err(|source| HubError::Index {
            url: index_url.clone(),
            source,
        })?;
        let mut total = Checkpoint::default();
        for shard in &ix.shards {
            if !valid_file(shard) {
                return Err(HubError::BadShard {
                    url: index_url,
                    shard: shard.clone(),
                });
            }
            let url = self.url(repo, shard);
            let Some(c) = self.header(repo, shard, &mut budget)? else {
                return Err(HubError::MissingShard { url });
            };
            total
                .merge(c)
                .map_err(|source| HubError::Header { url, source })?;
        }
        Ok(Some(total))
    }
}

/// A Hub repo id: `name` or `org/name` of letters, digits, `-`, `_`, `.`
/// (huggingface_hub `validate_repo_id`); anything else never reaches a URL.
fn valid_repo(id: &str) -> Result<&str, HubError> {
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
        return Err(HubError::InvalidRepo { id: id.to_string() });
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

    struct NoNetwork;
    impl Fetch for NoNetwork {
        fn get(&self, _: &str, _: &[(&str, String)], _: u64) -> Result<Response, FetchError> {
            Err(FetchError::Connect("no network in tests".into()))
        }
    }

    fn hub(pairs: &[(&str, &str)]) -> Result<Hub, HubError> {
        Hub::from_vars(vars(pairs), Box::new(NoNetwork))
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        move |k| owned.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    /// A Hub in memory: `files` by name, ranges honoured (206).
    struct Memory(Vec<(&'static str, Vec<u8>)>);
    impl Fetch for Memory {
        fn get(
            &self,
            url: &str,
            headers: &[(&str, String)],
            _: u64,
        ) -> Result<Response, FetchError> {
            let Some((_, body)) = self.0.iter().find(|(n, _)| url.ends_with(&format!("/{n}")))
            else {
                return Ok(Response {
                    status: 404,
                    body: Vec::new(),
                });
            };
            let range = headers
                .iter()
                .find(|(k, _)| *k == "Range")
                .and_then(|(_, v)| {
                    let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
                    Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?))
                });
            Ok(match range {
                Some((a, b)) => Response {
                    status: 206,
                    body: body.iter().skip(a).take(b + 1 - a).copied().collect(),
                },
                None => Response {
                    status: 200,
                    body: body.clone(),
                },
            })
        }
    }

    #[test]
    fn config_and_header_come_from_the_client_without_the_weights() {
        let header = br#"{"w":{"dtype":"BF16","shape":[1000,1000],"data_offsets":[0,2000000]}}"#;
        let mut st = (header.len() as u64).to_le_bytes().to_vec();
        st.extend_from_slice(header);
        let config = br#"{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":128,"vocab_size":100}"#;
        let files = Memory(vec![
            ("config.json", config.to_vec()),
            ("model.safetensors", st),
        ]);
        let hub = Hub::from_vars(vars(&[]), Box::new(files)).map_err(|e| e.to_string());
        let cfg = hub.and_then(|h| h.model("org/m").map_err(|e| e.to_string()));
        assert_eq!(
            cfg.as_ref()
                .ok()
                .and_then(|c| c.checkpoint.as_ref())
                .map(|c| c.elements),
            Some(1_000_000),
            "{cfg:?}"
        );
        let missing = Hub::from_vars(vars(&[]), Box::new(Memory(Vec::new())))
            .map_err(|e| e.to_string())
            .and_then(|h| h.model("org/none").map_err(|e| e.to_string()));
        assert!(missing.is_err_and(|e| e.contains("HTTP 404: no config.json")));
    }

    #[test]
    fn offline_mode_is_honoured_as_huggingface_hub_reads_it() {
        for v in ["1", "ON", "yes", "True"] {
            let e = hub(&[("HF_HUB_OFFLINE", v)]).err().map(|e| e.to_string());
            assert!(e.is_some_and(|e| e.contains("HF_HUB_OFFLINE")), "{v}");
        }
        assert!(hub(&[("TRANSFORMERS_OFFLINE", "1")]).is_err());
        assert!(hub(&[("HF_HUB_OFFLINE", "0")]).is_ok());
    }

    #[test]
    fn endpoint_and_token_come_from_the_environment() {
        let h = hub(&[
            ("HF_ENDPOINT", "https://hf-mirror.com/"),
            ("HF_TOKEN", " hf_abc \n"),
        ])
        .ok();
        assert_eq!(
            h.as_ref().map(|h| h.url("org/m", "config.json")),
            Some("https://hf-mirror.com/org/m/resolve/main/config.json".to_string())
        );
        assert_eq!(h.and_then(|h| h.token), Some("hf_abc".to_string()));
        assert!(hub(&[("HF_ENDPOINT", "file:///etc")]).is_err());
    }

    #[test]
    fn the_token_file_is_read_when_hf_token_is_unset() {
        let dir = tempfile::tempdir().map_err(|e| e.to_string());
        let Ok(dir) = dir else { return };
        let path = dir.path().join("token");
        assert!(std::fs::write(&path, "hf_fromfile\n").is_ok());
        let home = dir.path().to_string_lossy().to_string();
        let h = hub(&[("HF_HOME", &home)]);
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
