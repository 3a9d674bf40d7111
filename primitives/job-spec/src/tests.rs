// The hand counts below keep every factor of the formulas, ones and zeros included.
#![allow(clippy::identity_op)]

use super::*;
use alloc::vec;

fn uri(s: &str) -> BoundedString<MAX_URI_LEN> {
    BoundedString::from_str(s).unwrap()
}

fn idx_data(samples: u64) -> Dataset {
    Dataset {
        format: DataFormat::Idx { height: 28, width: 28, classes: 10 },
        files: Bounded::new(vec![uri("/data/images.gz"), uri("https://example.org/labels.gz")])
            .unwrap(),
        content_root: Hash32([7; 32]),
        samples,
    }
}

fn spec(layers: Vec<Layer>, train: Dataset, validation: Dataset) -> JobSpec {
    JobSpec {
        model: Model { layers: Bounded::new(layers).unwrap() },
        init: InitialWeights::Seed,
        train,
        validation,
        optimizer: Optimizer::Sgd {
            lr: Ppb(100_000_000),
            momentum: Ppb(900_000_000),
            weight_decay: Ppb(0),
        },
        schedule: Schedule::Constant,
        adapters: Adapters::None,
        gradients: Default::default(),
        epochs: 1,
        batch_size: 64,
        checkpoint_interval: 100,
        precision: Precision::F32,
    }
}

fn mlp() -> JobSpec {
    spec(
        vec![
            Layer::Flatten,
            Layer::Linear { in_features: 784, out_features: 128, bias: true },
            Layer::ReLU,
            Layer::Linear { in_features: 128, out_features: 10, bias: true },
        ],
        idx_data(60_000),
        idx_data(10_000),
    )
}

fn cnn() -> JobSpec {
    spec(
        vec![
            Layer::Conv2d {
                in_channels: 1,
                out_channels: 8,
                kernel_size: 3,
                stride: 1,
                padding: 1,
                bias: true,
            },
            Layer::ReLU,
            Layer::MaxPool2d { kernel_size: 2, stride: 2 },
            Layer::Flatten,
            Layer::Linear { in_features: 8 * 14 * 14, out_features: 10, bias: true },
        ],
        idx_data(60_000),
        idx_data(10_000),
    )
}

fn text_data(seq_len: u32, samples: u64) -> Dataset {
    Dataset {
        format: DataFormat::Text { seq_len },
        files: Bounded::new(vec![uri("/usr/share/common-licenses/GPL-3")]).unwrap(),
        content_root: Hash32([1; 32]),
        samples,
    }
}

fn char_transformer() -> JobSpec {
    spec(
        vec![
            Layer::Embedding { vocab_size: 256, dim: 32 },
            Layer::PositionalEmbedding { max_len: 32, dim: 32 },
            Layer::TransformerBlock { dim: 32, heads: 4, hidden: 64 },
            Layer::LayerNorm { dim: 32 },
            Layer::Linear { in_features: 32, out_features: 256, bias: true },
        ],
        text_data(32, 1000),
        text_data(32, 100),
    )
}

#[test]
fn mlp_flops_and_parameters_match_the_hand_count() {
    let s = mlp().validate().unwrap();
    // Linear 2·784·128 + 128, ReLU 128, Linear 2·128·10 + 10, cross-entropy 5·10.
    let forward = (2 * 784 * 128 + 128) + 128 + (2 * 128 * 10 + 10) + 5 * 10;
    assert_eq!(forward, 203_580);
    assert_eq!(s.forward_flops_per_sample, forward);
    assert_eq!(s.parameters, 784 * 128 + 128 + 128 * 10 + 10);
    assert_eq!(s.training_flops, 3 * 203_580 * 60_000);
    assert_eq!(s.training_micro_ut(), 3 * 203_580 * 60_000 / 432_000);
    assert_eq!(s.steps_per_epoch, 938); // ceil(60000 / 64)
    assert_eq!(s.total_steps, 938);
    assert_eq!(s.checkpoints, 10 + 1); // steps 100, 200, …, 900, 938, plus C0
}

#[test]
fn cnn_flops_match_the_hand_count() {
    let s = cnn().validate().unwrap();
    let conv = 2 * 1 * 9 * 8 * 28 * 28 + 8 * 28 * 28;
    let relu = 8 * 28 * 28;
    let pool = 8 * 14 * 14 * 4;
    let fc = 2 * 1568 * 10 + 10;
    assert_eq!(s.forward_flops_per_sample, conv + relu + pool + fc + 50);
    assert_eq!(s.parameters, 8 * 9 + 8 + 1568 * 10 + 10);
}

