//! GPT-2 fine-tunes through the chain, on a live dev chain with daemons: the whole path of issue 36
//! on a tiny config. A base model is trained and exported in Hugging Face's layout with the worker's
//! own commands (`train`, `export --hf`); Alice writes a fine-tune of it with `hf-spec` (`init` names
//! the file in GPT-2 naming by its content root) and posts it, and a LoRA one (rank-4 adapters over
//! the frozen base: checkpoints of adapters only) in bf16 mixed precision — on pre-tokenized shards
//! over several files, with a warmup-cosine schedule; Bob's daemon trains them from those weights,
//! Charlie's and Dave's replay them (their `init` check compares C0 with the file; LoRA replays run
//! over the committed base, in bf16); both complete; Alice fetches each model with the user CLI and
//! exports it back to Hugging Face's layout (LoRA merged into the base).

use std::{path::Path, process::Command, time::Duration};

use ergon_integration_tests::{
    check, job_view, market_daemons, post_job_as_alice, user_cli, wait_for_daemons, worker_binary,
    Node, Ports,
};
use serde_json::{json, Value};

const VOCAB: u32 = 97;
const SEQ: usize = 16;

fn worker(args: &[&str]) -> String {
    let out = Command::new(worker_binary()).args(args).output().expect("ergon-worker runs");
    assert!(
        out.status.success(),
        "ergon-worker {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Token shards of `windows` samples each, one file per salt, as u16 ids below [`VOCAB`].
fn shards(dir: &Path, name: &str, salts: &[u32], windows: usize) -> Value {
    let mut files = Vec::new();
    for salt in salts {
        let mut x = 777u32.wrapping_add(*salt);
        let bytes: Vec<u8> = (0..windows * SEQ + 1)
            .flat_map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (((x >> 16) % VOCAB) as u16).to_le_bytes()
            })
            .collect();
        let file = dir.join(format!("{name}-{salt}.bin"));
        std::fs::write(&file, bytes).unwrap();
        files.push(path(&file));
    }
    let mut args = vec!["content-root"];
    args.extend(files.iter().map(String::as_str));
    json!({
        "format": { "type": "Tokens", "width": "U16", "vocab_size": VOCAB, "seq_len": SEQ },
        "files": files,
        "content_root": worker(&args),
        "samples": salts.len() * windows,
    })
}

/// A 2-block GPT-2 (width 32, 4 heads, 24 positions, tied head) on the shards.
fn gpt2(init: Value, train: &Value, validation: &Value, epochs: u32) -> Value {
    let block = json!({ "type": "TransformerBlock", "dim": 32, "heads": 4, "hidden": 64 });
    json!({
        "model": { "layers": [
            { "type": "Embedding", "vocab_size": VOCAB, "dim": 32 },
            { "type": "PositionalEmbedding", "max_len": 24, "dim": 32 },
            block, block,
            { "type": "LayerNorm", "dim": 32 },
            { "type": "TiedEmbeddingHead" }
        ]},
        "init": init,
        "train": train,
        "validation": validation,
        "optimizer": { "type": "AdamW", "lr": 0.003, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8,
                       "weight_decay": 0.01 },
        "schedule": { "type": "WarmupCosine", "warmup_steps": 4, "min_ratio": 0.1 },
        "epochs": epochs,
        "batch_size": 4,
        "checkpoint_interval": 1
    })
}

