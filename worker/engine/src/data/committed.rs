//! Fetching a committed file set (a dataset's files, a weights file) and, when it is not served as
//! committed, finding where: the first chunk that cannot be fetched or differs from its file's
//! chunk list ([`ergon_job_spec::chunks`]). That chunk is what a verifier that cannot load the data
//! names when it abstains, and what the validators' data check then fetches.

use ergon_job_spec::{
    chunks::{chunk_list_url, ChunkList, MAX_CHUNK_LIST_BYTES},
    BoundedString, Hash32, MAX_URI_LEN,
};
use sha2::{Digest, Sha256};

use super::{bundle_time_limit, fetch, fetch_at_most, fetch_range, hex, is_http};
use crate::error::{Error, Result};

/// The names of a spec's committed file sets in errors, in
/// [`ergon_job_spec::JobSpec::committed_files`] order (a [`ergon_job_spec::DataGap`]'s `set`).
pub const SET_NAMES: [&str; 3] = ["training data", "validation data", "initial weights"];

/// Fetches a committed set of files and checks that their digests give `root` before a byte is
/// parsed: each file's URI and bytes, in order. `what` names the set in errors. When the files
/// are not what was committed and all of them are http(s) URLs, their chunk lists locate the
/// problem ([`Error::DataGap`]); a file whose whole download failed but whose every chunk is
/// served by byte range is read that way.
pub fn fetch_committed(
    uris: &[BoundedString<MAX_URI_LEN>],
    root: &Hash32,
    what: &'static str,
) -> Result<Vec<(String, Vec<u8>)>> {
    let mut names = Vec::with_capacity(uris.len());
    for uri in uris {
        let name = uri.as_str().ok_or_else(|| Error::Data {
            file: uri.to_string_lossy(),
            reason: "the URI is not UTF-8".into(),
        })?;
        names.push(name.to_string());
    }
    let http = names.iter().all(|uri| is_http(uri));
    let mut fetched = Vec::with_capacity(names.len());
    for uri in &names {
        match fetch(uri) {
            Ok(bytes) => fetched.push(Some(bytes)),
            // A path, or a set not all over http(s): no chunk lists to locate anything with.
            Err(e) if !http => return Err(e),
            Err(_) => fetched.push(None),
        }
    }
    if fetched.iter().all(Option::is_some) {
        let actual = ergon_job_spec::content_root(
            fetched.iter().flatten().map(|bytes| ergon_job_spec::file_digest(bytes)),
        );
        if actual == root.0 {
            return Ok(names.into_iter().zip(fetched.into_iter().flatten()).collect());
        }
        if !http {
            return Err(Error::ContentRoot { what, expected: hex(&root.0), actual: hex(&actual) });
        }
    }
    locate(&names, fetched, root, what)
}

/// Writes the chunk list of the file at `path` (whose bytes are `bytes`) beside it, at
/// `<path>.chunks` — what the owner serves with the file ([`chunk_list_url`]) — and returns the
/// file's digest.
pub fn write_chunk_list(path: &std::path::Path, bytes: &[u8]) -> Result<[u8; 32]> {
    let list = ChunkList::of(bytes);
    let mut name = path.as_os_str().to_owned();
    name.push(ergon_job_spec::chunks::CHUNK_LIST_SUFFIX);
    let out = std::path::PathBuf::from(name);
    std::fs::write(&out, list.encode()).map_err(crate::error::io("writing", &out))?;
    Ok(list.digest())
}

/// What [`check_served`] read of a committed file set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// Files in the set.
    pub files: usize,
    /// Their chunks.
    pub chunks: u64,
    /// Chunks fetched by byte range and checked against their hashes.
    pub chunks_checked: u64,
    /// Bytes of the files.
    pub bytes: u64,
}

