//! Getting a data file's bytes from a path, a `file://` URI or an http(s) URL, and the content root.

use std::{
    io::Read,
    net::{IpAddr, SocketAddr},
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use ureq::unversioned::{
    resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver},
    transport::{DefaultConnector, NextTimeout},
};

use crate::error::{io, Error, Result};

/// Largest data file the worker accepts (4 GiB).
pub const MAX_FILE_BYTES: u64 = ergon_job_spec::MAX_DATA_FILE_BYTES;

/// The bytes of the file at `uri`.
pub fn fetch(uri: &str) -> Result<Vec<u8>> {
    fetch_at_most(uri, MAX_FILE_BYTES)
}

/// Longest a download of a data file may take.
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// The slowest a trainer may serve its bundle: 1 MiB/s per download. A bundle file served slower
/// than [`bundle_time_limit`] allows fails to download, so a verifier ends with a verdict (a
/// bundle it cannot fetch is a fail) instead of waiting out its commit window and being slashed
/// as silent (issue 34: a trainer serving one checkpoint at 1 KiB/s hung every verifier).
pub const MIN_BUNDLE_BYTES_PER_SECOND: u64 = 1 << 20;

/// Time a bundle download may take on top of its bytes at the floor rate (connection, a slow
/// start).
pub const BUNDLE_GRACE: Duration = Duration::from_secs(30);

/// How long a bundle file of `bytes` may take to download: [`BUNDLE_GRACE`] plus its bytes at
/// [`MIN_BUNDLE_BYTES_PER_SECOND`].
pub fn bundle_time_limit(bytes: u64) -> Duration {
    BUNDLE_GRACE + Duration::from_secs(bytes.div_ceil(MIN_BUNDLE_BYTES_PER_SECOND))
}

/// The bytes of the file at `uri`, refused (an error, and never more than `max + 1` bytes in
/// memory) when it holds more than `max` bytes.
pub fn fetch_at_most(uri: &str, max: u64) -> Result<Vec<u8>> {
    fetch_within(uri, max, DOWNLOAD_TIMEOUT)
}

