//! `tokenize` against Hugging Face's `tokenizers` (Python, the library `transformers` runs) with
//! GPT-2's real byte-level BPE: the shards hold exactly the ids `tokenizers` gives each document,
//! the separator after each, cut into shards that load back as the dataset block says — from text,
//! JSONL and a parquet file `pyarrow` writes.
//!
//! Needs `ERGON_HF_TOKENIZER` (GPT-2's tokenizer.json) and `ERGON_HF_PYTHON`, which
//! `scripts/test.sh` sets (`scripts/lib/hf.sh`); without them the comparison is skipped and says so.

use std::{path::PathBuf, process::Command};

use ergon_engine::data::{
    self,
    tokenize::{tokenize, TokenizeOptions},
    Inputs,
};

/// Compiled in, as in `fine_tune.rs`.
const HF_SCRIPT: &str = include_str!("../../../scripts/lib/hf_models.py");

fn env(name: &str) -> Option<String> {
    let value = std::env::var(name).ok().filter(|v| !v.is_empty());
    if value.is_none() {
        eprintln!("SKIPPED the tokenizers comparison: {name} is not set (scripts/test.sh sets it)");
    }
    value
}

#[test]
fn shards_hold_the_ids_tokenizers_gives_with_gpt2s_bpe() {
    let (Some(tokenizer), Some(python)) = (env("ERGON_HF_TOKENIZER"), env("ERGON_HF_PYTHON"))
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = d.join("essay.txt");
    std::fs::write(
        &text,
        "Hello world, this is GPT-2's tokenizer!\n\nNumbers 1234567 and  double  spaces,\ttabs, \
         ünïcödé — and emoji 🚀.",
    )
    .unwrap();
    let jsonl = d.join("docs.jsonl");
    std::fs::write(
        &jsonl,
        "{\"text\": \"First document.\"}\n{\"text\": \"Second, longer document with more words in it.\"}\n\n{\"text\": \" leading space\"}\n",
    )
    .unwrap();
    // The same documents as a parquet file that pyarrow writes (as Hugging Face datasets ship
    // them: snappy pages, a "text" column beside others, several row groups).
    let script = d.join("hf_models.py");
    std::fs::write(&script, HF_SCRIPT).unwrap();
    let parquet = d.join("docs.parquet");
    let out = Command::new(&python)
        .arg(&script)
        .args(["parquet", parquet.to_str().unwrap(), jsonl.to_str().unwrap()])
        .output()
        .expect("python runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let inputs: Vec<PathBuf> = vec![text.clone(), jsonl.clone(), parquet];

    let opts =
        TokenizeOptions { separator: Some("<|endoftext|>".into()), shard_tokens: 40, seq_len: 8 };
    let dataset = tokenize(tokenizer.as_ref(), &inputs, &d.join("shards"), &opts).unwrap();

    let reference = d.join("ids.json");
    let out = Command::new(&python)
        .arg(&script)
        .args(["encode", &tokenizer, "<|endoftext|>", reference.to_str().unwrap()])
        .args(&inputs)
        .output()
        .expect("python runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let theirs: Vec<u32> = serde_json::from_slice(&std::fs::read(&reference).unwrap()).unwrap();

    // The shards, in order, are the ids tokenizers gives.
    let ours: Vec<u32> = dataset
        .files
        .iter()
        .flat_map(|f| {
            let bytes = std::fs::read(f.as_str().unwrap()).unwrap();
            bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]) as u32)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(ours, theirs, "Ergon's shards and tokenizers' ids");
    assert_eq!(ours.iter().filter(|id| **id == 50_256).count(), 7, "one separator per document");
    assert!(dataset.files.len() > 1, "cut into shards of 40");
    let ergon_job_spec::DataFormat::Tokens { vocab_size, width, seq_len } = dataset.format else {
        panic!("a Tokens dataset");
    };
    assert_eq!((vocab_size, width, seq_len), (50_257, ergon_job_spec::TokenWidth::U16, 8));

    // The block loads as a spec names it: content root, windows per shard, targets shifted by one.
    let samples = data::load(&dataset, "tokenized").unwrap();
    assert_eq!(samples.len as u64, dataset.samples);
    let Inputs::Tokens(x) = &samples.inputs else { panic!("token inputs") };
    assert_eq!(&x[..8], &theirs[..8]);
    assert_eq!(&samples.targets[..8], &theirs[1..9]);
}

#[test]
fn a_bad_tokenizer_or_separator_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = d.join("t.txt");
    std::fs::write(&text, "text").unwrap();
    let bogus = d.join("tokenizer.json");
    std::fs::write(&bogus, "{not json").unwrap();
    let opts = TokenizeOptions { separator: None, shard_tokens: 100, seq_len: 4 };
    let e = tokenize(&bogus, std::slice::from_ref(&text), &d.join("out"), &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a tokenizer.json"), "{e}");
    let Some(tokenizer) = env("ERGON_HF_TOKENIZER") else { return };
    let opts = TokenizeOptions { separator: Some("<|nope|>".into()), ..opts };
    let e = tokenize(tokenizer.as_ref(), &[text], &d.join("out"), &opts).unwrap_err().to_string();
    assert!(e.contains("no token \"<|nope|>\""), "{e}");
}
