//! Text to token shards (`ergon-worker tokenize`): documents read from plain-text, JSONL or parquet
//! files, encoded with a Hugging Face `tokenizer.json` (the `tokenizers` crate: the same code
//! `transformers` runs), written as flat little-endian id arrays — the spec's
//! [`DataFormat::Tokens`] — and described as the dataset block a spec names (files, content root,
//! sample count). Nothing is fetched: the tokenizer is a local file.

use std::path::{Path, PathBuf};

use ergon_job_spec::{
    Bounded, BoundedString, DataFormat, Dataset, Hash32, TokenWidth, MAX_DATA_FILES,
};

use crate::error::{io, Error, Result};

/// How [`tokenize`] cuts and describes the shards.
#[derive(Clone, Debug)]
pub struct TokenizeOptions {
    /// A token written after every document, by name (GPT-2's `<|endoftext|>`), if any.
    pub separator: Option<String>,
    /// Most tokens per shard file.
    pub shard_tokens: usize,
    /// The context length the dataset block names (its samples are counted for it).
    pub seq_len: u32,
}

fn bad(file: &Path, reason: impl Into<String>) -> Error {
    Error::Data { file: file.display().to_string(), reason: reason.into() }
}

/// The documents of `path`: one per line of a `.jsonl` file (its `"text"` field), one per row of a
/// `.parquet` file (its `"text"` column), else the whole file. Text must be UTF-8.
pub fn documents(path: &Path) -> Result<Vec<String>> {
    let extension = path.extension().and_then(|e| e.to_str());
    if extension == Some("parquet") {
        return parquet_documents(path);
    }
    let bytes = std::fs::read(path).map_err(io("reading", path))?;
    let text = String::from_utf8(bytes).map_err(|e| bad(path, format!("not UTF-8: {e}")))?;
    match extension {
        Some("jsonl") => text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| {
                let value: serde_json::Value = serde_json::from_str(line)
                    .map_err(|e| bad(path, format!("line {}: {e}", i + 1)))?;
                value["text"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad(path, format!("line {}: no \"text\" string", i + 1)))
            })
            .collect(),
        _ => Ok(vec![text]),
    }
}

/// The `"text"` column of a parquet file (as Hugging Face datasets ship them: any row groups,
/// snappy, zstd, gzip or lz4 pages), one document per row, only that column read. A missing
/// column, a row whose text is null or not a string, and a file that is not parquet are errors
/// naming the file (and the row).
fn parquet_documents(path: &Path) -> Result<Vec<String>> {
    use parquet::{
        file::reader::{FileReader, SerializedFileReader},
        record::Field,
        schema::types::Type,
    };
    let file = std::fs::File::open(path).map_err(io("opening", path))?;
    let reader = SerializedFileReader::new(file)
        .map_err(|e| bad(path, format!("not a parquet file: {e}")))?;
    let root = reader.metadata().file_metadata().schema_descr().root_schema().clone();
    let text = root
        .get_fields()
        .iter()
        .find(|f| f.name() == "text")
        .ok_or_else(|| bad(path, "no \"text\" column"))?
        .clone();
    let projection = Type::group_type_builder(root.name())
        .with_fields(vec![text])
        .build()
        .map_err(|e| bad(path, format!("cannot select the \"text\" column: {e}")))?;
    let rows = reader
        .get_row_iter(Some(projection))
        .map_err(|e| bad(path, format!("cannot read the \"text\" column: {e}")))?;
    let mut docs = Vec::new();
    for (i, row) in rows.enumerate() {
        let row = row.map_err(|e| bad(path, format!("row {i}: {e}")))?;
        match row.get_column_iter().next().map(|(_, field)| field) {
            Some(Field::Str(s)) => docs.push(s.clone()),
            Some(Field::Bytes(b)) => docs.push(
                String::from_utf8(b.data().to_vec())
                    .map_err(|e| bad(path, format!("row {i}: text not UTF-8: {e}")))?,
            ),
            other => {
                return Err(bad(path, format!("row {i}: the text is not a string ({other:?})")));
            }
        }
    }
    Ok(docs)
}

