//! `ergon-worker serve`: serves bundle directories over HTTP, so that verifiers and the chain's
//! availability checks can fetch them.
//!
//! Deliberately small: `GET` and `HEAD` of plain files under one root directory, one byte range per
//! request (`Range: bytes=a-b`, `bytes=a-`, `bytes=-n`; what the availability offchain worker sends),
//! no directory listings, one request per connection. Paths with `..`, backslashes or empty segments
//! are refused before touching the file system.

use std::{
    fs::File,
    io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use crate::error::{io, Result};

/// Most connections served at once; more wait in the listen queue.
const MAX_CONNECTIONS: usize = 64;
/// Longest request head accepted.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Idle limit of a connection, each way.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A bound bundle server.
pub struct Server {
    listener: TcpListener,
    root: PathBuf,
}

impl Server {
    /// Binds `addr` (e.g. `127.0.0.1:8000`) to serve the files under `root`.
    pub fn bind(addr: &str, root: &Path) -> Result<Server> {
        let root = root.canonicalize().map_err(io("opening", root))?;
        let listener = TcpListener::bind(addr).map_err(io("binding", Path::new(addr)))?;
        Ok(Server { listener, root })
    }

    /// The address it listens on (the port, when bound to port 0).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener.local_addr().map_err(io("reading the address of", &self.root))
    }

    /// Serves until the process ends: one thread per connection, at most `MAX_CONNECTIONS`.
    pub fn run(self) -> Result<()> {
        let active = Arc::new(AtomicUsize::new(0));
        for stream in self.listener.incoming() {
            let Ok(stream) = stream else { continue };
            while active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
                std::thread::sleep(Duration::from_millis(5));
            }
            active.fetch_add(1, Ordering::AcqRel);
            let (root, active) = (self.root.clone(), active.clone());
            std::thread::spawn(move || {
                let _ = handle(stream, &root);
                active.fetch_sub(1, Ordering::AcqRel);
            });
        }
        Ok(())
    }
}

/// A parsed request: method, path and the optional range.
struct Request {
    head_only: bool,
    path: String,
    range: Option<String>,
}

fn read_request(stream: &TcpStream) -> io::Result<Option<Request>> {
    let mut reader = BufReader::new(stream.take(MAX_HEAD_BYTES as u64));
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else { return Ok(None) };
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Ok(None),
    };
    let path = target.split(['?', '#']).next().unwrap_or_default().to_string();
    let mut range = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" || header == "\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.trim().eq_ignore_ascii_case("range") {
                range = Some(value.trim().to_string());
            }
        }
    }
    Ok(Some(Request { head_only, path, range }))
}

/// The file under `root` that `path` names, if it is a plain relative path.
fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let relative = path.strip_prefix('/')?;
    let mut out = root.to_path_buf();
    for segment in relative.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." || segment.contains('\\') {
            return None;
        }
        out.push(segment);
    }
    Some(out)
}

/// `[start, end)` of a single `bytes=` range over `len` bytes; `Err(())` when unsatisfiable.
fn parse_range(spec: &str, len: u64) -> std::result::Result<(u64, u64), ()> {
    let spec = spec.strip_prefix("bytes=").ok_or(())?;
    let (a, b) = spec.split_once('-').ok_or(())?;
    let (start, end) = match (a.trim(), b.trim()) {
        ("", suffix) => {
            let n: u64 = suffix.parse().map_err(|_| ())?;
            (len.saturating_sub(n), len)
        }
        (a, "") => (a.parse().map_err(|_| ())?, len),
        (a, b) => {
            let last: u64 = b.parse().map_err(|_| ())?;
            (a.parse().map_err(|_| ())?, last.saturating_add(1).min(len))
        }
    };
    if start >= end || start >= len {
        return Err(());
    }
    Ok((start, end))
}

fn respond(stream: &mut TcpStream, status: &str, headers: &[(&str, String)]) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\nAccept-Ranges: bytes\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())
}

fn handle(mut stream: TcpStream, root: &Path) -> io::Result<()> {
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let empty = [("Content-Length", "0".to_string())];
    let Some(request) = read_request(&stream)? else {
        return respond(&mut stream, "400 Bad Request", &empty);
    };
    let file = resolve(root, &request.path)
        .and_then(|p| File::open(p).ok())
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()));
    let Some(mut file) = file else {
        return respond(&mut stream, "404 Not Found", &empty);
    };
    let len = file.metadata()?.len();
    let (status, start, end) = match request.range.as_deref().map(|r| parse_range(r, len)) {
        None => ("200 OK", 0, len),
        Some(Ok((start, end))) => ("206 Partial Content", start, end),
        Some(Err(())) => {
            let headers =
                [("Content-Length", "0".into()), ("Content-Range", format!("bytes */{len}"))];
            return respond(&mut stream, "416 Range Not Satisfiable", &headers);
        }
    };
    let mut headers = vec![
        ("Content-Length", (end - start).to_string()),
        ("Content-Type", "application/octet-stream".to_string()),
    ];
    if status.starts_with("206") {
        headers.push(("Content-Range", format!("bytes {start}-{}/{len}", end - 1)));
    }
    respond(&mut stream, status, &headers)?;
    if !request.head_only {
        file.seek(SeekFrom::Start(start))?;
        io::copy(&mut file.take(end - start), &mut stream)?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, path: &str, range: Option<&str>) -> (String, Vec<u8>) {
        let mut s = TcpStream::connect(addr).unwrap();
        let range = range.map(|r| format!("Range: {r}\r\n")).unwrap_or_default();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n{range}\r\n").unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8(out[..split].to_vec()).unwrap();
        (head, out[split + 4..].to_vec())
    }

    #[test]
    fn serves_files_and_ranges_and_refuses_escapes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("b")).unwrap();
        let data: Vec<u8> = (0..1000u32).map(|i| (i % 256) as u8).collect();
        std::fs::write(dir.path().join("b/ckpt"), &data).unwrap();
        std::fs::write(dir.path().join("secret"), b"no").unwrap();
        let server = Server::bind("127.0.0.1:0", &dir.path().join("b")).unwrap();
        let addr = server.local_addr().unwrap();
        std::thread::spawn(move || server.run());

        let (head, body) = get(addr, "/ckpt", None);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body, data);
        let (head, body) = get(addr, "/ckpt", Some("bytes=10-19"));
        assert!(head.starts_with("HTTP/1.1 206") && head.contains("bytes 10-19/1000"), "{head}");
        assert_eq!(body, &data[10..20]);
        let (_, body) = get(addr, "/ckpt", Some("bytes=990-"));
        assert_eq!(body, &data[990..]);
        let (_, body) = get(addr, "/ckpt", Some("bytes=-5"));
        assert_eq!(body, &data[995..]);
        let (head, _) = get(addr, "/ckpt", Some("bytes=1000-1001"));
        assert!(head.starts_with("HTTP/1.1 416"), "{head}");
        for bad in ["/../secret", "/%2e%2e/secret", "//ckpt", "/", "/missing"] {
            let (head, _) = get(addr, bad, None);
            assert!(head.starts_with("HTTP/1.1 404"), "{bad}: {head}");
        }
    }
}
