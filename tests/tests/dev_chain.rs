//! `ergon-node --dev`: blocks are produced and finalized, the metadata a client needs is served, and a
//! transfer signed by //Alice moves exactly the amount sent to Bob.

use std::time::Duration;

use codec::{Decode, Encode};
use ergon_integration_tests::{
    chain::{calls, Bond},
    dev_pair, wait_for, Node, Ports,
};
use frame_metadata::{RuntimeMetadata, RuntimeMetadataPrefixed};
use serde_json::json;

/// Pallet names and indices of a decoded metadata.
fn pallets(metadata: &RuntimeMetadata) -> Vec<(String, u8)> {
    match metadata {
        RuntimeMetadata::V14(m) => m.pallets.iter().map(|p| (p.name.clone(), p.index)).collect(),
        RuntimeMetadata::V15(m) => m.pallets.iter().map(|p| (p.name.clone(), p.index)).collect(),
        RuntimeMetadata::V16(m) => m.pallets.iter().map(|p| (p.name.clone(), p.index)).collect(),
        other => panic!("unexpected metadata version {}", other.version()),
    }
}

#[test]
fn dev_chain_finalizes_serves_metadata_and_transfers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());

    // Blocks are authored by BABE and finalized by GRANDPA.
    node.wait_finalized(3, Duration::from_secs(180));

    // The default metadata decodes and lists the consensus, session and balance pallets.
    let raw = node.call("state_getMetadata", json!([])).expect("state_getMetadata");
    let raw = ergon_integration_tests::rpc::bytes(&raw).expect("hex metadata");
    let metadata = RuntimeMetadataPrefixed::decode(&mut &raw[..]).expect("metadata decodes");
    let pallets = pallets(&metadata.1);
    for name in [
        "System",
        "Babe",
        "Grandpa",
        "Balances",
        "Session",
        "TransactionPayment",
        "Sudo",
        "ComputePower",
        "TrainerStaking",
        "Offences",
        "Historical",
        "JobMarket",
        "Drilling",
    ] {
        assert!(
            pallets.iter().any(|(n, _)| n == name),
            "{name} missing from metadata: {pallets:?}"
        );
    }

    // Metadata V15, what polkadot.js asks for, is served through the Metadata runtime API.
    let versions = node.runtime_call("Metadata_metadata_versions", &[]).expect("metadata versions");
    let versions = Vec::<u32>::decode(&mut &versions[..]).expect("versions decode");
    assert!(versions.contains(&15), "metadata V15 not offered: {versions:?}");
    let v15 = node
        .runtime_call("Metadata_metadata_at_version", &15u32.encode())
        .expect("metadata at version 15");
    let v15 =
        Option::<Vec<u8>>::decode(&mut &v15[..]).expect("Option<OpaqueMetadata>").expect("V15");
    let v15 = RuntimeMetadataPrefixed::decode(&mut &v15[..]).expect("V15 decodes");
    assert!(
        matches!(v15.1, RuntimeMetadata::V15(_)),
        "version 15 requested, got {}",
        v15.1.version()
    );

    // Chain-spec properties, so polkadot.js shows ERG with 12 decimals and generic addresses.
    let props = node.call("system_properties", json!([])).expect("system_properties");
    assert_eq!(props["tokenSymbol"], "ERG");
    assert_eq!(props["tokenDecimals"], 12);
    assert_eq!(props["ss58Format"], 42);

    // Alice's computing power, seeded at genesis (1 ut = 10^6 micro-ut), barely decayed (half-life a week).
    let alice_ss58 = dev_pair("//Alice").public_key().to_account_id().to_string();
    let power = node.call("ergon_ecp", json!([alice_ss58])).expect("ergon_ecp");
    let ecp: u128 = power["ecp"].as_str().expect("decimal string").parse().unwrap();
    assert!((990_000..=1_000_000).contains(&ecp), "ECP of Alice: {power}");
    let top = node.call("ergon_topTrainers", json!([10])).expect("ergon_topTrainers");
    assert_eq!(top[0]["account"], alice_ss58);
    assert!(node.call("ergon_topTrainers", json!([1_000_000])).is_err(), "limit is bounded");

    // A transfer signed by //Alice changes Bob's free balance by exactly the amount.
    let alice = dev_pair("//Alice");
    let bob = dev_pair("//Bob");
    let bob_id = bob.public_key().0;
    let before = node.account(&bob_id);
    let sender = node.account(&alice.public_key().0);
    let timeout = Duration::from_secs(120);
    let amount: u128 = 1_234_567_890_123;
    node.send(calls::transfer_keep_alive(&bob_id, amount), &alice, timeout);
    let after = wait_for("Bob's balance to change", timeout, || {
        let now = node.account(&bob_id);
        (now.free != before.free).then_some(now)
    });
    assert_eq!(after.free - before.free, amount, "Bob received exactly the amount sent");

    // Bob bonds 2 000 ERG: the ledger shows it and the amount is held (reserved) on his account.
    use ergon_protocol::units::ERG;
    let bond = 2_000 * ERG;
    node.send(calls::bond(bond), &bob, timeout);
    let ledger = wait_for("Bob's bond to appear", timeout, || node.bond(&bob_id));
    assert_eq!(ledger, Bond { active: bond, unlocking: 0, obligated: 0, obligations: 0 });
    let bonded = node.account(&bob_id);
    assert_eq!(bonded.reserved, after.reserved + bond, "the bond is held on Bob's balance");

    // Alice, the only author, is minted 1 ERG per block (and collects the fees): her balance grows
    // although she paid for the transfer.
    let alice_now = node.account(&alice.public_key().0);
    assert!(
        alice_now.free > sender.free - amount + ERG,
        "Alice's balance did not grow with block rewards: {} -> {}",
        sender.free,
        alice_now.free
    );

    // A user posts a training job (the worker's Fashion-MNIST MLP example) with a signed
    // extrinsic; the node's RPC shows it open, with the training work the runtime computed.
    let spec: ergon_job_spec::JobSpec =
        serde_json::from_str(include_str!("../../worker/examples/fashion-mnist-mlp.json"))
            .expect("example spec parses");
    let work = spec.validate().expect("example spec is valid").training_micro_ut();
    let best = node.block_number(None).expect("best block");
    let budget = 100 * ERG;
    node.send(calls::post_job(&spec, budget, 10, best + 500), &alice, timeout);
    let job = wait_for("job 0 to appear", timeout, || {
        node.call("ergon_job", json!([0])).ok().filter(|j| !j.is_null())
    });
    assert_eq!(job["owner"], alice_ss58);
    assert_eq!(job["state"]["status"], "open");
    assert_eq!(job["budget"], budget.to_string());
    assert_eq!(job["workMicroUt"], work.to_string(), "work computed on chain from the spec");
    assert_eq!(job["spec"]["epochs"], 1);
    let open = node.call("ergon_openJobs", json!([])).expect("ergon_openJobs");
    assert_eq!(open[0]["id"], 0);
    let mine = node.call("ergon_jobsOf", json!([alice_ss58])).expect("ergon_jobsOf");
    assert_eq!(mine, json!([0]));
    let alice_after = node.account(&alice.public_key().0);
    assert_eq!(alice_after.reserved, alice_now.reserved + budget, "the budget is held in escrow");
}