/// Bytes this process has received over http(s) (bodies only), for a command's report.
static DOWNLOADED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Bytes this process has downloaded over http(s) so far (response bodies; files read from paths
/// are not counted): what a verification cost its network, reported by `verify --json`.
pub fn downloaded_bytes() -> u64 {
    DOWNLOADED.load(Ordering::Relaxed)
}

/// Whether every URI fetched must be an http(s) URL on a public host (`ergon_protocol::url`).
static PUBLIC_ONLY: AtomicBool = AtomicBool::new(false);

/// From now on this process fetches only http(s) URLs on public hosts: a daemon on a live chain,
/// whose URIs come from the chain's users, never reads a local file or asks a loopback, link-local
/// or private host for one (issue 34: an SSRF oracle). Test networks and the CLI (a user's own
/// files) keep paths and private hosts.
pub fn fetch_public_only() {
    PUBLIC_ONLY.store(true, Ordering::Relaxed);
}

/// [`fetch_at_most`], with a download that must end within `limit` (from its connection to its
/// last byte): a server that serves too slowly gets an error, not a verifier's whole window.
pub fn fetch_within(uri: &str, max: u64, limit: Duration) -> Result<Vec<u8>> {
    check_public(uri)?;
    let max = max.min(MAX_FILE_BYTES);
    if is_http(uri) {
        return download(uri, max, limit, None);
    }
    let path = uri.strip_prefix("file://").unwrap_or(uri);
    let meta = std::fs::metadata(path).map_err(io("reading", path))?;
    if meta.len() > max {
        return Err(Error::Data { file: uri.into(), reason: format!("larger than {max} bytes") });
    }
    std::fs::read(path).map_err(io("reading", path))
}

/// The bytes `[start, end)` of the file at `uri`, within `limit`: an HTTP range request (the
/// server must answer `206 Partial Content` with exactly those bytes; one that sends the whole
/// file instead is refused, not read), or a seek into a local file. What a verifier reads of a
/// checkpoint it needs only part of: a tensor's values, the weights without the optimizer state.
pub fn fetch_range(uri: &str, (start, end): (u64, u64), limit: Duration) -> Result<Vec<u8>> {
    check_public(uri)?;
    let len = end.checked_sub(start).filter(|n| *n <= MAX_FILE_BYTES).ok_or_else(|| {
        Error::Data { file: uri.into(), reason: format!("bad byte range {start}..{end}") }
    })?;
    if len == 0 {
        return Ok(Vec::new());
    }
    if is_http(uri) {
        return download(uri, len, limit, Some((start, end)));
    }
    use std::io::{Seek, SeekFrom};
    let path = uri.strip_prefix("file://").unwrap_or(uri);
    let mut file = std::fs::File::open(path).map_err(io("reading", path))?;
    file.seek(SeekFrom::Start(start)).map_err(io("reading", path))?;
    let mut bytes = Vec::new();
    file.take(len).read_to_end(&mut bytes).map_err(io("reading", path))?;
    if bytes.len() as u64 != len {
        return Err(Error::Data {
            file: uri.into(),
            reason: format!("bytes {start}..{end} are past the end of the file"),
        });
    }
    Ok(bytes)
}

/// Whether `uri` is an http(s) URL (else a path or a `file://` URI).
pub fn is_http(uri: &str) -> bool {
    uri.starts_with("http://") || uri.starts_with("https://")
}

/// Refuses `uri` when this process fetches public URLs only ([`fetch_public_only`]) and it is not one.
fn check_public(uri: &str) -> Result<()> {
    if PUBLIC_ONLY.load(Ordering::Relaxed) {
        ergon_protocol::url::check(uri).map_err(|why| Error::Download {
            url: uri.to_string(),
            reason: format!("refused: {why}"),
        })?;
    }
    Ok(())
}

/// GETs `url` (the bytes `range` only, when given), reading at most `max` bytes.
fn download(url: &str, max: u64, limit: Duration, range: Option<(u64, u64)>) -> Result<Vec<u8>> {
    let fail = |reason: String| Error::Download { url: url.to_string(), reason };
    // Public-only: a redirect could lead to a private host the check never saw, so none is
    // followed (a 3xx is an error).
    let public_only = PUBLIC_ONLY.load(Ordering::Relaxed);
    let redirects = if public_only { 0 } else { 10 };
    let config = ureq::Agent::config_builder()
        .max_redirects(redirects)
        .timeout_connect(Some(Duration::from_secs(10)))
        .timeout_global(Some(limit))
        .build();
    let agent = if public_only {
        // The name passed `ergon_protocol::url::check`; the addresses it resolves to must pass too.
        ureq::Agent::with_parts(config, DefaultConnector::new(), PublicOnlyResolver::default())
    } else {
        config.new_agent()
    };
    let mut request = agent.get(url);
    if let Some((start, end)) = range {
        request = request.header("Range", format!("bytes={start}-{}", end - 1));
    }
    let response = request.call().map_err(|e| match e {
        ureq::Error::Other(why) if why.is::<NotPublic>() => fail(format!("refused: {why}")),
        e => fail(e.to_string()),
    })?;
    if response.status().is_redirection() {
        return Err(fail(format!("redirect ({}) not followed", response.status())));
    }
    if range.is_some() && response.status().as_u16() != 206 {
        return Err(fail(format!(
            "asked for a byte range, answered {} (the bundle's server must serve ranges)",
            response.status()
        )));
    }
    let mut bytes = Vec::new();
    response
        .into_body()
        .into_reader()
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    DOWNLOADED.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    if bytes.len() as u64 > max {
        return Err(fail(format!("larger than {max} bytes")));
    }
    if range.is_some() && (bytes.len() as u64) != max {
        return Err(fail(format!("a range of {max} bytes answered with {}", bytes.len())));
    }
    Ok(bytes)
}

/// A DNS name whose addresses are not all public (issue 34, item 8): `ergon_protocol::url::check`
/// takes a name as it is, so a public name pointing at loopback or a private network would make a
/// public-only daemon an SSRF oracle all the same.
#[derive(Debug)]
struct NotPublic {
    host: String,
    address: IpAddr,
}

impl std::fmt::Display for NotPublic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves to {}, not a public address", self.host, self.address)
    }
}

impl std::error::Error for NotPublic {}

/// The first of `addresses` that is not public (loopback, link-local, private, …), if any.
fn first_not_public(addresses: &[SocketAddr]) -> Option<IpAddr> {
    addresses.iter().map(SocketAddr::ip).find(|ip| match ip {
        IpAddr::V4(v4) => !ergon_protocol::url::is_public_ipv4(u32::from(*v4)),
        IpAddr::V6(v6) => !ergon_protocol::url::is_public_ipv6(v6.octets()),
    })
}

/// ureq's resolver, refusing a host any of whose addresses is not public. The addresses checked
/// are the ones connected to, so a name that answers public once and private the next time (DNS
/// rebinding) gains nothing either.
#[derive(Debug, Default)]
struct PublicOnlyResolver(DefaultResolver);