/// Checks a committed file set the way the validators' data check reads it, without downloading
/// it: for http(s) files, each chunk list (which must give `root`) and `samples` chunks of each
/// file by byte range (the first, the last, and evenly spaced ones between); local files are read
/// and hashed. What an owner runs before posting (`ergon-worker check --data`): data whose chunk
/// lists are not served is found unavailable by the validators.
pub fn check_served(
    uris: &[BoundedString<MAX_URI_LEN>],
    root: &Hash32,
    what: &'static str,
    samples: u32,
) -> Result<Served> {
    let gap = |gap, reason: String| Error::DataGap { what, gap, reason };
    let names = uris.iter().map(|u| u.to_string_lossy()).collect::<Vec<_>>();
    let mut served = Served { files: names.len(), ..Served::default() };
    let mut digests = Vec::with_capacity(names.len());
    let mut lists = Vec::new();
    for uri in &names {
        let list = if is_http(uri) {
            let url = chunk_list_url(uri);
            let bytes = fetch_at_most(&url, MAX_CHUNK_LIST_BYTES as u64)
                .map_err(|e| gap(None, format!("its chunk list: {e}")))?;
            ChunkList::parse(&bytes)
                .map_err(|e| gap(None, format!("{url} is not a chunk list ({e:?})")))?
        } else {
            ChunkList::of(&fetch(uri)?)
        };
        served.chunks += list.chunks.len() as u64;
        served.bytes += list.len;
        digests.push(list.digest());
        lists.push((uri, list));
    }
    let actual = ergon_job_spec::content_root(digests);
    if actual != root.0 {
        return Err(Error::ContentRoot { what, expected: hex(&root.0), actual: hex(&actual) });
    }
    for (index, (uri, list)) in lists.iter().enumerate().filter(|(_, (uri, _))| is_http(uri)) {
        let count = list.chunks.len() as u64;
        let mut picks: Vec<u32> = (0..u64::from(samples.max(2)))
            .map(|i| (i * count.saturating_sub(1) / u64::from(samples.max(2) - 1)) as u32)
            .collect();
        picks.dedup();
        // An empty file has no chunk to fetch.
        for chunk in picks.into_iter().filter(|c| u64::from(*c) < count) {
            fetch_chunk(uri, list, chunk).map_err(|why| gap(Some((index as u8, chunk)), why))?;
            served.chunks_checked += 1;
        }
    }
    Ok(served)
}

/// Holds the set's chunk lists to `root`, then each file to its list: a file `fetched` whole and
/// matching is kept, any other is read by byte ranges from its first differing chunk on. The
/// files, or the first gap.
fn locate(
    uris: &[String],
    fetched: Vec<Option<Vec<u8>>>,
    root: &Hash32,
    what: &'static str,
) -> Result<Vec<(String, Vec<u8>)>> {
    let gap = |gap, reason: String| Error::DataGap { what, gap, reason };
    let mut lists = Vec::with_capacity(uris.len());
    for uri in uris {
        let url = chunk_list_url(uri);
        let bytes = fetch_at_most(&url, MAX_CHUNK_LIST_BYTES as u64)
            .map_err(|e| gap(None, format!("its chunk list: {e}")))?;
        let list = ChunkList::parse(&bytes)
            .map_err(|e| gap(None, format!("{url} is not a chunk list ({e:?})")))?;
        lists.push(list);
    }
    if ergon_job_spec::content_root(lists.iter().map(ChunkList::digest)) != root.0 {
        return Err(gap(None, "its chunk lists do not give the content root".into()));
    }
    let mut files = Vec::with_capacity(uris.len());
    for (index, ((uri, list), bytes)) in uris.iter().zip(&lists).zip(fetched).enumerate() {
        let first_bad = match &bytes {
            Some(bytes) => list.first_difference(bytes),
            None => Some(0),
        };
        let bytes = match (first_bad, bytes) {
            (None, Some(bytes)) => bytes,
            (from, bytes) => {
                let mut kept = bytes.unwrap_or_default();
                let from = from.unwrap_or(0);
                kept.truncate(
                    (u64::from(from) * ergon_job_spec::chunks::DATA_CHUNK_BYTES) as usize,
                );
                by_chunks(uri, list, kept, from)
                    .map_err(|(chunk, reason)| gap(Some((index as u8, chunk)), reason))?
            }
        };
        files.push((uri.clone(), bytes));
    }
    Ok(files)
}