#[test]
fn transformer_flops_match_the_hand_count() {
    let s = char_transformer().validate().unwrap();
    let (t, d, h, hid, v) = (32u128, 32u128, 4u128, 64u128, 256u128);
    let n = t * d;
    let block = 8 * n                      // LN
        + 2 * t * d * 3 * d + 3 * n        // QKV
        + 2 * t * t * d                    // scores
        + t * t * h                        // scaling
        + 5 * t * t * h                    // softmax
        + 2 * t * t * d                    // weighted values
        + 2 * t * d * d + n                // output projection
        + n                                // residual
        + 8 * n                            // LN
        + 2 * t * d * hid + t * hid        // MLP in
        + 8 * t * hid                      // GELU
        + 2 * t * hid * d + n              // MLP out
        + n; // residual
    let forward = 0 + t * d + block + 8 * n + (2 * t * d * v + t * v) + 5 * t * v;
    assert_eq!(s.forward_flops_per_sample, forward);
    let block_params = 4 * d + 3 * d * d + 3 * d + d * d + d + d * hid + hid + hid * d + d;
    assert_eq!(s.parameters as u128, v * d + 32 * d + block_params + 2 * d + d * v + v);
}

#[test]
fn each_layer_kind_costs_its_formula() {
    use Activation::Float;
    let one = |layer: Layer, input: Vec<u32>| shape::infer(&[layer], Float(input)).unwrap();
    assert_eq!(one(Layer::ReLU, vec![3, 5]).2, 15);
    assert_eq!(one(Layer::GELU, vec![3, 5]).2, 8 * 15);
    assert_eq!(one(Layer::LayerNorm { dim: 5 }, vec![3, 5]).2, 8 * 15);
    assert_eq!(one(Layer::Flatten, vec![2, 3, 4]), (Float(vec![24]), 0, 0));
    assert_eq!(
        one(Layer::Linear { in_features: 5, out_features: 7, bias: false }, vec![3, 5]).2,
        2 * 3 * 5 * 7
    );
    assert_eq!(
        one(Layer::MaxPool2d { kernel_size: 3, stride: 2 }, vec![4, 9, 9]).0,
        Float(vec![4, 4, 4])
    );
    let conv = Layer::Conv2d {
        in_channels: 2,
        out_channels: 3,
        kernel_size: 5,
        stride: 2,
        padding: 0,
        bias: false,
    };
    let (out, params, f) = one(conv, vec![2, 11, 11]);
    assert_eq!(out, Float(vec![3, 4, 4]));
    assert_eq!(params, 3 * 2 * 25);
    assert_eq!(f, 2 * 2 * 25 * 3 * 16);
}

#[test]
fn invalid_specs_are_rejected_with_a_reason() {
    let mut s = mlp();
    s.model.layers = Bounded::new(vec![]).unwrap();
    assert_eq!(s.validate(), Err(SpecError::EmptyModel));

    let mut s = mlp();
    s.model.layers = Bounded::new(vec![
        Layer::Flatten,
        Layer::Linear { in_features: 100, out_features: 10, bias: true },
    ])
    .unwrap();
    assert_eq!(s.validate(), Err(SpecError::ShapeMismatch { layer: 1 }));

    let mut s = mlp();
    s.model.layers = Bounded::new(vec![
        Layer::Flatten,
        Layer::Linear { in_features: 784, out_features: 9, bias: true },
    ])
    .unwrap();
    assert_eq!(s.validate(), Err(SpecError::OutputMismatch));

    let mut s = mlp();
    s.train.files = Bounded::new(vec![uri("/a")]).unwrap();
    assert_eq!(s.validate(), Err(SpecError::WrongFileCount));

    let mut s = mlp();
    s.train.files = Bounded::new(vec![uri("ftp://x/a"), uri("/b")]).unwrap();
    assert_eq!(s.validate(), Err(SpecError::BadUri));

    let mut s = mlp();
    s.train.samples = 0;
    assert_eq!(s.validate(), Err(SpecError::NoSamples));

    let mut s = mlp();
    s.batch_size = 0;
    assert_eq!(s.validate(), Err(SpecError::OutOfBounds));

    let mut s = mlp();
    s.checkpoint_interval = 1;
    s.epochs = 10;
    assert_eq!(s.validate(), Err(SpecError::TooManyCheckpoints));

    let mut s = mlp();
    s.optimizer = Optimizer::Sgd { lr: Ppb(0), momentum: Ppb(0), weight_decay: Ppb(0) };
    assert_eq!(s.validate(), Err(SpecError::BadHyperParameter));

    let mut s = mlp();
    s.optimizer = Optimizer::AdamW {
        lr: Ppb(1000),
        beta1: Ppb::ONE,
        beta2: Ppb(999_000_000),
        eps: Ppb(10),
        weight_decay: Ppb(0),
    };
    assert_eq!(s.validate(), Err(SpecError::BadHyperParameter));

    let mut s = mlp();
    s.validation = text_data(32, 10);
    assert_eq!(s.validate(), Err(SpecError::FormatMismatch));

    // Float layers cannot take token input; embeddings cannot take float input.
    let mut s = char_transformer();
    s.model.layers = Bounded::new(vec![Layer::ReLU]).unwrap();
    assert_eq!(s.validate(), Err(SpecError::TokenInputMismatch { layer: 0 }));
    let mut s = mlp();
    s.model.layers = Bounded::new(vec![Layer::Embedding { vocab_size: 256, dim: 4 }]).unwrap();
    assert_eq!(s.validate(), Err(SpecError::TokenInputMismatch { layer: 0 }));

    let mut s = mlp();
    s.model.layers = Bounded::new(vec![
        Layer::Flatten,
        Layer::Linear { in_features: 784, out_features: 1 << 20, bias: true },
        Layer::Linear { in_features: 1 << 20, out_features: 10, bias: true },
    ])
    .unwrap();
    assert_eq!(s.validate(), Err(SpecError::TooManyParameters));
}

