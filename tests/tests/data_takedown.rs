//! Issue 34's live test (b): the owner takes its data down after the bundle commitment. On a dev
//! chain with daemons (Bob trains, Charlie and Dave verify), Alice posts a small CSV job whose data
//! a loopback HTTP server serves; once Bob's bundle is committed the server answers 404. The
//! verifier daemons cannot load the data, and instead of failing the bundle they abstain
//! (`jobMarket.abstain`); the first abstention opens the data check, Alice's validator's offchain
//! worker finds the data unavailable, and the job ends `DataUnavailable` with nobody slashed: Bob
//! is paid his price, the verifiers keep their bonds.
//!
//! The draw waits for the VRF outputs of the 16 blocks after the commitment (about 96 s).

use std::{collections::HashMap, time::Duration};

use ergon_integration_tests::{
    bundle_server::BundleServer, check, dev_pair, job_view, market_daemons, post_job_as_alice,
    wait_for_daemons, Daemon, Node, Ports,
};
use serde_json::json;

use ergon_protocol::units::ERG;

/// A CSV classification task of 640 rows: 3 classes separated along two of four features.
fn csv() -> Vec<u8> {
    let mut text = String::new();
    for i in 0..640u32 {
        let class = i % 3;
        let f = |k: u32| ((i * 7 + k * 13) % 17) as f32 / 17.0 - 0.5;
        text.push_str(&format!(
            "{class},{:.4},{:.4},{:.4},{:.4}\n",
            f(0) + class as f32,
            f(1),
            f(2) - class as f32,
            f(3)
        ));
    }
    text.into_bytes()
}

/// A dev chain (Alice validating) with the market's daemons: Bob trains, Charlie and Dave verify.
fn dev_market() -> (tempfile::TempDir, Node, [Daemon; 3]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));
    let daemons = market_daemons(&node, dir.path(), &[]);
    (dir, node, daemons)
}

/// Serves `served` as `/train.csv` over HTTP on loopback, with the chunk list of `committed`
/// beside it, and has Alice post the CSV job committing to `committed`: the server and the job.
fn serve_and_post(
    node: &Node,
    dir: &std::path::Path,
    committed: &[u8],
    served: Vec<u8>,
) -> (BundleServer, u64) {
    let list = ergon_job_spec::ChunkList::of(committed);
    let server = BundleServer::start(HashMap::from([
        ("/train.csv".to_string(), served),
        ("/train.csv.chunks".to_string(), list.encode()),
    ]));
    let url = format!("http://127.0.0.1:{}/train.csv", server.port);
    let job = post_csv_job(node, dir, &url, list.digest());
    (server, job)
}

/// Waits (ten minutes at most) for `job` to end and checks that it ended for unavailable data.
fn ends_for_unavailable_data(node: &Node, job: u64, all: &[&Daemon]) {
    let done = wait_for_daemons("the job to end", Duration::from_secs(600), all, || {
        let view = job_view(node, job);
        matches!(view["state"]["status"].as_str(), Some("completed" | "failed")).then_some(view)
    });
    check(
        done["state"]["status"] == "failed" && done["state"]["reason"] == "DataUnavailable",
        &format!("the job ends for unavailable data: {done}"),
        all,
    );
}

/// Alice posts the CSV job (40 steps, a checkpoint after each: 40 segments, the market wants at
/// least 30) whose data is the file at `url` with `digest`.
fn post_csv_job(node: &Node, dir: &std::path::Path, url: &str, digest: [u8; 32]) -> u64 {
    let root = ergon_job_spec::content_root([digest]);
    let dataset = json!({
        "format": { "type": "Csv", "features": 4, "classes": 3 },
        "files": [url],
        "content_root": format!("0x{}", hex::encode(root)),
        "samples": 640,
    });
    let spec = json!({
        "model": { "layers": [
            { "type": "Linear", "in_features": 4, "out_features": 16, "bias": true },
            { "type": "ReLU" },
            { "type": "Linear", "in_features": 16, "out_features": 3, "bias": true },
        ]},
        "train": dataset,
        "validation": dataset,
        "optimizer": { "type": "Sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0 },
        "epochs": 1,
        "batch_size": 16,
        "checkpoint_interval": 1,
    });
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, spec.to_string()).expect("spec written");
    post_job_as_alice(node.ports.rpc, &spec_path)
}