#[test]
fn a_gpt2_fine_tune_from_hugging_face_weights_settles_and_exports() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let train = shards(d, "train", &[1, 2, 3], 12);
    let validation = shards(d, "valid", &[9], 8);

    // The base: trained from the seed offline, exported as a transformers GPT-2.
    let base_spec = d.join("base.json");
    std::fs::write(&base_spec, gpt2(json!({ "type": "Seed" }), &train, &validation, 1).to_string())
        .unwrap();
    worker(&["train", "--spec", &path(&base_spec), "--out", &path(&d.join("base")), "--quiet"]);
    let base_hf = d.join("base-hf");
    worker(&[
        "export",
        "--spec",
        &path(&base_spec),
        "--hf",
        &path(&base_hf),
        &path(&d.join("base")),
    ]);
    // The jobs: 36 samples in batches of 4, 4 epochs = 36 steps, a checkpoint after each (the
    // interval `hf-spec` picks for fewer than 64 steps).
    let (train_block, valid_block) = (d.join("train.json"), d.join("valid.json"));
    std::fs::write(&train_block, train.to_string()).unwrap();
    std::fs::write(&valid_block, validation.to_string()).unwrap();
    let full_path = d.join("hf-spec.json");
    worker(&[
        "hf-spec",
        "--model",
        &path(&base_hf),
        "--train",
        &path(&train_block),
        "--validation",
        &path(&valid_block),
        "--epochs",
        "4",
        "--batch-size",
        "4",
        "--lr",
        "0.003",
        "--warmup-steps",
        "4",
        "--out",
        &path(&full_path),
    ]);
    let full: Value = serde_json::from_slice(&std::fs::read(&full_path).unwrap()).unwrap();
    assert_eq!(full["checkpoint_interval"], 1, "{full}");
    let mut lora = full.clone();
    lora["adapters"] =
        json!({ "type": "Lora", "rank": 4, "alpha": 8, "attention": true, "mlp": true });
    lora["precision"] = json!("Bf16Mixed");
    let node = Node::start("dev", Ports::free(), &["--dev".into(), "--tmp".into()], d);
    node.wait_finalized(1, Duration::from_secs(180));
    let [bob, charlie, dave] = market_daemons(&node, d, &[]);
    let daemons = [&bob, &charlie, &dave];
    let mut jobs = Vec::new();
    for (name, spec) in [("full", &full), ("lora", &lora)] {
        let spec_path = d.join(format!("{name}.json"));
        std::fs::write(&spec_path, spec.to_string()).unwrap();
        jobs.push((name, spec_path.clone(), post_job_as_alice(node.ports.rpc, &spec_path)));
    }
    for (name, spec_path, job) in jobs {
        let done = wait_for_daemons(
            &format!("the {name} job to settle"),
            Duration::from_secs(1_500),
            &daemons,
            || {
                let view = job_view(&node, job);
                let status = view["state"]["status"].as_str()?.to_string();
                (status == "completed" || status == "failed").then_some(view)
            },
        );
        check(done["state"]["status"] == "completed", &format!("{name} settled: {done}"), &daemons);
        check(
            done["spec"]["init"]["naming"] == "HfGpt2",
            &format!("the chain keeps the base: {done}"),
            &daemons,
        );
        let precision = if name == "lora" { "Bf16Mixed" } else { "F32" };
        check(
            done["spec"]["precision"] == precision,
            &format!("the chain keeps the precision: {done}"),
            &daemons,
        );

        // Alice's side: the model, checked against the root and exported for transformers in
        // one command; `export` on the fetched bundle writes the same file.
        let model_dir = d.join(format!("model-{name}"));
        let hf = d.join(format!("hf-{name}"));
        let (ok, out) = user_cli(
            node.ports.rpc,
            &["fetch-model", &job.to_string(), "--out", &path(&model_dir), "--hf", &path(&hf)],
        );
        assert!(ok && out.contains("matches the commitment"), "{out}");
        let config: Value =
            serde_json::from_slice(&std::fs::read(hf.join("config.json")).unwrap()).unwrap();
        assert_eq!(config["model_type"], "gpt2");
        assert_eq!(config["tie_word_embeddings"], true);
        let again = d.join(format!("hf-{name}-export"));
        worker(&["export", "--spec", &path(&spec_path), "--hf", &path(&again), &path(&model_dir)]);
        assert!(
            std::fs::read(hf.join("model.safetensors")).unwrap()
                == std::fs::read(again.join("model.safetensors")).unwrap(),
            "fetch-model --hf and export write the same model"
        );
    }
}
