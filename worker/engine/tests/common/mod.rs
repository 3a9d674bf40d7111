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

/// SGD with momentum, as the small tasks train.
fn sgd() -> Optimizer {
    Optimizer::Sgd { lr: Ppb(50_000_000), momentum: Ppb(900_000_000), weight_decay: Ppb(1_000) }
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
        optimizer: sgd(),
        init: Default::default(),
        schedule: Default::default(),
        adapters: Default::default(),
        gradients: Default::default(),
        epochs: 3,
        batch_size: 16,
        checkpoint_interval: 4,
        precision: Default::default(),
    }
}

/// A byte-level language model with a transformer block, trained with AdamW.
pub fn text_spec(dir: &Path) -> JobSpec {
    let text = "the quick brown fox jumps over the lazy dog. ".repeat(12);
    let format = DataFormat::Text { seq_len: 16 };
    let samples = ((text.len() - 1) / 16) as u64;
    let d = dataset(dir, "train.txt", format.clone(), text.as_bytes(), samples);
    JobSpec {
        model: Model {
            layers: Bounded::new(vec![
                Layer::Embedding { vocab_size: 256, dim: 16 },
                Layer::PositionalEmbedding { max_len: 16, dim: 16 },
                Layer::TransformerBlock { dim: 16, heads: 2, hidden: 32 },
                Layer::LayerNorm { dim: 16 },
                Layer::Linear { in_features: 16, out_features: 256, bias: true },
            ])
            .unwrap(),
        },
        train: d.clone(),
        validation: d,
        optimizer: Optimizer::AdamW {
            lr: Ppb(3_000_000),
            beta1: Ppb(900_000_000),
            beta2: Ppb(990_000_000),
            eps: Ppb(10),
            weight_decay: Ppb(10_000_000),
        },
        init: Default::default(),
        schedule: Default::default(),
        adapters: Default::default(),
        gradients: Default::default(),
        epochs: 2,
        batch_size: 8,
        checkpoint_interval: 3,
        precision: Default::default(),
    }
}

/// A small image task in IDX files: 96 8×8 images of 3 classes (a bright row, column or diagonal
/// on a noise floor), learned by two convolution blocks and a linear layer with SGD.
pub fn idx_spec(dir: &Path) -> JobSpec {
    let (side, count) = (8u32, 96u32);
    let mut images = vec![0, 0, 8, 3];
    let mut labels = vec![0, 0, 8, 1];
    for header in [&mut images, &mut labels] {
        header.extend(count.to_be_bytes());
    }
    images.extend(side.to_be_bytes());
    images.extend(side.to_be_bytes());
    for i in 0..count {
        let class = i % 3;
        let line = (i / 3) % side;
        for y in 0..side {
            for x in 0..side {
                let on = match class {
                    0 => y == line,
                    1 => x == line,
                    _ => (x + line) % side == y,
                };
                let noise = (i * 31 + y * 7 + x * 13) % 40;
                images.push(if on { 215 + noise as u8 } else { noise as u8 });
            }
        }
        labels.push(class as u8);
    }
    let mut files = Vec::new();
    for (name, bytes) in [("images.idx", &images), ("labels.idx", &labels)] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        files.push(BoundedString::from_str(path.to_str().unwrap()).unwrap());
    }
    let d = Dataset {
        format: DataFormat::Idx { height: side, width: side, classes: 3 },
        files: Bounded::new(files).unwrap(),
        content_root: Hash32(data::content_root([&images[..], &labels[..]])),
        samples: count as u64,
    };
    let conv = |in_channels, out_channels| Layer::Conv2d {
        in_channels,
        out_channels,
        kernel_size: 3,
        stride: 1,
        padding: 1,
        bias: true,
    };
    let pool = Layer::MaxPool2d { kernel_size: 2, stride: 2 };
    JobSpec {
        model: Model {
            layers: Bounded::new(vec![
                conv(1, 4),
                Layer::ReLU,
                pool.clone(),
                conv(4, 8),
                Layer::ReLU,
                pool,
                Layer::Flatten,
                Layer::Linear { in_features: 32, out_features: 3, bias: true },
            ])
            .unwrap(),
        },
        train: d.clone(),
        validation: d,
        optimizer: sgd(),
        init: Default::default(),
        schedule: Default::default(),
        adapters: Default::default(),
        gradients: Default::default(),
        epochs: 2,
        batch_size: 16,
        checkpoint_interval: 4,
        precision: Default::default(),
    }
}