#[test]
fn huge_dimensions_never_overflow_or_panic() {
    let mut s = mlp();
    s.train.samples = u64::MAX;
    s.epochs = MAX_EPOCHS;
    s.checkpoint_interval = u32::MAX;
    s.batch_size = MAX_BATCH_SIZE;
    // Either a clean error or a value; never a panic.
    let _ = s.validate();
    let big = Layer::Conv2d {
        in_channels: u32::MAX,
        out_channels: u32::MAX,
        kernel_size: u32::MAX,
        stride: 1,
        padding: u32::MAX,
        bias: true,
    };
    let _ = shape::infer(&[big], Activation::Float(vec![u32::MAX, u32::MAX, u32::MAX]));
    let t = Layer::TransformerBlock { dim: u32::MAX, heads: 1, hidden: u32::MAX };
    let _ = shape::infer(&[t], Activation::Float(vec![u32::MAX, u32::MAX]));
}

/// `u64::MAX` steps with a checkpoint after each: the count of checkpoints (one more, for C0) used to
/// wrap to zero in a release build (the runtime's) and pass the checkpoint limit (issue 34).
#[test]
fn a_checkpoint_count_past_u64_is_refused_not_wrapped() {
    let mut s = mlp();
    s.train.samples = u64::MAX;
    s.epochs = 1;
    s.batch_size = 1;
    s.checkpoint_interval = 1;
    assert_eq!(s.validate().map(|_| ()), Err(SpecError::Overflow));
}

#[test]
fn scale_round_trip_and_oversized_input_rejected() {
    let s = char_transformer();
    let bytes = s.encode();
    assert_eq!(JobSpec::decode(&mut &bytes[..]).unwrap(), s);
    assert!(bytes.len() <= JobSpec::max_encoded_len());
    // 65 layers: one more than MAX_LAYERS.
    let too_many = vec![Layer::ReLU; MAX_LAYERS as usize + 1];
    let mut raw = too_many.encode();
    raw.extend(&bytes[s.model.encode().len()..]);
    assert!(JobSpec::decode(&mut &raw[..]).is_err());
}

#[test]
fn json_round_trip_with_readable_numbers() {
    let s = mlp();
    let json = serde_json::to_string_pretty(&s).unwrap();
    assert!(json.contains("\"lr\": 0.1"), "{json}");
    assert!(json.contains("\"type\": \"Linear\""));
    let back: JobSpec = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);
    let bad = json.replace("\"lr\": 0.1", "\"lr\": -1.0");
    assert!(serde_json::from_str::<JobSpec>(&bad).is_err());
}

/// A test vector for clients: the content root of the files `images` and `labels`, in that order,
/// is SHA-256 over their two digests, each SHA-256 of the file's chunk list (its length as u64le,
/// then the SHA-256 of each 1 MiB chunk).
#[test]
fn content_root_test_vector() {
    use sha2::{Digest, Sha256};
    let digests = [b"images".as_slice(), b"labels"].map(crate::file_digest);
    // By hand: "images" is one chunk of 6 bytes.
    let mut list = 6u64.to_le_bytes().to_vec();
    list.extend_from_slice(&Sha256::digest(b"images"));
    assert_eq!(digests[0], <[u8; 32]>::from(Sha256::digest(&list)));
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(
        hex(&digests[0]),
        "7090b467bf7145fe539c22c26696746098444aca0e7c714b7bfbf58e59c4d496"
    );
    let root = crate::content_root(digests);
    assert_eq!(hex(&root), "bdec996722764e4339831b6a0f39310f8222f3c3df18bc3f75dac8256e853225");
    assert_ne!(crate::content_root([digests[1], digests[0]]), root, "order matters");
}

