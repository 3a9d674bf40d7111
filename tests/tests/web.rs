//! The web page (`web/`) in headless Chromium against a live dev chain and the market's daemons, as
//! a user who would rather click: it connects, signs as Alice, has an over-limit spec refused with
//! the limit named, checks the example spec and shows its least budget, refuses a budget below it,
//! posts the job, watches its phases to completion, downloads the final checkpoint and checks it
//! against the root on chain (ergon-bundle compiled to WebAssembly). The browser side is
//! `web/test/e2e.mjs` (Playwright); it leaves a screenshot of each step in `web/test-output/`.
//!
//! Needs Debian's `chromium` (`scripts/setup.sh` installs it) and the built page
//! (`cd web && npm ci && npm run build`; `scripts/test.sh` does both).

use std::{path::Path, time::Duration};

use ergon_integration_tests::{market_daemons, run_node_script, Node, Ports};
use serde_json::Value;

#[test]
fn a_user_posts_watches_and_downloads_a_checked_model_from_the_web_page() {
    let web = ergon_integration_tests::repo_dir().join("web");
    assert!(
        web.join("dist/index.html").exists(),
        "the page is not built: run `cd web && npm ci && npm run build`"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(Path::new(&chromium).exists(), "{chromium} not found: run scripts/setup.sh");

    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));
    let daemons = market_daemons(&node, dir.path(), &[]);

    let spec = web.join("../worker/examples/fashion-mnist-mlp.json");
    let out = web.join("test-output");
    let ws = format!("ws://127.0.0.1:{}", node.ports.rpc);
    let (spec, out) = (spec.to_string_lossy(), out.to_string_lossy());
    let run = run_node_script(
        &web.join("test/e2e.mjs"),
        &["--ws", &ws, "--spec", &spec, "--out", &out, "--chromium", &chromium, "--timeout", "600"],
        Duration::from_secs(900),
    );
    print!("{}", run.stdout);
    let outcome: Option<Value> =
        run.stdout.lines().last().and_then(|l| serde_json::from_str(l).ok());
    let logs = || daemons.iter().map(|d| d.log_tail(30)).collect::<Vec<_>>().join("\n");
    assert!(
        run.ok && outcome.as_ref().is_some_and(|o| o["ok"] == true),
        "the page's run failed: {}\n{}\nnode:\n{}\ndaemons:\n{}",
        run.stdout,
        run.stderr,
        node.log_tail(30),
        logs()
    );
    let outcome = outcome.expect("checked above");

    // The file the browser saved is the final checkpoint Bob's daemon committed, byte for byte.
    let saved = std::fs::read(outcome["model"].as_str().expect("a saved model")).expect("saved");
    let job = node.call("ergon_job", serde_json::json!([outcome["job"]])).expect("ergon_job");
    assert_eq!(job["state"]["status"], "completed", "{job}");
    let root = job["state"]["bundle"]["root"].as_str().expect("a root").to_string();
    assert_eq!(outcome["root"].as_str(), Some(root.as_str()), "{outcome}");
    let manifest_dir = find_bundle(&dir.path().join("bob"), &root).expect("Bob's bundle on disk");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(manifest_dir.join("manifest.json")).unwrap())
            .unwrap();
    let last = manifest["checkpoints"].as_array().and_then(|c| c.last()).expect("checkpoints");
    let committed = std::fs::read(manifest_dir.join(last["file"].as_str().unwrap())).unwrap();
    assert!(saved == committed, "the saved model differs from the committed checkpoint");
    for shot in outcome["screenshots"].as_array().into_iter().flatten() {
        println!("screenshot of the page: {}", shot.as_str().unwrap_or("?"));
    }
}

/// The directory under `dir` holding the bundle whose manifest hashes to `root`.
fn find_bundle(dir: &Path, root: &str) -> Option<std::path::PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "manifest.json") {
                let bytes = std::fs::read(&path).ok()?;
                let index = ergon_bundle::ManifestIndex::parse(&bytes).ok()?;
                if ergon_bundle::to_hex(&index.root()) == root {
                    return path.parent().map(Path::to_path_buf);
                }
            }
        }
    }
    None
}
