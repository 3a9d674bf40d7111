//! A bundle a test trainer commits to: synthetic manifest and checkpoint bytes, served over HTTP on
//! loopback the way a trainer's bundle server would (GET with single byte ranges).

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    net::TcpListener,
    sync::{Arc, Mutex},
};

use ergon_bundle::{to_hex, FileCommitment, ManifestIndex};

/// Requests answered, as (path, range header), in order.
pub type Requests = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A tiny HTTP server for the test bundle (or a job's data): GET of known paths, with single byte
/// ranges; records the requests it answered as (path, range header).
pub struct BundleServer {
    /// Loopback port it listens on.
    pub port: u16,
    /// Every request answered.
    pub requests: Requests,
    /// What it serves, by path.
    files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
}

impl BundleServer {
    /// Serves `files` (by request path) on a free loopback port, from a background thread.
    pub fn start(files: HashMap<String, Vec<u8>>) -> BundleServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let files = Arc::new(Mutex::new(files));
        let served = files.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut range = None;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = header.strip_prefix("Range:").or(header.strip_prefix("range:"))
                    {
                        range = Some(v.trim().to_string());
                    }
                }
                log.lock().unwrap().push((path.clone(), range.clone()));
                let Some(body) = served.lock().unwrap().get(&path).cloned() else {
                    let _ =
                        stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                    continue;
                };
                let (status, part) = match range.as_deref().and_then(|r| r.strip_prefix("bytes=")) {
                    Some(r) => {
                        let (a, b) = r.split_once('-').expect("a-b");
                        let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
                        ("206 Partial Content", &body[a..=b])
                    }
                    None => ("200 OK", &body[..]),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    part.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(part);
            }
        });
        BundleServer { port, requests, files }
    }

    /// Stops serving every file: each request is answered 404 from now on (an owner taking its
    /// data down).
    pub fn take_down(&self) {
        self.files.lock().unwrap().clear();
    }
}

/// A bundle of `checkpoints` checkpoints that all name one 2.5 MiB file (three chunks), as many as
/// the job has (the offchain worker checks the manifest against the job): the manifest bytes, the
/// file, the root.
pub fn synthetic_bundle(checkpoints: u64) -> (Vec<u8>, Vec<u8>, [u8; 32]) {
    let file: Vec<u8> =
        (0..(5u32 << 19)).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let c = FileCommitment::of(&file);
    let chunks: Vec<String> = c.chunks.iter().map(|h| format!("\"{}\"", to_hex(h))).collect();
    let entries: Vec<String> = (0..checkpoints)
        .map(|step| {
            format!(
                r#"{{"step": {step}, "file": "ckpt-00000000.safetensors", "file_sha256": "{}",
                "file_bytes": {}, "chunks": [{}], "digest": "{}"}}"#,
                to_hex(&c.sha256),
                c.bytes,
                chunks.join(","),
                to_hex(&[5; 32])
            )
        })
        .collect();
    let manifest =
        format!(r#"{{"format_version": 2, "checkpoints": [{}]}}"#, entries.join(",")).into_bytes();
    let root = ManifestIndex::parse(&manifest).expect("a valid manifest").root();
    (manifest, file, root)
}

/// A [`synthetic_bundle`] of `checkpoints` checkpoints served under `/job`: the server, the
/// bundle's base URL and its root.
pub fn serve_synthetic_bundle(checkpoints: u64) -> (BundleServer, String, [u8; 32]) {
    let (manifest, file, root) = synthetic_bundle(checkpoints);
    let server = BundleServer::start(std::collections::HashMap::from([
        (format!("/job/{}", ergon_bundle::MANIFEST_FILE), manifest),
        ("/job/ckpt-00000000.safetensors".to_string(), file),
    ]));
    let uri = format!("http://127.0.0.1:{}/job", server.port);
    (server, uri, root)
}