/// A test vector for chunk lists: a file of 2 MiB + 3 bytes (bytes `i mod 251`) has three chunks,
/// and its chunk list is served at the file's URL with `.chunks` appended to the path.
#[test]
fn chunk_list_test_vector() {
    use crate::chunks::*;
    let file: Vec<u8> = (0..(2 << 20) + 3).map(|i| (i % 251) as u8).collect();
    let list = ChunkList::of(&file);
    assert_eq!((list.len, list.chunks.len()), ((2 << 20) + 3, 3));
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(
        hex(&list.digest()),
        "44b1df5f47fe13fe8c016bbec135f541382a275c29b98edb8b053b9d20133505"
    );
    assert_eq!(ChunkList::parse(&list.encode()), Ok(list.clone()));
    assert_eq!(list.range(2), Some((2 << 20, (2 << 20) + 3)));
    assert_eq!(list.range(3), None);
    // Streamed in odd pieces: the same list.
    let mut hasher = FileHasher::default();
    for piece in file.chunks(700_001) {
        hasher.update(piece);
    }
    assert_eq!(hasher.finish(), list);
    assert_eq!(ChunkList::of(&[]).encode(), 0u64.to_le_bytes().to_vec());
    assert_eq!(
        chunk_list_url("https://d.example/a/train.bin"),
        "https://d.example/a/train.bin.chunks"
    );
    assert_eq!(
        chunk_list_url("https://d.example/train.bin?sig=x#y"),
        "https://d.example/train.bin.chunks?sig=x#y"
    );
}

#[test]
fn a_chunk_list_describes_its_file_exactly() {
    use crate::chunks::*;
    let file: Vec<u8> = (0..(3 << 20) + 10).map(|i| (i % 7) as u8).collect();
    let list = ChunkList::of(&file);
    let mut bad = list.encode();
    bad.pop();
    assert_eq!(ChunkList::parse(&bad), Err(ChunkListError::Malformed));
    assert_eq!(ChunkList::parse(&[1, 2, 3]), Err(ChunkListError::Malformed));
    let mut short = list.encode();
    short.truncate(short.len() - 32);
    assert_eq!(ChunkList::parse(&short), Err(ChunkListError::WrongCount));
    let mut huge = list.encode();
    huge[..8].copy_from_slice(&((4u64 << 30) + 1).to_le_bytes());
    assert_eq!(ChunkList::parse(&huge), Err(ChunkListError::TooLarge));
    // Where a served file first differs from its list.
    assert_eq!(list.first_difference(&file), None);
    let mut changed = file.clone();
    changed[(2 << 20) + 5] ^= 1;
    assert_eq!(list.first_difference(&changed), Some(2));
    assert_eq!(list.first_difference(&file[..(1 << 20)]), Some(1), "cut on a chunk boundary");
    assert_eq!(list.first_difference(&file[..100]), Some(0));
    assert_eq!(list.first_difference(&[file.clone(), vec![1]].concat()), Some(3), "served long");
    assert_eq!(list.first_difference(&[]), Some(0));
}

#[test]
fn a_diverged_bundle_holds_the_checkpoints_before_the_divergence() {
    let mut spec = mlp();
    spec.checkpoint_interval = 4;
    let summary = spec.validate().unwrap();
    // C0 alone until the first checkpoint step is passed, then one more per interval begun.
    let counts: Vec<u64> =
        [0, 1, 4, 5, 8, 9].iter().map(|s| spec.checkpoints_before_divergence(*s)).collect();
    assert_eq!(counts, vec![1, 1, 1, 2, 2, 3]);
    // Diverging at the very end (a non-finite validation loss) keeps all but the final checkpoint.
    assert_eq!(spec.checkpoints_before_divergence(summary.total_steps), summary.checkpoints - 1);
}

fn token_data(files: usize, samples: u64) -> Dataset {
    Dataset {
        format: DataFormat::Tokens { width: TokenWidth::U16, vocab_size: 50_257, seq_len: 64 },
        files: Bounded::new((0..files).map(|i| uri(&format!("/shards/{i}.bin"))).collect())
            .unwrap(),
        content_root: Hash32([2; 32]),
        samples,
    }
}

