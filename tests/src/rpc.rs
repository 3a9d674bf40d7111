//! A minimal blocking JSON-RPC 2.0 client over HTTP/1.1 on loopback (std only), plus decoding helpers.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use ergon_client::H256;
use serde_json::{json, Value};

/// Why a JSON-RPC call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// The node could not be reached (not started yet, or stopped).
    #[error("transport: {0}")]
    Transport(#[from] std::io::Error),
    /// The reply was not a JSON-RPC response.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// The node answered with a JSON-RPC error.
    #[error("rpc error {code}: {message}")]
    Rpc {
        /// JSON-RPC error code.
        code: i64,
        /// Error message.
        message: String,
    },
}

/// Calls `method` with `params` on the node whose RPC server listens on `port`.
pub fn call(port: u16, method: &str, params: Value) -> Result<Value, RpcError> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.set_write_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, payload) =
        text.split_once("\r\n\r\n").ok_or_else(|| RpcError::Malformed(text.to_string()))?;
    let payload = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(payload).ok_or_else(|| RpcError::Malformed(payload.to_string()))?
    } else {
        payload.to_string()
    };
    let reply: Value =
        serde_json::from_str(&payload).map_err(|_| RpcError::Malformed(payload.clone()))?;
    if let Some(err) = reply.get("error") {
        return Err(RpcError::Rpc {
            code: err.get("code").and_then(Value::as_i64).unwrap_or_default(),
            message: err.get("message").and_then(Value::as_str).unwrap_or_default().to_string(),
        });
    }
    reply.get("result").cloned().ok_or(RpcError::Malformed(payload))
}

/// Decodes an HTTP/1.1 chunked body.
fn dechunk(mut body: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..size)?);
        body = rest.get(size + 2..)?;
    }
}

/// `0x`-prefixed lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    format!("0x{}", hex::encode(bytes))
}

/// Bytes from a `0x…` JSON string.
pub fn bytes(value: &Value) -> Option<Vec<u8>> {
    hex::decode(value.as_str()?.trim_start_matches("0x")).ok()
}

/// A hash from a `0x…` JSON string.
pub fn h256(value: &Value) -> Option<H256> {
    let raw = bytes(value)?;
    (raw.len() == 32).then(|| H256::from_slice(&raw))
}

/// A number from a `0x…` JSON string (block numbers in headers).
pub fn hex_u32(value: &Value) -> Option<u32> {
    u32::from_str_radix(value.as_str()?.trim_start_matches("0x"), 16).ok()
}
