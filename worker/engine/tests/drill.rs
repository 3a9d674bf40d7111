//! The driller's fast path gives the reference's bytes on many seeds, sizes and thread counts, and a
//! bad task file is a clear error.

use ergon_drill::MatmulChain;
use ergon_engine::drill::{self, random_inference, DrillTask};
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
        // The device path (candle; here its CPU device) gives the same bytes.
        let device = drill::run_on_device(&task, &candle_core::Device::Cpu).unwrap();
        prop_assert_eq!(device.result, fast.result);
        prop_assert_eq!(fast.ops, 2 * (dim as u128).pow(3) * length as u128);
    }

    #[test]
    fn fast_inference_equals_reference(
        seed in any::<u64>(),
        widths in prop::collection::vec(1u32..48, 2..5),
        samples in 1u32..40,
        threads in 1usize..5,
    ) {
        let (task, model, dataset) = random_inference(seed, &widths, samples);
        let fast = drill::run_inference(&task, &model, &dataset, threads);
        prop_assert!(fast.invalid.is_none());
        prop_assert_eq!(fast.result, task.run_reference(&model, &dataset));
        prop_assert_ne!(fast.result, task.invalid_result());
        // A flipped byte in either file gives the agreed invalid result.
        let mut bad = model.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let wrong = drill::run_inference(&task, &bad, &dataset, threads);
        prop_assert_eq!(wrong.result, task.invalid_result());
        prop_assert_eq!(task.run_reference(&bad, &dataset), task.invalid_result());
    }
}

#[test]
fn inference_task_files_run_from_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (task, model, dataset) = random_inference(7, &[16, 8, 4], 50);
    std::fs::write(dir.path().join("model.eqnn"), &model).unwrap();
    std::fs::write(dir.path().join("data.eqds"), &dataset).unwrap();
    let hex =
        |h: [u8; 32]| format!("0x{}", h.iter().map(|b| format!("{b:02x}")).collect::<String>());
    let file = dir.path().join("task.json");
    let body = format!(
        r#"{{"kind": "QuantizedInference", "model": "{}", "model_uri": "{}", "dataset": "{}",
            "dataset_uri": "{}", "widths": [16, 8, 4], "samples": 50}}"#,
        hex(task.model),
        dir.path().join("model.eqnn").display(),
        hex(task.dataset),
        dir.path().join("data.eqds").display(),
    );
    std::fs::write(&file, body).unwrap();
    let loaded = drill::load_task(&file).unwrap();
    let chain = DrillTask::MatmulChain(MatmulChain { seed: [1; 32], dim: 33, length: 2 });
    let by_candle = drill::run_task(&chain, 2, &drill::Engine::Candle(candle_core::Device::Cpu));
    let by_int8 = drill::run_task(&chain, 2, &drill::Engine::Int8 { threads: 2 });
    assert_eq!(by_candle.unwrap().result, by_int8.unwrap().result);
    let outcome = drill::run_task(&loaded, 2, &drill::Engine::Int8 { threads: 2 }).unwrap();
    assert_eq!(outcome.result, task.run_reference(&model, &dataset));
    assert_eq!(outcome.micro_ut, task.difficulty_micro_ut());
    // A missing file: the invalid result, with the reason.
    let DrillTask::QuantizedInference { task: t, dataset_uri, .. } = loaded else { unreachable!() };
    let missing = DrillTask::QuantizedInference {
        task: t.clone(),
        model_uri: "/nonexistent/model".into(),
        dataset_uri,
    };
    let outcome = drill::run_task(&missing, 2, &drill::Engine::Int8 { threads: 2 }).unwrap();
    assert_eq!(outcome.result, t.invalid_result());
    assert!(outcome.invalid.unwrap().contains("/nonexistent/model"));
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
    assert_eq!(
        drill::load_task(&ok).unwrap(),
        DrillTask::MatmulChain(MatmulChain { seed: [0xab; 32], dim: 8, length: 2 })
    );
    for (body, why) in [
        (format!(r#"{{"kind": "MatmulChain", "seed": "{seed}", "dim": 0, "length": 2}}"#), "side"),
        (
            format!(r#"{{"kind": "MatmulChain", "seed": "{seed}", "dim": 8, "length": 0}}"#),
            "length",
        ),
        (r#"{"kind": "MatmulChain", "seed": "0x12", "dim": 8, "length": 2}"#.into(), "seed"),
        (format!(r#"{{"kind": "Mining", "seed": "{seed}"}}"#), "unknown variant"),
        (
            format!(
                r#"{{"kind": "QuantizedInference", "model": "{seed}", "model_uri": "m",
                    "dataset": "{seed}", "dataset_uri": "d", "widths": [4], "samples": 1}}"#
            ),
            "layers",
        ),
        ("not json".into(), "expected"),
    ] {
        let err = drill::load_task(&write(&body)).unwrap_err().to_string();
        assert!(err.contains("bad drilling task") && err.contains(why), "{body}: {err}");
    }
    assert!(drill::load_task(&dir.path().join("missing.json")).is_err());
}
