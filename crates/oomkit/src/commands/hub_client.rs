//! The HTTP client behind `estimate --hub`: `oomkit_estimate::resolve::hub`
//! decides what to fetch and reads the answers; this is the only place that
//! knows `ureq` (so the library needs no network stack).

use std::io::Read;
use std::time::Duration;

use oomkit_estimate::resolve::hub::{Fetch, FetchError, Response};

/// `ureq` with the timeouts the Hub calls need; status codes are answers.
pub struct Ureq(ureq::Agent);

impl Ureq {
    /// An agent with a 60 s overall and 15 s connect timeout.
    pub fn new() -> Ureq {
        Ureq(
            ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(60)))
                .timeout_connect(Some(Duration::from_secs(15)))
                // Status codes are answers here (404: no such file), not errors.
                .http_status_as_error(false)
                .user_agent(concat!("oomkit/", env!("CARGO_PKG_VERSION")))
                .build()
                .new_agent(),
        )
    }
}

impl Fetch for Ureq {
    fn get(
        &self,
        url: &str,
        headers: &[(&str, String)],
        limit: u64,
    ) -> Result<Response, FetchError> {
        let mut req = self.0.get(url);
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let mut resp = req.call().map_err(|e| FetchError::Connect(Box::new(e)))?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        if matches!(status, 200 | 206) {
            resp.body_mut()
                .as_reader()
                .take(limit.saturating_add(1))
                .read_to_end(&mut body)
                .map_err(|e| FetchError::Read(Box::new(e)))?;
        }
        Ok(Response { status, body })
    }
}