/// Encodes the documents of `inputs` with the tokenizer at `tokenizer` into shards in `out`
/// (`shard-00000.bin`, …) and returns the dataset block for them.
pub fn tokenize(
    tokenizer: &Path,
    inputs: &[PathBuf],
    out: &Path,
    opts: &TokenizeOptions,
) -> Result<Dataset> {
    let tok = tokenizers::Tokenizer::from_file(tokenizer)
        .map_err(|e| bad(tokenizer, format!("not a tokenizer.json: {e}")))?;
    let vocab = tok.get_vocab_size(true) as u32;
    let separator = match &opts.separator {
        None => None,
        Some(name) => Some(
            tok.token_to_id(name)
                .ok_or_else(|| bad(tokenizer, format!("no token {name:?} in the vocabulary")))?,
        ),
    };
    if opts.seq_len == 0 || opts.shard_tokens <= opts.seq_len as usize {
        return Err(bad(out, "a shard must hold more tokens than one sample (seq_len)"));
    }
    let width = if vocab <= 1 << 16 { TokenWidth::U16 } else { TokenWidth::U32 };
    std::fs::create_dir_all(out).map_err(io("creating", out))?;
    let mut ids: Vec<u32> = Vec::new();
    for input in inputs {
        let docs = documents(input)?;
        let encoded = tok
            .encode_batch(docs, false)
            .map_err(|e| bad(input, format!("cannot tokenize: {e}")))?;
        for doc in encoded {
            ids.extend_from_slice(doc.get_ids());
            ids.extend(separator);
        }
    }
    let (mut files, mut digests, mut samples) = (Vec::new(), Vec::new(), 0u64);
    for (i, shard) in ids.chunks(opts.shard_tokens).enumerate() {
        if i == MAX_DATA_FILES as usize {
            return Err(bad(
                out,
                format!("more than {MAX_DATA_FILES} shards: raise the tokens per shard"),
            ));
        }
        let bytes: Vec<u8> = match width {
            TokenWidth::U16 => shard.iter().flat_map(|id| (*id as u16).to_le_bytes()).collect(),
            TokenWidth::U32 => shard.iter().flat_map(|id| id.to_le_bytes()).collect(),
        };
        let path = out.join(format!("shard-{i:05}.bin"));
        std::fs::write(&path, &bytes).map_err(io("writing", &path))?;
        // The shard's chunk list beside it: served with it, so validators can check it by parts.
        digests.push(super::write_chunk_list(&path, &bytes)?);
        samples += (shard.len().saturating_sub(1) / opts.seq_len as usize) as u64;
        let name = path.to_str().ok_or_else(|| bad(&path, "the path is not UTF-8"))?;
        files.push(
            BoundedString::from_str(name)
                .ok_or_else(|| bad(&path, "the path is too long for a spec"))?,
        );
    }
    Ok(Dataset {
        format: DataFormat::Tokens { width, vocab_size: vocab, seq_len: opts.seq_len },
        files: Bounded::new(files).map_err(|_| bad(out, "too many shards"))?,
        content_root: Hash32(ergon_job_spec::content_root(digests)),
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_documents_need_a_text_field_and_bad_parquet_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let jsonl = dir.path().join("d.jsonl");
        std::fs::write(&jsonl, "{\"text\": \"one\"}\n\n{\"text\": \"two\"}\n").unwrap();
        assert_eq!(documents(&jsonl).unwrap(), vec!["one", "two"]);
        std::fs::write(&jsonl, "{\"text\": \"one\"}\n{\"body\": 2}\n").unwrap();
        assert!(documents(&jsonl).unwrap_err().to_string().contains("line 2: no \"text\""));
        let parquet = dir.path().join("d.parquet");
        std::fs::write(&parquet, b"PAR1").unwrap();
        assert!(documents(&parquet).unwrap_err().to_string().contains("not a parquet file"));
    }

    /// A parquet file written by the parquet crate: the `"text"` column row by row, across row
    /// groups; a file without that column or with a null text is refused, naming the row.
    #[test]
    fn parquet_rows_are_documents() {
        use parquet::{
            data_type::{ByteArray, ByteArrayType, Int64Type},
            file::{properties::WriterProperties, writer::SerializedFileWriter},
            schema::parser::parse_message_type,
        };
        use std::sync::Arc;

        fn write(path: &Path, schema: &str, groups: &[&[Option<&str>]]) {
            let schema = Arc::new(parse_message_type(schema).unwrap());
            let props = Arc::new(WriterProperties::builder().build());
            let file = std::fs::File::create(path).unwrap();
            let mut writer = SerializedFileWriter::new(file, schema, props).unwrap();
            for group in groups {
                let mut rg = writer.next_row_group().unwrap();
                // The schemas below list `id`, then the text column.
                let mut index = 0;
                while let Some(mut col) = rg.next_column().unwrap() {
                    let first = index == 0;
                    index += 1;
                    let present: Vec<ByteArray> =
                        group.iter().flatten().map(|t| ByteArray::from(*t)).collect();
                    let levels: Vec<i16> = group.iter().map(|t| t.is_some() as i16).collect();
                    if first {
                        let ids: Vec<i64> = (0..group.len() as i64).collect();
                        col.typed::<Int64Type>().write_batch(&ids, None, None).unwrap();
                    } else {
                        col.typed::<ByteArrayType>()
                            .write_batch(&present, Some(&levels), None)
                            .unwrap();
                    }
                    col.close().unwrap();
                }
                rg.close().unwrap();
            }
            writer.close().unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let schema = "message m { required int64 id; optional binary text (UTF8); }";
        let good = dir.path().join("good.parquet");
        write(&good, schema, &[&[Some("first"), Some("second")], &[Some("third ünï")]]);
        assert_eq!(documents(&good).unwrap(), vec!["first", "second", "third ünï"]);

        let null = dir.path().join("null.parquet");
        write(&null, schema, &[&[Some("first"), None]]);
        let err = documents(&null).unwrap_err().to_string();
        assert!(err.contains("row 1: the text is not a string"), "{err}");

        let other = dir.path().join("other.parquet");
        write(
            &other,
            "message m { required int64 id; optional binary body (UTF8); }",
            &[&[Some("x")]],
        );
        let err = documents(&other).unwrap_err().to_string();
        assert!(err.contains("no \"text\" column"), "{err}");
    }
}