/// Reads `uri` from chunk `from` on by byte ranges onto `kept` (its chunks before `from`), each
/// chunk checked against `list`: the file, or the first chunk that cannot be fetched or differs,
/// and why.
fn by_chunks(
    uri: &str,
    list: &ChunkList,
    mut kept: Vec<u8>,
    from: u32,
) -> std::result::Result<Vec<u8>, (u32, String)> {
    for chunk in from..list.chunks.len() as u32 {
        kept.extend_from_slice(&fetch_chunk(uri, list, chunk).map_err(|why| (chunk, why))?);
    }
    Ok(kept)
}

/// Chunk `chunk` of the file at `uri`, by byte range, checked against its hash in `list`; or why
/// not.
fn fetch_chunk(uri: &str, list: &ChunkList, chunk: u32) -> std::result::Result<Vec<u8>, String> {
    let (start, end) = list.range(chunk).ok_or_else(|| format!("the file has no chunk {chunk}"))?;
    let bytes = fetch_range(uri, (start, end), bundle_time_limit(end - start))
        .map_err(|e| e.to_string())?;
    if <[u8; 32]>::from(Sha256::digest(&bytes)) != list.chunks[chunk as usize] {
        return Err(format!("bytes {start}..{end} differ from the chunk list's hash"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use std::{
        collections::HashMap,
        io::{BufRead, BufReader, Write},
        net::TcpListener,
    };

    use ergon_job_spec::chunks::DATA_CHUNK_BYTES;

    use super::*;

    /// How the test server serves a file.
    #[derive(Clone, Default)]
    struct Serving {
        /// Its bytes.
        bytes: Vec<u8>,
        /// Whether a plain GET gets the file (else 404; byte ranges are still served).
        whole: bool,
        /// A chunk answered 404 when asked for by range (and cut off a whole GET there).
        withheld: Option<u64>,
    }

    /// Serves `files` (by path) on loopback, GET with at most one byte range, from a thread that
    /// lives as long as the test process.
    fn serve(files: HashMap<String, Serving>) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let (mut line, mut range) = (String::new(), None);
                reader.read_line(&mut line).unwrap();
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                    if let Some(r) = header.to_ascii_lowercase().strip_prefix("range: bytes=") {
                        let (a, b) = r.trim().split_once('-').unwrap();
                        range = Some((a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap()));
                    }
                }
                let answer = match (files.get(&path), range) {
                    (Some(f), Some((a, b))) if f.withheld != Some(a as u64 / DATA_CHUNK_BYTES) => {
                        Some(("206 Partial Content", f.bytes[a..=b].to_vec()))
                    }
                    (Some(f), None) if f.whole => match f.withheld {
                        // A download that breaks off where the withheld chunk begins.
                        Some(c) => {
                            Some(("200 OK", f.bytes[..(c * DATA_CHUNK_BYTES) as usize].to_vec()))
                        }
                        None => Some(("200 OK", f.bytes.clone())),
                    },
                    _ => None,
                };
                let (status, body) = answer.unwrap_or(("404 Not Found", Vec::new()));
                let declared = match (files.get(&path), range) {
                    (Some(f), None) if status.starts_with("200") => f.bytes.len(),
                    _ => body.len(),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {declared}\r\nConnection: close\r\n\r\n"
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            }
        });
        port
    }

    /// Two files of 2.5 MiB and 10 bytes, with their chunk lists, as an owner serves them; the
    /// set's URIs and root.
    fn owner(
        first: Serving,
        lists: bool,
    ) -> (Vec<BoundedString<MAX_URI_LEN>>, Hash32, Vec<Vec<u8>>) {
        let a: Vec<u8> = (0..(5 << 19)).map(|i| (i % 253) as u8).collect();
        let b = b"ten bytes!".to_vec();
        let mut files = HashMap::new();
        for (name, bytes) in [("/a.bin", &a), ("/b.bin", &b)] {
            if lists {
                let list = ChunkList::of(bytes).encode();
                files.insert(
                    format!("{name}.chunks"),
                    Serving { bytes: list, whole: true, withheld: None },
                );
            }
            let serving = match name {
                "/a.bin" => Serving { bytes: bytes.clone(), ..first.clone() },
                _ => Serving { bytes: bytes.clone(), whole: true, withheld: None },
            };
            files.insert(name.to_string(), serving);
        }
        let port = serve(files);
        let uris = ["/a.bin", "/b.bin"]
            .map(|n| BoundedString::from_str(&format!("http://127.0.0.1:{port}{n}")).unwrap())
            .to_vec();
        let root = ergon_job_spec::content_root([&a, &b].map(|f| ergon_job_spec::file_digest(f)));
        (uris, Hash32(root), vec![a, b])
    }

    #[test]
    fn a_withheld_chunk_is_located_and_named() {
        let (uris, root, _) =
            owner(Serving { whole: true, withheld: Some(1), ..Default::default() }, true);
        let err = fetch_committed(&uris, &root, SET_NAMES[1]).unwrap_err();
        assert!(matches!(err, Error::DataGap { gap: Some((0, 1)), .. }), "{err}");
        let gap = Error::JobData(Box::new(err)).data_gap();
        assert_eq!(gap, Some(ergon_job_spec::DataGap { set: 1, file: 0, chunk: 1 }));
    }

    #[test]
    fn a_file_served_only_by_ranges_is_read_chunk_by_chunk() {
        let (uris, root, bytes) = owner(Serving { whole: false, ..Default::default() }, true);
        let files = fetch_committed(&uris, &root, SET_NAMES[0]).unwrap();
        assert_eq!(files.into_iter().map(|(_, b)| b).collect::<Vec<_>>(), bytes);
    }

    #[test]
    fn an_owner_checks_what_the_validators_will_read() {
        let (uris, root, bytes) = owner(Serving { whole: false, ..Default::default() }, true);
        let served = check_served(&uris, &root, SET_NAMES[0], 3).unwrap();
        let total = bytes.iter().map(|b| b.len() as u64).sum();
        assert_eq!(served, Served { files: 2, chunks: 4, chunks_checked: 4, bytes: total });
        let (uris, root, _) = owner(Serving { withheld: Some(2), ..Default::default() }, true);
        let err = check_served(&uris, &root, SET_NAMES[0], 2).unwrap_err();
        assert!(matches!(err, Error::DataGap { gap: Some((0, 2)), .. }), "{err}");
        let (uris, root, _) = owner(Serving { whole: true, ..Default::default() }, false);
        let err = check_served(&uris, &root, SET_NAMES[0], 2).unwrap_err();
        assert!(matches!(err, Error::DataGap { gap: None, .. }), "{err}");
    }

    #[test]
    fn missing_chunk_lists_name_no_chunk_and_paths_keep_their_errors() {
        let (uris, root, _) = owner(Serving { whole: false, ..Default::default() }, false);
        let err = fetch_committed(&uris, &root, SET_NAMES[0]).unwrap_err();
        assert!(matches!(err, Error::DataGap { gap: None, .. }), "{err}");
        assert_eq!(err.data_gap(), None);
        // Served as committed: the chunk lists are not even asked for.
        let (uris, root, _) = owner(Serving { whole: true, ..Default::default() }, false);
        assert!(fetch_committed(&uris, &root, SET_NAMES[0]).is_ok());
        // A path cannot be checked by parts: a wrong root stays a content-root error.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.bin");
        std::fs::write(&path, b"data").unwrap();
        let uri = BoundedString::from_str(path.to_str().unwrap()).unwrap();
        let err = fetch_committed(&[uri], &Hash32([0; 32]), SET_NAMES[0]).unwrap_err();
        assert!(matches!(err, Error::ContentRoot { .. }), "{err}");
        // Written beside it, the chunk list gives the file's digest.
        assert_eq!(write_chunk_list(&path, b"data").unwrap(), ergon_job_spec::file_digest(b"data"));
        let list = std::fs::read(dir.path().join("data.bin.chunks")).unwrap();
        assert_eq!(ChunkList::parse(&list).unwrap(), ChunkList::of(b"data"));
    }
}
