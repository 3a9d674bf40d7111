//! Decoders for the dataset formats of the spec: IDX (gzip or raw), CSV, byte-level text and
//! pre-tokenized shards.

use std::io::Read;

use super::{Inputs, Samples};
use crate::error::{Error, Result};

fn bad(file: &str, reason: impl Into<String>) -> Error {
    Error::Data { file: file.to_string(), reason: reason.into() }
}

/// Un-gzips `bytes` when they start with the gzip magic, else returns them as they are.
fn maybe_gunzip(file: &str, bytes: &[u8]) -> Result<Vec<u8>> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .take(super::MAX_FILE_BYTES)
            .read_to_end(&mut out)
            .map_err(|e| bad(file, format!("gzip: {e}")))?;
        Ok(out)
    } else {
        Ok(bytes.to_vec())
    }
}

/// Parses an IDX header of unsigned bytes with `rank` dimensions; returns the dimensions and the data.
fn idx_u8(file: &str, bytes: &[u8], rank: u8) -> Result<(Vec<usize>, Vec<u8>)> {
    let header = 4 + 4 * rank as usize;
    if bytes.len() < header {
        return Err(bad(file, "shorter than its IDX header"));
    }
    if bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] != rank {
        return Err(bad(file, format!("not an IDX file of unsigned bytes with {rank} dimensions")));
    }
    let dims: Vec<usize> = (0..rank as usize)
        .map(|i| {
            u32::from_be_bytes(bytes[4 + 4 * i..8 + 4 * i].try_into().unwrap_or([0; 4])) as usize
        })
        .collect();
    let count = dims
        .iter()
        .try_fold(1usize, |a, d| a.checked_mul(*d))
        .ok_or_else(|| bad(file, "dimensions overflow"))?;
    let data = &bytes[header..];
    if data.len() != count {
        return Err(bad(
            file,
            format!("header announces {count} values, file holds {}", data.len()),
        ));
    }
    Ok((dims, data.to_vec()))
}

/// IDX images (`[n, height, width]`, scaled to [0, 1]) and labels (`[n]`, each `< classes`).
pub fn idx(
    images: &(String, Vec<u8>),
    labels: &(String, Vec<u8>),
    height: usize,
    width: usize,
    classes: u32,
) -> Result<Samples> {
    let (img_dims, pixels) = idx_u8(&images.0, &maybe_gunzip(&images.0, &images.1)?, 3)?;
    let (lab_dims, labs) = idx_u8(&labels.0, &maybe_gunzip(&labels.0, &labels.1)?, 1)?;
    if img_dims[1] != height || img_dims[2] != width {
        return Err(bad(
            &images.0,
            format!("images are {}×{}, the spec says {height}×{width}", img_dims[1], img_dims[2]),
        ));
    }
    if img_dims[0] != lab_dims[0] {
        return Err(bad(&labels.0, format!("{} labels for {} images", lab_dims[0], img_dims[0])));
    }
    if let Some(l) = labs.iter().find(|l| **l as u32 >= classes) {
        return Err(bad(&labels.0, format!("label {l} is not below {classes} classes")));
    }
    Ok(Samples {
        sample_shape: vec![1, height, width],
        inputs: Inputs::Float(pixels.iter().map(|p| *p as f32 / 255.0).collect()),
        targets: labs.iter().map(|l| *l as u32).collect(),
        targets_per_sample: 1,
        len: img_dims[0],
    })
}