impl Resolver for PublicOnlyResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> std::result::Result<ResolvedSocketAddrs, ureq::Error> {
        let addresses = self.0.resolve(uri, config, timeout)?;
        match first_not_public(&addresses) {
            Some(address) => Err(ureq::Error::Other(Box::new(NotPublic {
                host: uri.host().unwrap_or_default().to_string(),
                address,
            }))),
            None => Ok(addresses),
        }
    }
}

/// Content root of a dataset's files ([`ergon_job_spec::content_root`] of their digests,
/// [`ergon_job_spec::file_digest`]), files in spec order.
pub fn content_root<'a>(files: impl IntoIterator<Item = &'a [u8]>) -> [u8; 32] {
    ergon_job_spec::content_root(files.into_iter().map(ergon_job_spec::file_digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_with_any_address_that_is_not_public_is_found() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(first_not_public(&[at("93.184.215.14:80"), at("[2606:2800:21f::1]:443")]), None);
        for private in
            ["127.0.0.1:80", "10.1.2.3:80", "169.254.169.254:80", "[::1]:80", "[fd00::1]:80"]
        {
            let found = first_not_public(&[at("93.184.215.14:80"), at(private)]);
            assert_eq!(found, Some(at(private).ip()), "{private}");
        }
    }

    #[test]
    fn missing_file_and_unreachable_url_are_clear_errors() {
        let err = fetch("/nonexistent/ergon/data.idx").unwrap_err().to_string();
        assert!(err.contains("/nonexistent/ergon/data.idx"), "{err}");
        // Port 9 on loopback: nothing listens (discard service is not run here).
        let err = fetch("http://127.0.0.1:9/data.csv").unwrap_err();
        assert!(matches!(err, Error::Download { .. }), "{err}");
    }

    /// Serves `status` and `body` to one HTTP request on a loopback port; returns the base URL.
    fn serve_once(status: &'static str, body: &'static [u8]) -> String {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            if let Ok((mut conn, _)) = listener.accept() {
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf);
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(body);
            }
        });
        url
    }

    #[test]
    fn downloads_over_http_and_reports_http_errors() {
        let url = serve_once("200 OK", b"1,0.5\n0,0.25\n");
        assert_eq!(fetch(&format!("{url}/train.csv")).unwrap(), b"1,0.5\n0,0.25\n");
        let url = serve_once("404 Not Found", b"");
        let err = fetch(&format!("{url}/missing.csv")).unwrap_err();
        assert!(matches!(err, Error::Download { .. }) && err.to_string().contains("404"), "{err}");
    }

    /// A server that trickles its body (the slow-serving trainer): the download ends with an
    /// error at its time limit instead of waiting for every byte.
    #[test]
    fn a_server_slower_than_the_limit_fails_the_download_in_time() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/ckpt", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = std::io::Read::read(&mut stream, &mut request);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
            // 1 KiB/s: 100 s for the whole body.
            for _ in 0..100 {
                if stream.write_all(&[7u8; 1024]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        let started = std::time::Instant::now();
        let err = fetch_within(&url, 100_000, Duration::from_secs(2)).unwrap_err();
        assert!(matches!(err, Error::Download { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        // The bundle's limit: 30 s plus a second per MiB.
        assert_eq!(bundle_time_limit(0), BUNDLE_GRACE);
        assert_eq!(bundle_time_limit(3 << 20), BUNDLE_GRACE + Duration::from_secs(3));
        assert_eq!(bundle_time_limit((3 << 20) + 1), BUNDLE_GRACE + Duration::from_secs(4));
    }

    /// A server that answers a range request with the whole file (200): refused unread, so a
    /// trainer cannot make a verifier that wanted one tensor download every byte of the file.
    #[test]
    fn a_range_answered_with_the_whole_file_is_refused() {
        let url = serve_once("200 OK", b"0123456789");
        let err = fetch_range(&format!("{url}/ckpt"), (2, 4), Duration::from_secs(5)).unwrap_err();
        assert!(err.to_string().contains("must serve ranges"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let path = path.to_string_lossy();
        assert_eq!(fetch_range(&path, (2, 5), Duration::from_secs(5)).unwrap(), b"234");
        assert!(fetch_range(&path, (8, 12), Duration::from_secs(5)).is_err(), "past the end");
        assert!(fetch_range(&path, (5, 2), Duration::from_secs(5)).is_err(), "backwards");
    }

    #[test]
    fn content_root_depends_on_order_and_bytes() {
        let a = content_root([&b"x"[..], &b"y"[..]]);
        assert_ne!(a, content_root([&b"y"[..], &b"x"[..]]));
        assert_ne!(a, content_root([&b"x"[..], &b"z"[..]]));
        assert_eq!(a, content_root([&b"x"[..], &b"y"[..]]));
    }
}
