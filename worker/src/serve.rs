//! The bundle server: serves bundle directories over HTTP, so that verifiers, the chain's
//! availability checks and a job's owner can fetch them. It runs on the daemon's async runtime
//! (and alone for `ergon-worker serve`).
//!
//! Deliberately small: `GET` and `HEAD` of plain files under one root directory, one byte range per
//! request (`Range: bytes=a-b`, `bytes=a-`, `bytes=-n`; what the availability offchain worker and a
//! verifier fetching one checkpoint send), no directory listings, one request per connection. Paths
//! with `..`, backslashes or empty segments are refused before touching the file system.
//!
//! Its shape follows tokio's mini-redis: a semaphore bounds the connections served at once (more
//! wait in the listen queue, costing the server nothing), every connection task listens for the
//! shutdown signal, and [`Server::run`] returns only once the transfers in flight have finished or
//! been given [`GRACE`] to finish.

use std::{
    future::Future,
    io,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{watch, Semaphore},
    task::JoinSet,
};

/// Most connections served at once by default.
pub const MAX_CONNECTIONS: usize = 64;
/// Longest request head accepted.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Idle limit of a connection, each way: reading the head, and each write of the body.
const TIMEOUT: Duration = Duration::from_secs(30);
/// How long transfers in flight may go on after shutdown was asked.
pub const GRACE: Duration = Duration::from_secs(5);
/// Bytes read from a file per write to the socket.
const CHUNK: usize = 64 * 1024;

/// A bound bundle server.
pub struct Server {
    listener: TcpListener,
    root: Arc<PathBuf>,
    limit: Arc<Semaphore>,
    served: Arc<AtomicU64>,
}

impl Server {
    /// Binds `addr` (e.g. `127.0.0.1:8000`) to serve the files under `root`, at most
    /// [`MAX_CONNECTIONS`] at once.
    pub async fn bind(addr: &str, root: &Path) -> io::Result<Server> {
        Self::bind_with_limit(addr, root, MAX_CONNECTIONS).await
    }

    /// [`Server::bind`] serving at most `connections` at once.
    pub async fn bind_with_limit(
        addr: &str,
        root: &Path,
        connections: usize,
    ) -> io::Result<Server> {
        let root = root
            .canonicalize()
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", root.display())))?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("binding {addr}: {e}")))?;
        Ok(Server {
            listener,
            root: Arc::new(root),
            limit: Arc::new(Semaphore::new(connections.max(1))),
            served: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The count of body bytes served so far (files and ranges), kept up to date while it runs:
    /// what a trainer's bundle costs it in upload.
    pub fn bytes_served(&self) -> Arc<AtomicU64> {
        self.served.clone()
    }

    /// The address it listens on (the port, when bound to port 0).
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes. Then it stops accepting, closes idle connections, gives
    /// transfers in flight [`GRACE`] to finish, and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let (stop, stopping) = watch::channel(false);
        let mut connections = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            // Wait for a free slot first: beyond the limit, clients wait in the listen queue.
            let permit = tokio::select! {
                permit = self.limit.clone().acquire_owned() => permit.map_err(io::Error::other)?,
                _ = &mut shutdown => break,
            };
            let stream = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    // A connection that failed before we saw it (reset, out of descriptors):
                    // back off a moment rather than spin.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
                _ = &mut shutdown => break,
            };
            let (root, stopping) = (self.root.clone(), stopping.clone());
            let served = self.served.clone();
            connections.spawn(async move {
                let _ = handle(stream, &root, stopping, &served).await;
                drop(permit);
            });
            // Reap the finished ones so the set does not grow.
            while connections.try_join_next().is_some() {}
        }
        drop(self.listener);
        let _ = stop.send(true);
        let drained =
            tokio::time::timeout(GRACE, async { while connections.join_next().await.is_some() {} });
        if drained.await.is_err() {
            connections.abort_all();
        }
        Ok(())
    }
}

