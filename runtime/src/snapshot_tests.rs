//! Every pallet's `try_state` against the state of a live chain: its invariants (held balances equal
//! bonds, escrows and obligations; every job's escrow on hold; drilling's tasks and collateral; the
//! system's and balances' own checks) must hold on what a real network made of real traffic, not
//! only on the states the mock tests reach.
//!
//! The state comes from a snapshot that a client read over RPC (`state_getKeysPaged` and
//! `state_queryStorageAt` at a finalized block): `tests/tests/faults.rs` writes one at the end of its
//! faults and load on the 4-validator network when `ERGON_SNAPSHOT_OUT` is set, and
//! `scripts/test.sh` runs this check on it right after:
//!
//! ```sh
//! ERGON_SNAPSHOT=path SKIP_WASM_BUILD=1 cargo test --release -p ergon-runtime \
//!     --features try-runtime snapshot -- --ignored
//! ```
//!
//! This is what `try-runtime … --checks try-state` runs, natively: the state is loaded into test
//! externalities as it is and every pallet's hook runs over it.

use frame_support::traits::{TryState, TryStateSelect};

use crate::{AllPalletsWithSystem, BlockNumber, System};

/// Bytes from `0x…` hex.
fn unhex(text: &str) -> Vec<u8> {
    let digits = text.trim_start_matches("0x").as_bytes();
    assert!(digits.len().is_multiple_of(2), "hex of odd length: {text}");
    digits
        .chunks(2)
        .map(|pair| {
            let pair = core::str::from_utf8(pair).expect("ascii");
            u8::from_str_radix(pair, 16).unwrap_or_else(|_| panic!("not hex: {text}"))
        })
        .collect()
}

#[test]
#[ignore = "needs ERGON_SNAPSHOT: a live chain's state (scripts/test.sh passes the load test's)"]
fn every_pallet_try_state_holds_on_a_live_snapshot() {
    let path = std::env::var("ERGON_SNAPSHOT").expect("ERGON_SNAPSHOT names a snapshot file");
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("reading the snapshot {path}: {e}"));
    let snapshot: serde_json::Value = serde_json::from_slice(&raw).expect("the snapshot is JSON");
    let block = snapshot["block"].as_u64().expect("the snapshot's block") as BlockNumber;
    let pairs = snapshot["pairs"].as_array().expect("the snapshot's pairs");
    assert!(pairs.len() > 100, "a live chain has more than {} keys", pairs.len());
    let mut ext = sp_io::TestExternalities::new_empty();
    for pair in pairs {
        let (key, value) = (pair[0].as_str().expect("a key"), pair[1].as_str().expect("a value"));
        ext.insert(unhex(key), unhex(value));
    }
    ext.execute_with(|| {
        assert_eq!(System::block_number(), block, "the snapshot is of block #{block}");
        AllPalletsWithSystem::try_state(block, TryStateSelect::All)
            .unwrap_or_else(|e| panic!("try_state failed on block #{block}: {e:?}"));
    });
    println!("try_state of every pallet holds on block #{block} ({} keys)", pairs.len());
}
