//! The `ergon-worker` binary: a training killed with SIGKILL at an arbitrary moment and started again
//! produces the same bundle root as an uninterrupted run; bad input gives an error message, not a panic.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

const BIN: &str = env!("CARGO_BIN_EXE_ergon-worker");

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name).display().to_string()
}

fn train(spec: &str, out: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(["train", "--spec", spec, "--out"])
        .arg(out)
        .args(["--quiet", "--threads", "2"])
        .output()
        .expect("ergon-worker runs")
}

fn root_of(output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.lines().find_map(|l| l.strip_prefix("root ").map(str::to_string)).unwrap_or_else(|| {
        panic!("no root in output: {stdout}\n{}", String::from_utf8_lossy(&output.stderr))
    })
}

#[test]
fn sigkill_mid_training_then_restart_gives_the_same_root() {
    let spec = example("fashion-mnist-mlp.json");
    let dir = tempfile::tempdir().unwrap();
    let full = train(&spec, &dir.path().join("full"));
    assert!(full.status.success(), "{}", String::from_utf8_lossy(&full.stderr));
    let expected = root_of(&full);

    // Kill the process once it has written its first checkpoints, wherever it then is.
    let out = dir.path().join("killed");
    let mut child = Command::new(BIN)
        .args(["train", "--spec", &spec, "--out"])
        .arg(&out)
        .args(["--quiet", "--threads", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !out.join("ckpt-00000300.safetensors").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(!out.join("manifest.json").exists(), "the run was killed before it finished");

    let resumed = train(&spec, &out);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(root_of(&resumed), expected);

    let inspect = Command::new(BIN).arg("inspect").arg(&out).output().unwrap();
    assert!(inspect.status.success());
    assert!(String::from_utf8_lossy(&inspect.stdout).contains(&expected[2..]));

    // The resumed bundle verifies: root, seed (job 0, the all-zero offline account), 3 drawn segments.
    let verify = Command::new(BIN)
        .args(["verify", "--spec", &spec, "--bundle"])
        .arg(&out)
        .args(["--root", &expected, "--trainer", &format!("0x{}", "00".repeat(32))])
        .args(["--challenge", "0x00c0ffee"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&verify.stdout);
    assert!(verify.status.success(), "{stdout}{}", String::from_utf8_lossy(&verify.stderr));
    assert!(stdout.contains("verdict PASS") && stdout.matches("replay[").count() == 3, "{stdout}");
    // A bundle of another seed is refused (exit status 1, a report, no error).
    let verify = Command::new(BIN)
        .args(["verify", "--spec", &spec, "--bundle"])
        .arg(&out)
        .args(["--trainer", &format!("0x{}", "11".repeat(32))])
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&verify.stdout).contains("FAIL manifest"));
}

#[test]
fn bad_input_is_an_error_message_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let bad_json = dir.path().join("bad.json");
    std::fs::write(&bad_json, b"{\"model\": 3}").unwrap();
    let cases: Vec<Vec<String>> = vec![
        vec![
            "train".into(),
            "--spec".into(),
            "/nonexistent/spec.json".into(),
            "--out".into(),
            "x".into(),
        ],
        vec![
            "train".into(),
            "--spec".into(),
            bad_json.display().to_string(),
            "--out".into(),
            "x".into(),
        ],
        vec!["inspect".into(), dir.path().display().to_string()],
        vec!["content-root".into(), "/nonexistent/data".into()],
        vec![
            "verify".into(),
            "--spec".into(),
            "/nonexistent/spec.json".into(),
            "--bundle".into(),
            "x".into(),
        ],
        // Nothing listens on port 9 of loopback: a clear download error.
        vec![
            "verify".into(),
            "--spec".into(),
            example("fashion-mnist-mlp.json"),
            "--bundle".into(),
            "http://127.0.0.1:9/bundle".into(),
        ],
    ];
    for args in cases {
        let out = Command::new(BIN).args(&args).current_dir(dir.path()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// `check --data`: what the validators' data check would find, before posting. The example's
/// files are local (hashed whole); a spec whose content root is not its data's fails with the set
/// named, exit status 1.
#[test]
fn check_data_reports_each_committed_set() {
    let spec = example("fashion-mnist-mlp.json");
    let out =
        Command::new(BIN).args(["check", "--spec", &spec, "--data", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sets = json["data"].as_array().expect("data per set");
    assert_eq!(sets.len(), 2, "training and validation data: {json}");
    assert_eq!(sets[0]["set"], "training data");
    assert_eq!(sets[0]["files"], 2);
    assert!(sets[0]["chunks"].as_u64().unwrap() > 1, "{json}");

    let mut bad: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    bad["validation"]["content_root"] = serde_json::json!(format!("0x{}", "00".repeat(32)));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, bad.to_string()).unwrap();
    let out = Command::new(BIN).args(["check", "--data", "--spec"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("validation data") && stderr.contains("content root"), "{stderr}");
}

/// `hf-spec`: a model directory (here `export --hf` of the tiny GPT-2 example) and token shards of
/// its vocabulary give a spec `check` accepts, fine-tuning from the file by its root; shards of
/// another vocabulary are refused, named, exit status 1.
#[test]
fn hf_spec_writes_a_fine_tune_spec_of_a_model_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bundle = root.join("bundle");
    assert!(train(&example("gpt2-tiny.json"), &bundle).status.success());
    let model = root.join("model");
    let run = |args: &[&str]| Command::new(BIN).args(args).output().unwrap();
    let export = run(&[
        "export",
        "--spec",
        &example("gpt2-tiny.json"),
        "--hf",
        model.to_str().unwrap(),
        bundle.to_str().unwrap(),
    ]);
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));

    // Token shards of the example's byte vocabulary (256), as `tokenize` would describe them.
    let block = |name: &str, windows: usize, vocab: u32| {
        let path = root.join(format!("{name}.bin"));
        let ids: Vec<u8> =
            (0..windows * 64 + 1).flat_map(|i| ((i * 7 % 256) as u16).to_le_bytes()).collect();
        std::fs::write(&path, ids).unwrap();
        let content_root = run(&["content-root", path.to_str().unwrap()]);
        let content_root = String::from_utf8_lossy(&content_root.stdout).trim().to_string();
        let json = root.join(format!("{name}-{vocab}.json"));
        let block = serde_json::json!({
            "format": {"type": "Tokens", "width": "U16", "vocab_size": vocab, "seq_len": 64},
            "files": [path], "content_root": content_root, "samples": windows,
        });
        std::fs::write(&json, block.to_string()).unwrap();
        json.display().to_string()
    };
    let (train_set, valid_set) = (block("train", 64, 256), block("valid", 16, 256));
    let spec = root.join("spec.json");
    let hf_spec = |valid: &str, extra: &[&str]| {
        let mut args = vec!["hf-spec", "--model", model.to_str().unwrap(), "--train", &train_set];
        args.extend(["--validation", valid]);
        args.extend(extra);
        run(&args)
    };
    let out = hf_spec(
        &valid_set,
        &["--precision", "bf16-mixed", "--warmup-steps", "2", "--out", spec.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let check = run(&["check", "--spec", spec.to_str().unwrap(), "--data", "--json"]);
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&spec).unwrap()).unwrap();
    assert_eq!(written["precision"], "Bf16Mixed");
    assert_eq!(written["init"]["naming"], "HfGpt2", "{written}");

    let other = block("valid", 16, 300);
    let out = hf_spec(&other, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.contains("vocabulary"), "{stderr}");
}