/// CSV without header: `label,f1,…,f_features` per line; blank lines are skipped.
pub fn csv(file: &(String, Vec<u8>), features: usize, classes: u32) -> Result<Samples> {
    let text = std::str::from_utf8(&file.1).map_err(|_| bad(&file.0, "not UTF-8 text"))?;
    let (mut inputs, mut targets) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let mut fields = line.split(',').map(str::trim);
        let label: u32 = fields.next().and_then(|f| f.parse().ok()).ok_or_else(|| {
            bad(&file.0, format!("line {}: the first column is not a class label", i + 1))
        })?;
        if label >= classes {
            return Err(bad(
                &file.0,
                format!("line {}: label {label} is not below {classes}", i + 1),
            ));
        }
        let before = inputs.len();
        for f in fields {
            let x: f32 = f
                .parse()
                .map_err(|_| bad(&file.0, format!("line {}: {f:?} is not a number", i + 1)))?;
            if !x.is_finite() {
                return Err(bad(&file.0, format!("line {}: non-finite value", i + 1)));
            }
            inputs.push(x);
        }
        if inputs.len() - before != features {
            return Err(bad(
                &file.0,
                format!(
                    "line {}: {} features, the spec says {features}",
                    i + 1,
                    inputs.len() - before
                ),
            ));
        }
        targets.push(label);
    }
    Ok(Samples {
        sample_shape: vec![features],
        len: targets.len(),
        inputs: Inputs::Float(inputs),
        targets,
        targets_per_sample: 1,
    })
}

/// Byte-level text: sample `i` is bytes `[i·seq_len, (i+1)·seq_len)`, its targets the next byte of each.
pub fn text(file: &(String, Vec<u8>), seq_len: usize) -> Samples {
    let bytes = &file.1;
    let len = if bytes.is_empty() { 0 } else { (bytes.len() - 1) / seq_len };
    let mut inputs = Vec::with_capacity(len * seq_len);
    let mut targets = Vec::with_capacity(len * seq_len);
    for i in 0..len {
        let start = i * seq_len;
        inputs.extend(bytes[start..start + seq_len].iter().map(|b| *b as u32));
        targets.extend(bytes[start + 1..start + seq_len + 1].iter().map(|b| *b as u32));
    }
    Samples {
        sample_shape: vec![seq_len],
        inputs: Inputs::Tokens(inputs),
        targets,
        targets_per_sample: seq_len,
        len,
    }
}

