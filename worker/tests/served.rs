//! Bundles over HTTP: the daemon's server (async, byte ranges) and the engine's downloads
//! together. A verifier downloads the manifest and only the checkpoints its checks read, and its
//! verdict is the one it would give on the whole bundle.

#[path = "../engine/tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};

use ergon_engine::{
    bundle::{self, MANIFEST_FILE},
    train::{self, Outcome, TrainOptions},
    verify::{self, VerifyOptions},
};
use ergon_worker::serve::Server;

const SEED: [u8; 32] = [7; 32];

/// Trains the CSV task (9 checkpoints) into `out`; returns its root.
fn honest(dir: &Path, out: &Path) -> (ergon_job_spec::JobSpec, [u8; 32]) {
    let spec = common::csv_spec(dir);
    match train::train(&spec, &TrainOptions::new(out.into(), SEED)).expect("training works") {
        Outcome::Finished(r) => (spec, r.root),
        Outcome::Halted(_) => unreachable!("no halt requested"),
    }
}

/// Serves `dir` on a loopback port from a runtime of its own thread; returns the URL.
fn serve(dir: PathBuf) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let server = Server::bind("127.0.0.1:0", &dir).await.expect("bind");
            tx.send(server.local_addr().expect("address")).unwrap();
            server.run(std::future::pending()).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_served_bundle_is_fetched_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, root) = honest(dir.path(), &out);
    let url = serve(out.clone());
    let local = dir.path().join("downloaded");
    bundle::fetch(&url, &local).expect("the bundle downloads");
    let mut opts = VerifyOptions::new(local, SEED);
    opts.segments = (0..8).collect();
    opts.expected_root = Some(root);
    assert!(verify::verify(&spec, &opts).unwrap().passed);
    // A URL serving nothing, or nothing listening at all, is an error (not the trainer's verdict to
    // give).
    assert!(bundle::fetch(&format!("{url}/missing"), &dir.path().join("none")).is_err());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let unreachable = bundle::fetch(&format!("http://{closed}/b"), &dir.path().join("none"));
    assert!(unreachable.is_err_and(|e| e.to_string().contains("downloading")));
}

/// A verifier drawn for one segment of a long bundle downloads the manifest and the checkpoints
/// its checks read (the segment's two ends and the rules' sample), not the whole bundle; the
/// verdict is the same as on the whole bundle, and a forged checkpoint among those read still fails.
#[test]
fn a_verifier_downloads_only_the_checkpoints_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let mut spec = common::csv_spec(dir.path());
    // 30 steps, a checkpoint every step: 31 checkpoints, more than the rules read.
    spec.checkpoint_interval = 1;
    let root = match train::train(&spec, &TrainOptions::new(out.clone(), SEED)).unwrap() {
        Outcome::Finished(r) => r.root,
        Outcome::Halted(_) => unreachable!(),
    };
    let total = bundle::inspect(&out).unwrap().manifest.checkpoints.len();
    let url = serve(out.clone());

    let local = dir.path().join("verifier");
    let mut opts = VerifyOptions::new(local.clone(), SEED);
    opts.segments = vec![11];
    opts.expected_root = Some(root);
    let fetched = verify::fetch_for(&spec, &url, &opts).unwrap();
    let manifest = bundle::inspect_selected(&out, |_| Vec::new(), None).unwrap().manifest;
    let selection = verify::selection(&opts, &manifest);
    assert_eq!(fetched, selection.read.len());
    assert!(fetched < total, "read {fetched} of {total}: nothing saved");
    assert!(selection.read.contains(&11) && selection.read.contains(&12));
    let mut expected: Vec<String> =
        selection.read.iter().map(|i| manifest.checkpoints[*i].file.clone()).collect();
    expected.push(MANIFEST_FILE.to_string());
    expected.sort();
    assert_eq!(files_in(&local), expected, "exactly the manifest and the checkpoints read");

    let partial = verify::verify(&spec, &opts).unwrap();
    let mut whole_opts = VerifyOptions::new(out.clone(), SEED);
    whole_opts.segments = vec![11];
    whole_opts.expected_root = Some(root);
    let whole = verify::verify(&spec, &whole_opts).unwrap();
    assert!(partial.passed, "{:?}", partial.first_failure());
    assert_eq!(partial.evidence_hash(), whole.evidence_hash());
}
