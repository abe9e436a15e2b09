//! safetensors header bytes (length prefix, then JSON) and index files:
//! no panic, sizes never wrap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oomkit_estimate::checkpoint::{self, Checkpoint};

fuzz_target!(|data: &[u8]| {
    if let Some((prefix, rest)) = data.split_first_chunk::<8>() {
        if let Ok(n) = checkpoint::header_len(*prefix) {
            let take = usize::try_from(n).map_or(rest.len(), |n| n.min(rest.len()));
            if let Some(json) = rest.get(..take) {
                let _ = checkpoint::parse_header(json);
            }
        }
    }
    let _ = checkpoint::parse_header(data);
    if let Ok(ix) = checkpoint::parse_index(data) {
        let _ = Checkpoint::from_index(&ix, Some("bfloat16"), false);
    }
});