/// Serves one request on `stream`; a connection still sending its head when shutdown is asked is
/// closed, one already being answered is answered.
async fn handle(
    mut stream: TcpStream,
    root: &Path,
    mut stopping: watch::Receiver<bool>,
    served: &AtomicU64,
) -> io::Result<()> {
    let head = tokio::select! {
        head = tokio::time::timeout(TIMEOUT, read_head(&mut stream)) => match head {
            Ok(head) => head?,
            Err(_) => return Ok(()),
        },
        _ = stopping.wait_for(|stop| *stop) => return Ok(()),
    };
    let empty = [("Content-Length", "0".to_string())];
    let Some(request) = parse_request(&head) else {
        return respond(&mut stream, "400 Bad Request", &empty).await;
    };
    let Some(path) = resolve(root, &request.path) else {
        return respond(&mut stream, "404 Not Found", &empty).await;
    };
    let file = match tokio::fs::File::open(&path).await {
        Ok(file) if file.metadata().await.is_ok_and(|m| m.is_file()) => file,
        _ => return respond(&mut stream, "404 Not Found", &empty).await,
    };
    let len = file.metadata().await?.len();
    let (status, start, end) = match request.range.as_deref().map(|r| parse_range(r, len)) {
        None => ("200 OK", 0, len),
        Some(Ok((start, end))) => ("206 Partial Content", start, end),
        Some(Err(())) => {
            let headers =
                [("Content-Length", "0".into()), ("Content-Range", format!("bytes */{len}"))];
            return respond(&mut stream, "416 Range Not Satisfiable", &headers).await;
        }
    };
    let mut headers = vec![
        ("Content-Length", (end - start).to_string()),
        ("Content-Type", "application/octet-stream".to_string()),
    ];
    if status.starts_with("206") {
        headers.push(("Content-Range", format!("bytes {start}-{}/{len}", end - 1)));
    }
    respond(&mut stream, status, &headers).await?;
    if !request.head_only {
        send_body(&mut stream, file, (start, end), served).await?;
    }
    stream.shutdown().await
}

/// Reads the request head (up to the blank line), at most [`MAX_HEAD_BYTES`].
async fn read_head(stream: &mut TcpStream) -> io::Result<String> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        if head.len() >= MAX_HEAD_BYTES {
            break;
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// Copies `[start, end)` of `file` to `stream`, each write bounded by [`TIMEOUT`], counting the
/// bytes sent in `served`.
async fn send_body(
    stream: &mut TcpStream,
    mut file: tokio::fs::File,
    (start, end): (u64, u64),
    served: &AtomicU64,
) -> io::Result<()> {
    file.seek(io::SeekFrom::Start(start)).await?;
    let mut left = end - start;
    let mut buf = vec![0u8; CHUNK];
    while left > 0 {
        let want = buf.len().min(left.try_into().unwrap_or(usize::MAX));
        let n = file.read(&mut buf[..want]).await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while served"));
        }
        tokio::time::timeout(TIMEOUT, stream.write_all(&buf[..n]))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "client stopped reading"))??;
        left -= n as u64;
        served.fetch_add(n as u64, Ordering::Relaxed);
    }
    stream.flush().await
}

/// A parsed request: method, path and the optional range.
#[derive(Debug, PartialEq)]
struct Request {
    head_only: bool,
    path: String,
    range: Option<String>,
}

/// The request in `head`, if it is a `GET` or `HEAD`.
fn parse_request(head: &str) -> Option<Request> {
    let mut lines = head.lines();
    let mut parts = lines.next()?.split_whitespace();
    let (method, target) = (parts.next()?, parts.next()?);
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return None,
    };
    let path = target.split(['?', '#']).next().unwrap_or_default().to_string();
    let range = lines
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("range"))
        .map(|(_, value)| value.trim().to_string());
    Some(Request { head_only, path, range })
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
fn parse_range(spec: &str, len: u64) -> Result<(u64, u64), ()> {
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

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    headers: &[(&str, String)],
) -> io::Result<()> {
    // Any page may read a bundle (the web page checks a delivered model in the browser): bundles
    // are public, and a browser's same-origin rule guards nothing a plain download does not get.
    let mut head = format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\nAccept-Ranges: bytes\r\n\
         Access-Control-Allow-Origin: *\r\n"
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await
}

#[cfg(test)]
mod tests {
    use std::{
        io::{Read, Write},
        net::SocketAddr,
        time::Instant,
    };