/// A 2-block GPT-2 on 64 tokens of GPT-2's vocabulary, head tied to the embedding.
fn gpt2() -> JobSpec {
    let (v, d) = (50_257, 64);
    spec(
        vec![
            Layer::Embedding { vocab_size: v, dim: d },
            Layer::PositionalEmbedding { max_len: 128, dim: d },
            Layer::TransformerBlock { dim: d, heads: 4, hidden: 4 * d },
            Layer::TransformerBlock { dim: d, heads: 4, hidden: 4 * d },
            Layer::LayerNorm { dim: d },
            Layer::TiedEmbeddingHead,
        ],
        token_data(40, 10_000),
        token_data(1, 100),
    )
}

#[test]
fn a_gpt2_on_token_shards_costs_its_formula_and_its_head_has_no_parameters_of_its_own() {
    let s = gpt2().validate().unwrap();
    let (t, d, v) = (64u128, 64u128, 50_257u128);
    let block = flops::transformer_block(t, d, 4, 4 * d).unwrap();
    let forward = t * d + 2 * block + 8 * t * d + 2 * t * d * v + 5 * t * v;
    assert_eq!(s.forward_flops_per_sample, forward);
    let block_params = 4 * d + 3 * d * d + 3 * d + d * d + d + 8 * d * d + 4 * d + d;
    assert_eq!(s.parameters as u128, v * d + 128 * d + 2 * block_params + 2 * d);
    // The same model with an untied head has vocab·dim more parameters.
    let mut untied = gpt2();
    let head = Layer::Linear { in_features: 64, out_features: 50_257, bias: false };
    untied.model.layers = Bounded::new(
        untied.model.layers.as_slice().iter().take(5).cloned().chain([head]).collect(),
    )
    .unwrap();
    assert_eq!(untied.validate().unwrap().parameters - s.parameters, 50_257 * 64);
}

#[test]
fn token_shards_take_one_to_max_files_and_ids_must_fit_the_embedding() {
    let mut s = gpt2();
    s.train = token_data(MAX_DATA_FILES as usize, 10_000);
    assert!(s.validate().is_ok());
    assert!(Bounded::<BoundedString<MAX_URI_LEN>, MAX_DATA_FILES>::new(vec![
        uri("/x");
        MAX_DATA_FILES
            as usize
            + 1
    ])
    .is_err());
    // An embedding smaller than the data's vocabulary: some ids would have no row.
    let mut s = gpt2();
    let mut layers = s.model.layers.as_slice().to_vec();
    layers[0] = Layer::Embedding { vocab_size: 50_000, dim: 64 };
    s.model.layers = Bounded::new(layers).unwrap();
    assert_eq!(s.validate(), Err(SpecError::ShapeMismatch { layer: 0 }));
    // u16 ids cannot name a vocabulary past 65,536.
    let mut s = gpt2();
    s.train.format = DataFormat::Tokens { width: TokenWidth::U16, vocab_size: 70_000, seq_len: 64 };
    assert_eq!(s.validate(), Err(SpecError::OutOfBounds));
}

#[test]
fn a_tied_head_needs_a_token_embedding_of_its_width() {
    let mut s = mlp();
    s.model.layers = Bounded::new(vec![Layer::Flatten, Layer::TiedEmbeddingHead]).unwrap();
    assert_eq!(s.validate(), Err(SpecError::ShapeMismatch { layer: 1 }));
}

#[test]
fn hf_gpt2_weights_need_a_gpt2_shaped_model() {
    let weights = |naming| InitialWeights::Safetensors {
        file: uri("https://example.org/gpt2.safetensors"),
        content_root: Hash32([3; 32]),
        naming,
    };
    let mut s = gpt2();
    s.init = weights(WeightNaming::HfGpt2);
    assert!(s.validate().is_ok());
    let mut c = char_transformer();
    c.init = weights(WeightNaming::HfGpt2);
    assert_eq!(c.validate(), Err(SpecError::WeightNamingMismatch), "its head has a bias");
    c.init = weights(WeightNaming::Ergon);
    assert!(c.validate().is_ok());
    let mut m = mlp();
    m.init = weights(WeightNaming::HfGpt2);
    assert_eq!(m.validate(), Err(SpecError::WeightNamingMismatch));
    let mut bad_uri = gpt2();
    bad_uri.init = InitialWeights::Safetensors {
        file: uri("ftp://x/w"),
        content_root: Hash32([3; 32]),
        naming: WeightNaming::HfGpt2,
    };
    assert_eq!(bad_uri.validate(), Err(SpecError::BadUri));
    // The weights file is one of the files the owner commits to.
    assert_eq!(s.committed_files().len(), 3);
    assert_eq!(gpt2().committed_files().len(), 2);
}

