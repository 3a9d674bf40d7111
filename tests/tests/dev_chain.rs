//! `ergon-node --dev`: blocks are produced and finalized, the metadata a client needs is served, and a
//! transfer signed by //Alice moves exactly the amount sent to Bob.

use std::time::Duration;

use codec::{Decode, Encode};
use ergon_integration_tests::{
    dev_pair,
    extrinsic::{
        bond_call, post_job_call, signed_extrinsic, staking_ledger_key, system_account_key,
        transfer_keep_alive_call, AccountInfo, StakingLedger,
    },
    wait_for, Node, Ports,
};
use frame_metadata::{RuntimeMetadata, RuntimeMetadataPrefixed};
use serde_json::json;
use sp_core::{crypto::Ss58Codec, Pair};

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
    // The pallet indices other integration tests encode calls with.
    for (name, index) in [("TrainerStaking", 7), ("Sudo", 12), ("JobMarket", 13), ("Drilling", 14)]
    {
        assert!(
            pallets.iter().any(|(n, i)| n == name && *i == index),
            "{name} is not pallet {index}: {pallets:?}"
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
    let alice_ss58 = dev_pair("//Alice").public().to_ss58check();
    let power = node.call("ergon_ecp", json!([alice_ss58])).expect("ergon_ecp");
    let ecp: u128 = power["ecp"].as_str().expect("decimal string").parse().unwrap();
    assert!((990_000..=1_000_000).contains(&ecp), "ECP of Alice: {power}");
    let top = node.call("ergon_topTrainers", json!([10])).expect("ergon_topTrainers");
    assert_eq!(top[0]["account"], alice_ss58);
    assert!(node.call("ergon_topTrainers", json!([1_000_000])).is_err(), "limit is bounded");

    // A transfer signed by //Alice changes Bob's free balance by exactly the amount.
    let alice = dev_pair("//Alice");
    let bob = dev_pair("//Bob").public().0;
    let bob_key = system_account_key(&bob);
    let before: AccountInfo = node.storage_decoded(&bob_key).expect("Bob is endowed");
    let sender: AccountInfo =
        node.storage_decoded(&system_account_key(&alice.public().0)).expect("Alice is endowed");
    let ctx = node.chain_context();
    let balances_index = pallets.iter().find(|(n, _)| n == "Balances").map(|(_, i)| *i).unwrap();
    let amount: u128 = 1_234_567_890_123;
    let call = transfer_keep_alive_call(balances_index, &bob, amount);
    let xt = signed_extrinsic(&call, &alice, sender.nonce, ctx);
    node.submit(&xt).expect("the pool accepts the transfer");

    let after = wait_for("Bob's balance to change", Duration::from_secs(120), || {
        let now: AccountInfo = node.storage_decoded(&bob_key)?;
        (now.free != before.free).then_some(now)
    });
    assert_eq!(after.free - before.free, amount, "Bob received exactly the amount sent");

    // Bob bonds 2 000 ERG: the ledger shows it and the amount is held (reserved) on his account.
    const ERG: u128 = 1_000_000_000_000;
    let staking_index =
        pallets.iter().find(|(n, _)| n == "TrainerStaking").map(|(_, i)| *i).unwrap();
    let bob_pair = dev_pair("//Bob");
    let bond = 2_000 * ERG;
    let xt = signed_extrinsic(&bond_call(staking_index, bond), &bob_pair, after.nonce, ctx);
    node.submit(&xt).expect("the pool accepts the bond");
    let ledger: StakingLedger = wait_for("Bob's bond to appear", Duration::from_secs(120), || {
        node.storage_decoded(&staking_ledger_key(&bob))
    });
    assert_eq!(
        ledger,
        StakingLedger { active: bond, unlocking: vec![], obligated: 0, obligations: 0 }
    );
    let bonded: AccountInfo = node.storage_decoded(&bob_key).expect("Bob exists");
    assert_eq!(bonded.reserved, after.reserved + bond, "the bond is held on Bob's balance");

    // Alice, the only author, is minted 1 ERG per block (and collects the fees): her balance grows
    // although she paid for the transfer.
    let alice_now: AccountInfo =
        node.storage_decoded(&system_account_key(&alice.public().0)).expect("Alice exists");
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
    let market_index = pallets.iter().find(|(n, _)| n == "JobMarket").map(|(_, i)| *i).unwrap();
    let best = node.block_number(None).expect("best block");
    let budget = 100 * ERG;
    let call = post_job_call(market_index, &spec, budget, 10, best + 500);
    let nonce = alice_now.nonce;
    node.submit(&signed_extrinsic(&call, &alice, nonce, ctx)).expect("the pool accepts post_job");
    let job = wait_for("job 0 to appear", Duration::from_secs(120), || {
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
    let alice_after: AccountInfo =
        node.storage_decoded(&system_account_key(&alice.public().0)).expect("Alice exists");
    assert_eq!(alice_after.reserved, alice_now.reserved + budget, "the budget is held in escrow");
}