/// Pre-tokenized shards: each file a flat array of little-endian ids of `width` bytes, all below
/// `vocab`. A file of `n` tokens gives `⌊(n − 1) / seq_len⌋` samples (windows of `seq_len` and their
/// next tokens, never across files), numbered through the files in order.
pub fn tokens(
    files: &[(String, Vec<u8>)],
    width: ergon_job_spec::TokenWidth,
    vocab: u32,
    seq_len: usize,
) -> Result<Samples> {
    let (mut inputs, mut targets, mut len) = (Vec::new(), Vec::new(), 0);
    for (file, bytes) in files {
        let w = width.bytes();
        if bytes.len() % w != 0 {
            return Err(bad(
                file,
                format!("{} bytes is not a whole number of {w}-byte token ids", bytes.len()),
            ));
        }
        let ids: Vec<u32> = match width {
            ergon_job_spec::TokenWidth::U16 => {
                bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as u32).collect()
            }
            ergon_job_spec::TokenWidth::U32 => bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        };
        if let Some((at, id)) = ids.iter().enumerate().find(|(_, id)| **id >= vocab) {
            return Err(bad(
                file,
                format!("token {at} is id {id}, outside the vocabulary of {vocab}"),
            ));
        }
        let windows = ids.len().saturating_sub(1) / seq_len;
        for i in 0..windows {
            let start = i * seq_len;
            inputs.extend_from_slice(&ids[start..start + seq_len]);
            targets.extend_from_slice(&ids[start + 1..start + seq_len + 1]);
        }
        len += windows;
    }
    Ok(Samples {
        sample_shape: vec![seq_len],
        inputs: Inputs::Tokens(inputs),
        targets,
        targets_per_sample: seq_len,
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_shards_window_per_file_and_refuse_ids_past_the_vocabulary() {
        use ergon_job_spec::TokenWidth;
        let shard = |ids: &[u16]| ids.iter().flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>();
        // 7 tokens: 2 windows of 3; 4 tokens: 1 window; nothing crosses from file a to file b.
        let files = vec![
            ("a".to_string(), shard(&[1, 2, 3, 4, 5, 6, 7])),
            ("b".to_string(), shard(&[10, 11, 12, 13])),
        ];
        let s = tokens(&files, TokenWidth::U16, 50_257, 3).unwrap();
        assert_eq!(s.len, 3);
        let Inputs::Tokens(x) = &s.inputs else { panic!("token inputs") };
        assert_eq!(x, &[1, 2, 3, 4, 5, 6, 10, 11, 12]);
        assert_eq!(s.targets, vec![2, 3, 4, 5, 6, 7, 11, 12, 13]);
        // u32 ids read the same.
        let wide: Vec<u8> = [1u32, 2, 3, 4].iter().flat_map(|i| i.to_le_bytes()).collect();
        let s = tokens(&[("w".into(), wide)], TokenWidth::U32, 5, 3).unwrap();
        assert_eq!(s.targets, vec![2, 3, 4]);

        let err = tokens(&[("c".into(), shard(&[1, 50_257]))], TokenWidth::U16, 50_257, 1);
        assert!(err.unwrap_err().to_string().contains("id 50257, outside the vocabulary"));
        let err = tokens(&[("d".into(), vec![1, 2, 3])], TokenWidth::U16, 10, 1);
        assert!(err.unwrap_err().to_string().contains("not a whole number"));
    }

    fn idx_file(magic_rank: u8, dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut v = vec![0, 0, 8, magic_rank];
        for d in dims {
            v.extend(d.to_be_bytes());
        }
        v.extend(data);
        v
    }

    #[test]
    fn idx_round_trip_raw_and_gzip() {
        let images = idx_file(3, &[2, 2, 2], &[0, 255, 0, 0, 51, 0, 0, 0]);
        let labels = idx_file(1, &[2], &[3, 9]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &images).unwrap();
        let gz = gz.finish().unwrap();
        for img in [images.clone(), gz] {
            let s = idx(&("i".into(), img), &("l".into(), labels.clone()), 2, 2, 10).unwrap();
            assert_eq!(s.len, 2);
            assert_eq!(s.targets, vec![3, 9]);
            let Inputs::Float(x) = s.inputs else { panic!() };
            assert_eq!(x[1], 1.0);
            assert!((x[4] - 0.2).abs() < 1e-6);
        }
    }

    #[test]
    fn idx_errors_are_clear() {
        let images = idx_file(3, &[2, 2, 2], &[0; 8]);
        let labels = idx_file(1, &[2], &[3, 10]);
        let err = idx(&("i".into(), images.clone()), &("l".into(), labels), 2, 2, 10).unwrap_err();
        assert!(err.to_string().contains("label 10"), "{err}");
        let err =
            idx(&("i".into(), images[..10].to_vec()), &("l".into(), vec![]), 2, 2, 10).unwrap_err();
        assert!(err.to_string().contains("i"), "{err}");
        let truncated = idx_file(3, &[2, 2, 2], &[0; 7]);
        let labels = idx_file(1, &[2], &[1, 2]);
        assert!(idx(&("i".into(), truncated), &("l".into(), labels.clone()), 2, 2, 10).is_err());
        let err = idx(&("i".into(), images), &("l".into(), labels), 3, 2, 10).unwrap_err();
        assert!(err.to_string().contains("2×2"), "{err}");
    }

    #[test]
    fn csv_parses_and_rejects_bad_lines() {
        let ok = csv(&("c".into(), b"1,0.5,2\n\n0,1,-3\n".to_vec()), 2, 2).unwrap();
        assert_eq!(ok.len, 2);
        assert_eq!(ok.targets, vec![1, 0]);
        assert!(csv(&("c".into(), b"1,0.5\n".to_vec()), 2, 2).is_err());
        assert!(csv(&("c".into(), b"2,0.5,1\n".to_vec()), 2, 2).is_err());
        assert!(csv(&("c".into(), b"1,x,1\n".to_vec()), 2, 2).is_err());
        assert!(csv(&("c".into(), b"1,NaN,1\n".to_vec()), 2, 2).is_err());
    }

    #[test]
    fn text_windows_and_next_byte_targets() {
        let s = text(&("t".into(), b"abcdefg".to_vec()), 3);
        assert_eq!(s.len, 2);
        let Inputs::Tokens(x) = s.inputs else { panic!() };
        assert_eq!(x, b"abcdef".iter().map(|b| *b as u32).collect::<Vec<_>>());
        assert_eq!(s.targets, b"bcdefg".iter().map(|b| *b as u32).collect::<Vec<_>>());
    }
}