#[test]
fn a_schedule_longer_than_the_run_is_refused_by_validate() {
    let mut s = gpt2(); // 157 steps
    s.schedule = Schedule::WarmupCosine { warmup_steps: 157, min_ratio: Ppb(0) };
    assert_eq!(s.validate(), Err(SpecError::ScheduleTooLong));
    s.schedule = Schedule::WarmupCosine { warmup_steps: 20, min_ratio: Ppb(100_000_000) };
    assert!(s.validate().is_ok());
}

/// A v1 job, as stored before v2, decodes as [`v1::JobSpec`] and upgrades to the same job with
/// seeded weights and a constant rate; a v1 JSON spec reads as v2 directly.
#[test]
fn v1_specs_upgrade_in_scale_and_read_in_json() {
    let v2 = char_transformer();
    let v1 = v1::JobSpec {
        model: v2.model.clone(),
        train: v2.train.clone(),
        validation: v2.validation.clone(),
        optimizer: v2.optimizer.clone(),
        epochs: v2.epochs,
        batch_size: v2.batch_size,
        checkpoint_interval: v2.checkpoint_interval,
    };
    let stored = v1.encode();
    assert!(JobSpec::decode(&mut &stored[..]).is_err(), "v2 does not read v1 bytes");
    assert_eq!(v1::JobSpec::decode(&mut &stored[..]).unwrap().upgrade().upgrade(), v2);

    let mut json: serde_json::Value = serde_json::to_value(&v2).unwrap();
    let fields = json.as_object_mut().unwrap();
    fields.remove("init");
    fields.remove("schedule");
    fields.remove("adapters");
    assert_eq!(serde_json::from_value::<JobSpec>(json).unwrap(), v2);
}

/// A v2 job, as stored before `precision`, decodes as [`v2::JobSpec`] and upgrades to the same job
/// in f32; a v2 JSON spec reads as the current one (f32).
#[test]
fn v2_specs_upgrade_in_scale_and_read_in_json() {
    let now = char_transformer();
    let v2 = v2::JobSpec {
        model: now.model.clone(),
        init: now.init.clone(),
        train: now.train.clone(),
        validation: now.validation.clone(),
        optimizer: now.optimizer.clone(),
        schedule: now.schedule,
        adapters: now.adapters,
        gradients: now.gradients,
        epochs: now.epochs,
        batch_size: now.batch_size,
        checkpoint_interval: now.checkpoint_interval,
    };
    let stored = v2.encode();
    assert!(JobSpec::decode(&mut &stored[..]).is_err(), "v3 does not read v2 bytes");
    assert_eq!(v2::JobSpec::decode(&mut &stored[..]).unwrap().upgrade(), now);

    let mut json: serde_json::Value = serde_json::to_value(&now).unwrap();
    json.as_object_mut().unwrap().remove("precision");
    assert_eq!(serde_json::from_value::<JobSpec>(json).unwrap(), now);
}

