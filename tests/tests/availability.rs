//! Bundle availability on a live dev chain: Alice's offchain worker fetches the manifest and random
//! chunks of a committed bundle from its HTTP URI (range requests), checks them against the root and
//! attests; a bundle nobody serves is attested unavailable, and with Alice the only attester that is a
//! two-thirds quorum: the job fails and the trainer is slashed.

use std::time::Duration;

use ergon_bundle::MANIFEST_FILE;
use ergon_client::runtime;
use ergon_integration_tests::{
    bundle_server::serve_synthetic_bundle, chain::calls, dev_pair, free_port, wait_for, Node, Ports,
};
use serde_json::json;

use ergon_protocol::units::ERG;

/// `JobMarket::Attestations(job)` at the best block: (attester key, available) pairs.
fn attestations(node: &Node, job: u64) -> Vec<([u8; 32], bool)> {
    node.client().block_on(async {
        let at = node.at_best().await;
        let entry = runtime::storage().job_market().attestations();
        let value = at.storage().try_fetch(entry, (job,)).await.expect("Attestations reads");
        let pairs = value.map(|v| v.decode().expect("Attestations decodes").0).unwrap_or_default();
        pairs.into_iter().map(|(key, available)| (key.0, available)).collect()
    })
}

/// Alice posts a job, Bob bids and is accepted, Bob commits `root` at `uri`; returns the job id.
fn committed_job(node: &Node, spec: &ergon_job_spec::JobSpec, root: [u8; 32], uri: &str) -> u64 {
    let (alice, bob) = (dev_pair("//Alice"), dev_pair("//Bob"));
    let timeout = Duration::from_secs(120);
    // Alice posts every job of this test: the next id is the number she has.
    let known = node
        .call("ergon_jobsOf", json!([alice.public_key().to_account_id().to_string()]))
        .expect("jobsOf");
    let id = known.as_array().map_or(0, |a| a.len() as u64);
    let best = node.block_number(None).expect("best block");
    // 20 ERG leave room for a 5 ERG price besides every possible verifier's fee.
    node.send(calls::post_job(spec, 20 * ERG, 10, best + 500), &alice, timeout);
    node.send(calls::bid(id, 5 * ERG, ergon_protocol::DeviceClass::Cpu), &bob, timeout);
    node.send(calls::accept_bid(id, &bob.public_key().0), &alice, timeout);
    node.send(
        calls::submit_bundle(
            id,
            root,
            uri,
            [6; 32],
            calls::NO_CLAIMS,
            ergon_protocol::DeviceClass::Cpu,
        ),
        &bob,
        timeout,
    );
    // The commitment took: the job left `assigned` (a bundle nobody serves may already have been
    // attested unavailable and failed, on the fast chain within a block or two).
    let job = node.call("ergon_job", json!([id])).expect("ergon_job");
    assert!(
        ["verifying", "failed"].contains(&job["state"]["status"].as_str().unwrap_or_default()),
        "job {id}: {job}"
    );
    id
}

#[test]
fn offchain_workers_attest_served_bundles_and_fail_unserved_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));

    let spec: ergon_job_spec::JobSpec =
        serde_json::from_str(include_str!("../../worker/examples/fashion-mnist-mlp.json"))
            .expect("example spec parses");
    let checkpoints = spec.validate().expect("example spec is valid").checkpoints;
    let (server, uri, root) = serve_synthetic_bundle(checkpoints);
    let bob = dev_pair("//Bob");
    node.send(calls::bond(2_000 * ERG), &bob, Duration::from_secs(120));

    // A served bundle: the manifest, then two sampled chunks by range, and an "available" attestation.
    let served = committed_job(&node, &spec, root, &uri);
    let attested = wait_for("Alice's attestation", Duration::from_secs(120), || {
        Some(attestations(&node, served)).filter(|a| !a.is_empty())
    });
    assert_eq!(attested, vec![(dev_pair("//Alice").public_key().0, true)]);
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests[0], (format!("/job/{MANIFEST_FILE}"), None));
    let ranges: Vec<_> = requests[1..].iter().filter_map(|(_, r)| r.clone()).collect();
    assert_eq!(ranges.len(), 2, "two chunks sampled: {requests:?}");
    for r in &ranges {
        assert!(
            ["bytes=0-1048575", "bytes=1048576-2097151", "bytes=2097152-2621439"]
                .contains(&r.as_str()),
            "a whole chunk: {r}"
        );
    }
    let job = node.call("ergon_job", json!([served])).expect("ergon_job");
    assert_eq!(job["state"]["status"], "verifying", "an available bundle goes on to verification");

    // A bundle nobody serves: Alice attests it unavailable, which is the quorum of one attester.
    let ledger = |n: &Node| n.bond(&bob.public_key().0);
    let bond_before = ledger(&node).expect("Bob is bonded").active;
    let dead = format!("http://127.0.0.1:{}/gone", free_port());
    let unserved = committed_job(&node, &spec, root, &dead);
    let failed = wait_for("the unserved job to fail", Duration::from_secs(120), || {
        let job = node.call("ergon_job", json!([unserved])).ok()?;
        (job["state"]["status"] == "failed").then_some(job)
    });
    assert_eq!(failed["state"]["reason"], "Unavailable", "{failed}");
    let bond_after = ledger(&node).expect("Bob is still bonded").active;
    // All of its collateral, the 5 ERG price it bid, is slashed.
    assert_eq!(bond_after, bond_before - 5 * ERG, "the trainer loses its collateral");
}
