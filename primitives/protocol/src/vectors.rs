//! The published test vectors (`test-vectors.json`): every rule of this crate on fixed inputs.
//! `cargo test -p ergon-protocol` fails when the file and the code disagree; `ERGON_BLESS=1`
//! rewrites it (a change of a rule is a protocol change: bump the rule's tag version).

use crate::{commitments, draw, evidence, seed, segments, sortition, Sketch, Verdict};
use serde_json::{json, Value};

fn hex(bytes: &[u8]) -> String {
    let mut s = String::from("0x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A sum-tree draw over two trees: slot 3 of tree 0 refused, slot 2 of tree 1 excluded, slot 2 of
/// tree 0 kept with probability 1/2; returns the seats, (tree, slot) in the order drawn.
fn sortition_seats(seed: &[u8; 32], trees: &[&[u128]]) -> Vec<(u32, u32)> {
    let built = trees.iter().map(|weights| {
        let mut nodes: Vec<u128> = Vec::new();
        let mut len = 0;
        for w in weights.iter() {
            len = sortition::push(&mut nodes, len, *w);
        }
        (nodes, len)
    });
    let mut forest = sortition::Forest::new(built);
    sortition::draw(
        seed,
        &mut forest,
        3,
        64,
        |slot| match slot {
            (0, 3) => sortition::Look::Refuse,
            (1, 2) => sortition::Look::Exclude,
            (0, 2) => sortition::Look::Keep { keep: 1, of: 2 },
            _ => sortition::Look::TAKE,
        },
        |_| true,
    )
}

fn vectors() -> Value {
    let alice = [
        0xd4, 0x35, 0x93, 0xc7, 0x15, 0xfd, 0xd3, 0x1c, 0x61, 0x14, 0x1a, 0xbd, 0x04, 0xa9, 0x9f,
        0xd6, 0x82, 0x2c, 0x85, 0x58, 0x85, 0x4c, 0xcd, 0xe3, 0x9a, 0x56, 0x84, 0xe7, 0xa5, 0x6d,
        0xa2, 0x7d,
    ];
    let report = [0x11u8; 32];
    let sketch = Sketch { exponent: -40, deviation: [1, -2, 3, -4, 5, -6, 7, -8], scale: 1 << 29 };
    let root = [0x55u8; 32];
    let evidence_key = evidence::key(&root, 4);
    let projected =
        evidence::Signs::new(&evidence_key, 40).project((0..40).map(|i| i as f64 * 0.25 - 5.0));
    let (deviation, chord) = ([1.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25], [0.5; 8]);
    let quantized = Sketch::quantize(deviation, chord);
    let salt = [0x22u8; 32];
    let result = [0x33u8; 32];
    let random = [0x44u8; 32];
    let draw_seed = crate::hash::job_round_seed(&random, 7, 0);
    json!({
        "note": "Inputs are raw bytes as 0x-hex; accounts are raw 32-byte AccountId32 (alice = //Alice).",
        "units": {
            "planck_per_erg": crate::units::ERG.to_string(),
            "micro_ut_per_ut": crate::units::MICRO_UT_PER_UT.to_string(),
        },
        "alice": hex(&alice),
        "job_seed": [
            { "job": 0, "trainer": hex(&alice), "seed": hex(&seed::job_seed(0, &alice)) },
            { "job": 7, "trainer": hex(&alice), "seed": hex(&seed::job_seed(7, &alice)) },
        ],
        "verdict_commitment": [
            { "job": 7, "round": 0, "verifier": hex(&alice), "verdict": "Pass",
              "sketches": [[{ "exponent": sketch.exponent, "deviation": sketch.deviation,
                              "scale": sketch.scale }]],
              "report": hex(&report), "salt": hex(&salt),
              "commitment": hex(&commitments::verdict(7, 0, &alice, Verdict::Pass, &[[sketch]],
                  &report, &salt)) },
            { "job": 7, "round": 1, "verifier": hex(&alice), "verdict": { "Fail": { "segment": 12 } },
              "sketches": [], "report": hex(&report), "salt": hex(&salt),
              "commitment": hex(&commitments::verdict(7, 1, &alice, Verdict::Fail { segment: 12 },
                  &[] as &[[Sketch; 0]], &report, &salt)) },
        ],
        "drill_result_commitment": [
            { "task": 3, "executor": hex(&alice), "result": hex(&result), "salt": hex(&salt),
              "commitment": hex(&commitments::drill_result(3, &alice, &result, &salt)) },
        ],
        "draw_seed": {
            "randomness": hex(&random), "subject": "(\"ergon/job-market/draw\", 7u64, 0u32)",
            "seed": hex(&draw_seed),
        },
        "segments": [
            { "seed": hex(&draw_seed), "segments": 30, "count": 3,
              "drawn": segments::draw(&draw_seed, 30, 3) },
            { "seed": hex(&draw_seed), "segments": 5, "count": 9,
              "drawn": segments::draw(&draw_seed, 5, 9) },
        ],
        "assignment": [
            { "seed": hex(&draw_seed), "segments": 30, "verifiers": 3, "per_verifier": 4,
              "assigned": segments::assign(&draw_seed, 30, 3, 4) },
            { "seed": hex(&draw_seed), "segments": 5, "verifiers": 3, "per_verifier": 4,
              "assigned": segments::assign(&draw_seed, 5, 3, 4) },
            { "seed": hex(&draw_seed), "segments": 30, "verifiers": 5, "per_verifier": 3,
              "assigned": segments::assign(&draw_seed, 30, 5, 3) },
        ],
        "replay_evidence": {
            "root": hex(&root), "segment": 4, "key": hex(&evidence_key),
            "probe_steps": [
                { "from": 120, "to": 150, "probes": evidence::probe_steps(120, 150) },
                { "from": 0, "to": 1000, "probes": evidence::probe_steps(0, 1000) },
            ],
            "projection": { "values": "i * 0.25 - 5.0 for i in 0..40", "sums": projected },
            "quantized": {
                "deviation": deviation, "chord": chord,
                "sketch": {
                    "exponent": quantized.exponent,
                    "deviation": quantized.deviation,
                    "scale": quantized.scale,
                },
                "agrees_with_itself": evidence::agree(&quantized, &quantized),
                "agrees_with_no_deviation": evidence::agree(&quantized,
                    &Sketch { deviation: [0; 8], ..quantized }),
            },
            "tolerance_ppm": evidence::TOLERANCE_PPM,
        },
        "synthetic_task_seed": { "epoch_seed": hex(&draw_seed), "index": 2,
            "seed": hex(&seed::synthetic_task(&draw_seed, 2)) },
        "uniform_order": { "seed": hex(&draw_seed), "purpose": "executors", "items": [1, 2, 3, 4, 5],
            "order": draw::uniform_order(&draw_seed, b"executors", &[1u32, 2, 3, 4, 5]) },
        "sortition_draw": {
            "seed": hex(&draw_seed), "wanted": 3, "max_points": 64,
            "trees": [[10, 20, 30, 0], [5, 50]],
            "refused": [[0, 3]], "excluded": [[1, 2]], "kept_half": [[0, 2]],
            "coin_tag": String::from_utf8_lossy(sortition::COIN),
            "seats": sortition_seats(&draw_seed, &[&[10, 20, 30, 0], &[5, 50]]),
        },
        "weighted_order": {
            "seed": hex(&draw_seed), "purpose": "verifiers",
            "candidates": [[1, 10], [2, 20], [3, 30], [4, 0]],
            "order": draw::weighted_order(&draw_seed, b"verifiers",
                &[(1u32, 10u64), (2, 20), (3, 30), (4, 0)]),
        },
    })
}

#[test]
fn published_test_vectors_match_the_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/test-vectors.json");
    let expected = serde_json::to_string_pretty(&vectors()).expect("json") + "\n";
    if std::env::var_os("ERGON_BLESS").is_some() {
        std::fs::write(path, &expected).expect("write test vectors");
        return;
    }
    // Compiled in, not read at run time: a test binary that cargo reuses from another checkout (a
    // shared target directory) keeps that checkout's CARGO_MANIFEST_DIR.
    let published = include_str!("../test-vectors.json");
    assert!(
        published == expected,
        "{path} is out of date with the protocol rules (ERGON_BLESS=1 rewrites it)"
    );
}