/// A bf16 job's precision is named in JSON and SCALE, costs the FLOPs of its f32 twin (a FLOP is
/// counted, not priced by the arithmetic), and replays within its own device class only.
#[test]
fn bf16_mixed_is_named_counted_like_f32_and_replays_within_its_class() {
    let f32 = gpt2();
    let mut bf16 = gpt2();
    bf16.precision = Precision::Bf16Mixed;
    let json = serde_json::to_string(&bf16).unwrap();
    assert!(json.contains(r#""precision":"Bf16Mixed""#), "{json}");
    assert_eq!(serde_json::from_str::<JobSpec>(&json).unwrap(), bf16);
    assert_eq!(JobSpec::decode(&mut &bf16.encode()[..]).unwrap(), bf16);
    assert_eq!(bf16.validate(), f32.validate());
    assert!(f32.replays_across_devices());
    assert!(!bf16.replays_across_devices());
    assert_eq!((Precision::F32.name(), Precision::Bf16Mixed.name()), ("f32", "bf16-mixed"));
}

#[test]
fn v2_json_names_its_new_parts() {
    let mut s = gpt2();
    s.init = InitialWeights::Safetensors {
        file: uri("https://example.org/gpt2.safetensors"),
        content_root: Hash32([3; 32]),
        naming: WeightNaming::HfGpt2,
    };
    s.schedule = Schedule::WarmupCosine { warmup_steps: 20, min_ratio: Ppb(100_000_000) };
    let json = serde_json::to_string(&s).unwrap();
    for part in [
        r#""init":{"type":"Safetensors","file":"https://example.org/gpt2.safetensors""#,
        r#""naming":"HfGpt2""#,
        r#""schedule":{"type":"WarmupCosine","warmup_steps":20,"min_ratio":0.1}"#,
        r#""format":{"type":"Tokens","width":"U16","vocab_size":50257,"seq_len":64}"#,
        r#"{"type":"TiedEmbeddingHead"}"#,
    ] {
        assert!(json.contains(part), "{part} in {json}");
    }
    assert_eq!(serde_json::from_str::<JobSpec>(&json).unwrap(), s);
}

/// A 2-block Llama (width 32, 4 query heads sharing 2 key/value heads, SwiGLU 64) on 16 tokens.
fn llama(head: Layer) -> JobSpec {
    let block =
        Layer::LlamaBlock { dim: 32, heads: 4, kv_heads: 2, hidden: 64, rope_theta: 10_000 };
    let data = |files| Dataset {
        format: DataFormat::Tokens { width: TokenWidth::U16, vocab_size: 97, seq_len: 16 },
        ..token_data(files, 1_000)
    };
    spec(
        vec![
            Layer::Embedding { vocab_size: 97, dim: 32 },
            block.clone(),
            block,
            Layer::RMSNorm { dim: 32 },
            head,
        ],
        data(3),
        data(1),
    )
}

#[test]
fn a_llama_with_grouped_query_attention_costs_its_hand_count() {
    let s =
        llama(Layer::Linear { in_features: 32, out_features: 97, bias: false }).validate().unwrap();
    let (t, d, h, kv, hid, v) = (16u128, 32u128, 4u128, 2u128, 64u128, 97u128);
    let (n, kvw) = (t * d, kv * d / h); // key/value width 16
    let block = 4 * n                          // RMSNorm
        + 2 * t * d * d                        // Q
        + 2 * (2 * t * d * kvw)                // K, V
        + 3 * (n + t * kvw)                    // RoPE on Q and K
        + 2 * t * t * d + t * t * h + 5 * t * t * h + 2 * t * t * d // attention
        + 2 * t * d * d                        // O
        + n                                    // residual
        + 4 * n                                // RMSNorm
        + 2 * (2 * t * d * hid)                // gate, up
        + 4 * t * hid + t * hid                // SiLU, product
        + 2 * t * hid * d                      // down
        + n; // residual
    let forward = 0 + 2 * block + 4 * n + 2 * t * d * v + 5 * t * v;
    assert_eq!(s.forward_flops_per_sample, forward);
    let block_params = 2 * d + d * d + 2 * d * kvw + d * d + 3 * d * hid;
    assert_eq!(s.parameters as u128, v * d + 2 * block_params + d + d * v);
}

#[test]
fn llama_blocks_need_whole_even_heads_in_whole_groups_and_hf_llama_weights_a_llama_shape() {
    let bad = |block| {
        let mut s = llama(Layer::TiedEmbeddingHead);
        let mut layers = s.model.layers.as_slice().to_vec();
        layers[1] = block;
        s.model.layers = Bounded::new(layers).unwrap();
        s.validate()
    };
    let block = |heads, kv_heads| Layer::LlamaBlock {
        dim: 32,
        heads,
        kv_heads,
        hidden: 64,
        rope_theta: 10_000,
    };
    assert!(bad(block(4, 4)).is_ok(), "multi-head attention is the kv_heads = heads case");
    assert_eq!(bad(block(4, 3)), Err(SpecError::ShapeMismatch { layer: 1 }), "groups of heads");
    assert_eq!(bad(block(32, 32)), Err(SpecError::ShapeMismatch { layer: 1 }), "odd head width 1");
    assert_eq!(bad(block(4, 0)), Err(SpecError::OutOfBounds));

    let weights = |naming| InitialWeights::Safetensors {
        file: uri("https://example.org/llama.safetensors"),
        content_root: Hash32([4; 32]),
        naming,
    };
    let mut s = llama(Layer::TiedEmbeddingHead);
    s.init = weights(WeightNaming::HfLlama);
    assert!(s.validate().is_ok());
    s.init = weights(WeightNaming::HfGpt2);
    assert_eq!(s.validate(), Err(SpecError::WeightNamingMismatch));
    let mut g = gpt2();
    g.init = weights(WeightNaming::HfLlama);
    assert_eq!(g.validate(), Err(SpecError::WeightNamingMismatch));
}

#[test]
fn lora_trains_only_its_adapters_and_costs_two_forwards_plus_theirs() {
    let base = InitialWeights::Safetensors {
        file: uri("https://example.org/llama.safetensors"),
        content_root: Hash32([4; 32]),
        naming: WeightNaming::HfLlama,
    };
    let mut full = llama(Layer::TiedEmbeddingHead);
    full.init = base.clone();
    let full_summary = full.validate().unwrap();
    let mut s = full.clone();
    s.adapters = Adapters::Lora { rank: 4, alpha: 8, attention: true, mlp: false };
    let lora = s.validate().unwrap();
    // Per block: q 32→32, k 32→16, v 32→16, o 32→32 at rank 4.
    let (t, r) = (16u128, 4u128);
    let sides = [(32u128, 32u128), (32, 16), (32, 16), (32, 32)];
    let params: u128 = 2 * sides.iter().map(|(i, o)| r * (i + o)).sum::<u128>();
    let adapter_fwd: u128 =
        2 * sides.iter().map(|(i, o)| 2 * t * r * (i + o) + 2 * t * o).sum::<u128>();
    assert_eq!(lora.parameters as u128, params);
    assert_eq!(lora.frozen_parameters, full_summary.parameters);
    assert_eq!(lora.forward_flops_per_sample, full_summary.forward_flops_per_sample + adapter_fwd);
    let per_sample = 2 * lora.forward_flops_per_sample + adapter_fwd;
    assert_eq!(lora.training_flops, per_sample * s.train.samples as u128 * s.epochs as u128);
    assert!(lora.training_flops < full_summary.training_flops, "cheaper than full training");

    // Refusals: no base to freeze, rank 0 or wider than the narrowest adapted side (16), alpha 0,
    // nothing to adapt.
    let bad = |adapters, init: &InitialWeights| {
        let mut x = full.clone();
        x.adapters = adapters;
        x.init = init.clone();
        x.validate()
    };
    let lora = |rank, alpha, attention, mlp| Adapters::Lora { rank, alpha, attention, mlp };
    assert_eq!(bad(lora(4, 8, true, false), &InitialWeights::Seed), Err(SpecError::BadAdapters));
    assert_eq!(bad(lora(0, 8, true, false), &base), Err(SpecError::BadAdapters));
    assert_eq!(bad(lora(17, 8, true, false), &base), Err(SpecError::BadAdapters));
    assert!(bad(lora(16, 8, true, true), &base).is_ok());
    assert_eq!(bad(lora(4, 0, true, false), &base), Err(SpecError::BadAdapters));
    assert_eq!(bad(lora(4, 8, false, false), &base), Err(SpecError::BadAdapters));
    let json = serde_json::to_string(&s).unwrap();
    assert!(
        json.contains(
            r#""adapters":{"type":"Lora","rank":4,"alpha":8,"attention":true,"mlp":false}"#
        ),
        "{json}"
    );
}

/// Accumulation, clipping and the decay scope: defaults that change nothing, refusals of what
/// cannot be run, readable JSON, the same work.
#[test]
fn gradients_accumulate_clip_and_scope_decay() {
    let base = mlp();
    assert_eq!(base.gradients, Gradients::default());
    assert_eq!(base.micro_batch_size(), 64);
    let with = |micro_batches, clip_norm| {
        let mut s = base.clone();
        s.gradients = Gradients { micro_batches, clip_norm, decay: DecayScope::Matrices };
        s
    };
    // Accumulation does not change the work: the same samples through the same passes.
    let accumulated = with(4, Some(Ppb::ONE));
    assert_eq!(accumulated.micro_batch_size(), 16);
    assert_eq!(
        accumulated.validate().unwrap().training_flops,
        base.validate().unwrap().training_flops
    );
    assert!(with(64, None).validate().is_ok());
    // Refusals: no micro-batch, one that does not divide the batch, a zero clipping norm.
    assert_eq!(with(0, None).validate(), Err(SpecError::BadGradients));
    assert_eq!(with(3, None).validate(), Err(SpecError::BadGradients));
    assert_eq!(with(128, None).validate(), Err(SpecError::BadGradients));
    assert_eq!(with(1, Some(Ppb(0))).validate(), Err(SpecError::BadGradients));

    let json = serde_json::to_string(&accumulated).unwrap();
    assert!(
        json.contains(r#""gradients":{"micro_batches":4,"clip_norm":1.0,"decay":"Matrices"}"#),
        "{json}"
    );
    // Optional in JSON, field by field.
    let mut value: serde_json::Value = serde_json::to_value(&base).unwrap();
    value.as_object_mut().unwrap().remove("gradients");
    assert_eq!(serde_json::from_value::<JobSpec>(value.clone()).unwrap(), base);
    value["gradients"] = serde_json::json!({ "clip_norm": 0.5 });
    let read: JobSpec = serde_json::from_value(value).unwrap();
    assert_eq!(
        read.gradients,
        Gradients { micro_batches: 1, clip_norm: Some(Ppb(500_000_000)), decay: DecayScope::All }
    );
}
