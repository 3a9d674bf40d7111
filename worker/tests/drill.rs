//! The driller's fast path gives the reference's bytes on many seeds, sizes and thread counts, and a
//! bad task file is a clear error.

use ergon_drill::MatmulChain;
use ergon_worker::drill;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn fast_path_equals_reference(
        seed in any::<[u8; 32]>(),
        dim in 1u32..40,
        length in 1u32..4,
        threads in 1usize..5,
    ) {
        let task = MatmulChain { seed, dim, length };
        let fast = drill::run(&task, threads).unwrap();
        prop_assert_eq!(fast.result, task.run_reference());
        prop_assert_eq!(fast.ops, 2 * (dim as u128).pow(3) * length as u128);
    }
}

#[test]
fn task_files_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    let write = |body: &str| {
        let p = dir.path().join("task.json");
        std::fs::write(&p, body).unwrap();
        p
    };
    let seed = format!("0x{}", "ab".repeat(32));
    let ok =
        write(&format!(r#"{{"kind": "MatmulChain", "seed": "{seed}", "dim": 8, "length": 2}}"#));
    assert_eq!(drill::load_task(&ok).unwrap(), MatmulChain { seed: [0xab; 32], dim: 8, length: 2 });
    for (body, why) in [
        (format!(r#"{{"kind": "MatmulChain", "seed": "{seed}", "dim": 0, "length": 2}}"#), "side"),
        (
            format!(r#"{{"kind": "MatmulChain", "seed": "{seed}", "dim": 8, "length": 0}}"#),
            "length",
        ),
        (r#"{"kind": "MatmulChain", "seed": "0x12", "dim": 8, "length": 2}"#.into(), "seed"),
        (format!(r#"{{"kind": "Mining", "seed": "{seed}"}}"#), "unknown variant"),
        ("not json".into(), "expected"),
    ] {
        let err = drill::load_task(&write(&body)).unwrap_err().to_string();
        assert!(err.contains("bad drilling task") && err.contains(why), "{body}: {err}");
    }
    assert!(drill::load_task(&dir.path().join("missing.json")).is_err());
}
