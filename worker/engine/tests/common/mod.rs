//! Helpers shared by the integration tests: small datasets written to a temp dir and specs over them.

#![allow(dead_code)]

use std::path::Path;

use ergon_engine::data;
use ergon_job_spec::{
    Bounded, BoundedString, DataFormat, Dataset, Hash32, JobSpec, Layer, Model, Optimizer, Ppb,
};

/// Writes `bytes` as `dir/name` and describes it as a one-file dataset.
pub fn dataset(dir: &Path, name: &str, format: DataFormat, bytes: &[u8], samples: u64) -> Dataset {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    Dataset {
        format,
        files: Bounded::new(vec![BoundedString::from_str(path.to_str().unwrap()).unwrap()])
            .unwrap(),
        content_root: Hash32(data::content_root([bytes])),
        samples,
    }
}

/// A CSV classification task: 3 classes separated along two of four features.
pub fn csv_spec(dir: &Path) -> JobSpec {
    let mut text = String::new();
    for i in 0..150u32 {
        let class = i % 3;
        let f = |k: u32| ((i * 7 + k * 13) % 17) as f32 / 17.0 - 0.5;
        text.push_str(&format!(
            "{class},{},{},{},{}\n",
            f(0) + class as f32,
            f(1),
            f(2) - class as f32,
            f(3)
        ));
    }
    let format = DataFormat::Csv { features: 4, classes: 3 };
    let d = dataset(dir, "train.csv", format.clone(), text.as_bytes(), 150);
    JobSpec {
        model: Model {
            layers: Bounded::new(vec![
                Layer::Linear { in_features: 4, out_features: 16, bias: true },
                Layer::ReLU,
                Layer::Linear { in_features: 16, out_features: 3, bias: true },
            ])
            .unwrap(),
        },
        train: d.clone(),
        validation: d,
        optimizer: Optimizer::Sgd {
            lr: Ppb(50_000_000),
            momentum: Ppb(900_000_000),
            weight_decay: Ppb(1_000),
        },
        epochs: 3,
        batch_size: 16,
        checkpoint_interval: 4,
    }
}
