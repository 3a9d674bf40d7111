//! `--chain local` with four validators on loopback: they agree on one finalized chain, three of them
//! keep finalizing without the fourth, and the fourth catches up after a restart.

use std::time::Duration;

use ergon_integration_tests::{
    network::{assert_same_finalized_chain, start_validators},
    wait_for, Node,
};

#[test]
fn four_validators_finalize_survive_one_down_and_resync() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = start_validators(dir.path());

    // All four import the same finalized chain.
    let all: Vec<&Node> = nodes.iter().collect();
    assert_same_finalized_chain(&all, 3);

    // Genesis seeds unequal computing power, 1 : 2 : 4 : 8 ut: Dave ranks first, Alice last.
    let top = nodes[0].call("ergon_topTrainers", serde_json::json!([])).expect("ergon_topTrainers");
    let ecps: Vec<u128> = top
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["ecp"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ecps.len(), 4, "{top}");
    assert!(ecps.windows(2).all(|w| w[0] > w[1]), "{top}");
    let ratio = ecps[0] as f64 / ecps[3] as f64;
    assert!((ratio - 8.0).abs() < 1e-3, "Dave : Alice should be 8 : 1, got {ratio}: {top}");

    // Stop Dave: three of four GRANDPA voters are a supermajority, so finality goes on.
    nodes[3].stop();
    let (_, base) = nodes[0].finalized().expect("alice answers");
    let three: Vec<&Node> = nodes[..3].iter().collect();
    assert_same_finalized_chain(&three, base + 3);

    // Restart Dave on his old database: he catches up to the others' finalized head.
    nodes[3].restart();
    let (head_hash, head) = nodes[0].finalized().expect("alice answers");
    let dave = &nodes[3];
    dave.wait_finalized(head, Duration::from_secs(240));
    let dave_hash = wait_for("Dave to serve the finalized block", Duration::from_secs(30), || {
        dave.block_hash(head)
    });
    assert_eq!(dave_hash, head_hash, "Dave re-synced onto the same finalized chain");
}