    use super::*;

    /// A blocking client, run off the runtime.
    async fn get(addr: SocketAddr, path: &str, range: Option<&str>) -> (String, Vec<u8>) {
        let (path, range) = (path.to_string(), range.map(str::to_string));
        tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            let range = range.map(|r| format!("Range: {r}\r\n")).unwrap_or_default();
            write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n{range}\r\n").unwrap();
            let mut out = Vec::new();
            s.read_to_end(&mut out).unwrap();
            let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
            let head = String::from_utf8(out[..split].to_vec()).unwrap();
            (head, out[split + 4..].to_vec())
        })
        .await
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_files_and_ranges_and_refuses_escapes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("b")).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("b/ckpt"), &data).unwrap();
        std::fs::write(dir.path().join("secret"), b"no").unwrap();
        let server = Server::bind("127.0.0.1:0", &dir.path().join("b")).await.unwrap();
        let addr = server.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));

        let (head, body) = get(addr, "/ckpt", None).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("Access-Control-Allow-Origin: *"), "{head}");
        assert_eq!(body, data);
        let (head, body) = get(addr, "/ckpt", Some("bytes=10-19")).await;
        assert!(head.starts_with("HTTP/1.1 206") && head.contains("bytes 10-19/200000"), "{head}");
        assert_eq!(body, &data[10..20]);
        let (_, body) = get(addr, "/ckpt", Some("bytes=199990-")).await;
        assert_eq!(body, &data[199_990..]);
        let (_, body) = get(addr, "/ckpt", Some("bytes=-5")).await;
        assert_eq!(body, &data[199_995..]);
        let (head, _) = get(addr, "/ckpt", Some("bytes=200000-200001")).await;
        assert!(head.starts_with("HTTP/1.1 416"), "{head}");
        for bad in ["/../secret", "/%2e%2e/secret", "//ckpt", "/", "/missing"] {
            let (head, _) = get(addr, bad, None).await;
            assert!(head.starts_with("HTTP/1.1 404"), "{bad}: {head}");
        }
        let _ = stop.send(());
        running.await.unwrap().unwrap();
    }

    /// A client that opens connections and sends nothing holds at most the limit; the others
    /// wait, and are served as soon as a slot frees.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_clients_hold_no_more_than_the_connection_limit() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"hello").unwrap();
        let server = Server::bind_with_limit("127.0.0.1:0", dir.path(), 2).await.unwrap();
        let addr = server.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        let idle: Vec<_> =
            (0..2).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect::<Vec<_>>();
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The third client is accepted by the kernel but not served while both slots are held.
        let waiting = tokio::spawn(get(addr, "/f", None));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!waiting.is_finished(), "served beyond the connection limit");
        drop(idle);
        let (head, body) = waiting.await.unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body, b"hello");
        let _ = stop.send(());
        running.await.unwrap().unwrap();
    }

    /// Shutdown closes idle connections and returns at once; new clients are refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_is_prompt_and_stops_accepting() {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::bind("127.0.0.1:0", dir.path()).await.unwrap();
        let addr = server.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        let mut idle = std::net::TcpStream::connect(addr).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let asked = Instant::now();
        let _ = stop.send(());
        running.await.unwrap().unwrap();
        assert!(asked.elapsed() < GRACE, "waited {:?} for an idle connection", asked.elapsed());
        let mut rest = Vec::new();
        idle.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        assert_eq!(idle.read_to_end(&mut rest).unwrap_or(0), 0, "the idle connection is closed");
        assert!(std::net::TcpStream::connect(addr).is_err(), "still accepting after shutdown");
    }

    #[test]
    fn parses_request_heads() {
        let r = parse_request("HEAD /a/b?x=1 HTTP/1.1\r\nHost: x\r\nrange: bytes=0-9\r\n\r\n");
        assert_eq!(
            r,
            Some(Request { head_only: true, path: "/a/b".into(), range: Some("bytes=0-9".into()) })
        );
        assert_eq!(parse_request("POST / HTTP/1.1\r\n\r\n"), None);
        assert_eq!(parse_request(""), None);
    }
}
