//! What a load test reads off a live chain over RPC: block times (from each block's timestamp) and
//! extrinsics per block, and a snapshot of the whole state at one block, for the runtime's
//! `try_state` check (`runtime/src/snapshot_tests.rs` reads it).

use std::path::Path;

use ergon_client::runtime;
use serde_json::{json, Value};

use crate::Node;

/// Block time and extrinsics per block over a range of blocks.
#[derive(Clone, Copy, Debug)]
pub struct BlockStats {
    /// Blocks measured.
    pub blocks: u32,
    /// Mean time between consecutive blocks, in seconds.
    pub mean_block_time_s: f64,
    /// Mean extrinsics per block (inherents included).
    pub mean_extrinsics: f64,
    /// Most extrinsics in one block.
    pub max_extrinsics: usize,
}

impl std::fmt::Display for BlockStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} blocks, mean block time {:.2} s, extrinsics per block {:.1} (max {})",
            self.blocks, self.mean_block_time_s, self.mean_extrinsics, self.max_extrinsics
        )
    }
}

/// `Timestamp::Now` at block `number`, in milliseconds.
fn timestamp_ms(node: &Node, number: u32) -> Option<u64> {
    let client = node.client();
    client.block_on(async {
        let at = client.chain().api().at_block(number).await.ok()?;
        let entry = runtime::storage().timestamp().now();
        at.storage().try_fetch(entry, ()).await.ok()??.decode().ok()
    })
}

/// Block time and extrinsics per block of blocks `from..=to` of `node`'s best chain.
pub fn block_stats(node: &Node, from: u32, to: u32) -> BlockStats {
    assert!(to > from, "at least two blocks");
    let mut times = Vec::new();
    let mut extrinsics = Vec::new();
    for n in from..=to {
        let hash = node.block_hash(n).unwrap_or_else(|| panic!("block #{n} exists"));
        times.push(timestamp_ms(node, n).unwrap_or_else(|| panic!("block #{n} has a time")));
        let block = node.call("chain_getBlock", json!([hash])).expect("chain_getBlock");
        extrinsics.push(block["block"]["extrinsics"].as_array().map_or(0, Vec::len));
    }
    let span_s = (times[times.len() - 1] - times[0]) as f64 / 1e3;
    BlockStats {
        blocks: to - from + 1,
        mean_block_time_s: span_s / (to - from) as f64,
        mean_extrinsics: extrinsics.iter().sum::<usize>() as f64 / extrinsics.len() as f64,
        max_extrinsics: extrinsics.iter().copied().max().unwrap_or(0),
    }
}

/// Writes the whole state at `node`'s finalized head to `path` as JSON: `{"block": n, "hash":
/// "0x…", "pairs": [["0xkey", "0xvalue"], …]}`. Returns the number of pairs.
pub fn write_snapshot(node: &Node, path: &Path) -> usize {
    let (hash, number) = node.finalized().expect("a finalized block");
    let mut pairs: Vec<Value> = Vec::new();
    let mut start: Option<String> = None;
    loop {
        let keys = node
            .call("state_getKeysPaged", json!(["0x", 1000, start, hash]))
            .expect("state_getKeysPaged");
        let keys: Vec<String> = keys
            .as_array()
            .expect("a list of keys")
            .iter()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect();
        if keys.is_empty() {
            break;
        }
        let changes =
            node.call("state_queryStorageAt", json!([keys, hash])).expect("state_queryStorageAt");
        for change in changes[0]["changes"].as_array().expect("changes") {
            if let (Some(k), Some(v)) = (change[0].as_str(), change[1].as_str()) {
                pairs.push(json!([k, v]));
            }
        }
        start = keys.last().cloned();
    }
    let snapshot = json!({"block": number, "hash": hash, "pairs": pairs});
    std::fs::write(path, snapshot.to_string()).expect("the snapshot is written");
    pairs.len()
}