/// The owner serves data that is not what it committed: the committed chunk list, but a byte of
/// the file changed. Bob's daemon cannot load it, locates the chunk that differs and reports it
/// itself (`reportDataUnavailable(job, gap)`); Alice's validator fetches exactly that chunk by
/// byte range, finds it differs from the list, and the job ends `DataUnavailable` with nobody
/// slashed (Bob gets the bid deposit's worth for his trouble).
#[test]
fn data_not_served_as_committed_is_reported_by_the_trainer() {
    let (dir, node, daemons) = dev_market();
    let all: Vec<_> = daemons.iter().collect();

    let data = csv();
    let mut served = data.clone();
    served[100] ^= 1;
    let (server, job) = serve_and_post(&node, dir.path(), &data, served);

    ends_for_unavailable_data(&node, job, &all);
    check(
        daemons[0].log().contains("the job's data is not served: reporting it"),
        "Bob's daemon reports the data itself",
        &all,
    );
    // The validator fetched the named chunk by range (and the chunk list).
    let requests = server.requests.lock().expect("requests").clone();
    check(
        requests.iter().any(|(path, range)| path == "/train.csv" && range.is_some()),
        &format!("the named chunk was fetched by range: {requests:?}"),
        &all,
    );
    for who in ["//Bob", "//Charlie", "//Dave"] {
        let ledger = node.bond(&dev_pair(who).public_key().0).expect("bonded");
        assert_eq!(ledger.active, 2_000 * ERG, "{who} was not slashed");
    }
}

#[test]
fn data_taken_down_after_the_commitment_does_not_slash_the_trainer() {
    let (dir, node, daemons) = dev_market();
    let all: Vec<_> = daemons.iter().collect();

    // Alice's data, served over HTTP with its chunk list, so that the validators can check it.
    let data = csv();
    let (server, job) = serve_and_post(&node, dir.path(), &data, data.clone());

    // Bob wins the job when the bid window closes, trains it and commits his bundle.
    let ten_minutes = Duration::from_secs(600);
    wait_for_daemons("Bob's commitment", ten_minutes, &all, || {
        (job_view(&node, job)["state"]["status"] == "verifying").then_some(())
    });
    // Alice takes her data down.
    server.take_down();
    let price: u128 = job_view(&node, job)["state"]["price"]
        .as_str()
        .and_then(|p| p.parse().ok())
        .expect("the price");
    // Free plus held: the bid deposit's release moves nothing, the payment does.
    let bob = dev_pair("//Bob").public_key().0;
    let total = |who: &[u8; 32]| {
        let a = node.account(who);
        a.free + a.reserved
    };
    let bob_before = total(&bob);

    ends_for_unavailable_data(&node, job, &all);
    // The verifiers abstained rather than failing Bob.
    for daemon in &daemons[1..] {
        let log = daemon.log();
        check(
            log.contains("abstaining") && !log.contains("verdict commitment: in a block"),
            "a verifier abstains and commits no verdict",
            &all,
        );
    }
    // Nobody was slashed; Bob was paid his price (less his transaction fees since).
    for who in ["//Bob", "//Charlie", "//Dave"] {
        let ledger = node.bond(&dev_pair(who).public_key().0).expect("bonded");
        assert_eq!(ledger.active, 2_000 * ERG, "{who} was not slashed");
    }
    let paid = total(&bob).saturating_sub(bob_before);
    assert!(paid + ERG / 10 >= price && paid <= price, "Bob was paid {paid} of his price {price}");
}
