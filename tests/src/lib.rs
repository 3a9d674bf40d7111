//! Test harness for Ergon's integration tests: starts real `ergon-node` processes on free loopback
//! ports and talks to them as any client would, over JSON-RPC with SCALE-encoded payloads.
//!
//! Every process is killed when its [`Node`] is dropped (also when a test panics), and the kernel kills
//! it if the test process itself dies (`PR_SET_PDEATHSIG`).
//!
//! The node binary is `$ERGON_NODE`, or `ergon-node` in the cargo target directory's `release/`.

pub mod bundle_server;
pub mod extrinsic;
pub mod rpc;

use std::{
    fs,
    net::TcpListener,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use codec::Decode;
use serde_json::{json, Value};
use sp_core::H256;

pub use rpc::RpcError;

/// Path of the `ergon-node` binary under test.
pub fn node_binary() -> PathBuf {
    if let Ok(path) = std::env::var("ERGON_NODE") {
        return PathBuf::from(path);
    }
    let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| {
        // tests/ sits in the workspace root: ../target by default.
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("target")
    });
    let bin = target.join("release").join("ergon-node");
    assert!(
        bin.exists(),
        "{} not found: build it first with `cargo build --release -p ergon-node` (or set ERGON_NODE)",
        bin.display()
    );
    bin
}

/// A TCP port that was free a moment ago, below the kernel's ephemeral range (32768–60999 on Linux)
/// and never handed out twice by this process. A port the OS picks for `bind(0)` comes from the
/// ephemeral range, where the nodes' own outgoing connections may take it before the node that was
/// given it binds it; ports from a fixed window per process cannot collide that way.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let offset = (std::process::id() * 97) % SPAN;
    for _ in 0..SPAN {
        let port = (FIRST + (offset + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + SPAN)
}

/// The ports a node listens on.
#[derive(Clone, Copy, Debug)]
pub struct Ports {
    /// libp2p.
    pub p2p: u16,
    /// JSON-RPC (HTTP and WebSocket).
    pub rpc: u16,
    /// Prometheus metrics.
    pub prometheus: u16,
}

impl Ports {
    /// Three ports that were free a moment ago.
    pub fn free() -> Self {
        Ports { p2p: free_port(), rpc: free_port(), prometheus: free_port() }
    }
}

/// A running `ergon-node` process.
pub struct Node {
    /// Name used for the log file and in failure messages.
    pub name: String,
    /// Where it listens.
    pub ports: Ports,
    child: Option<Child>,
    log: PathBuf,
    args: Vec<String>,
}

impl Node {
    /// Starts `ergon-node` with `args` plus the given ports; output goes to `log_dir/<name>.log`.
    pub fn start(name: &str, ports: Ports, args: &[String], log_dir: &Path) -> Node {
        let mut all_args: Vec<String> = args.to_vec();
        all_args.extend([
            "--port".into(),
            ports.p2p.to_string(),
            "--rpc-port".into(),
            ports.rpc.to_string(),
            "--prometheus-port".into(),
            ports.prometheus.to_string(),
            "--no-telemetry".into(),
            "--no-mdns".into(),
        ]);
        let log = log_dir.join(format!("{name}.log"));
        let mut node = Node { name: name.to_string(), ports, child: None, log, args: all_args };
        node.spawn();
        node
    }

    fn spawn(&mut self) {
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file can be created");
        let err = out.try_clone().expect("log file handle clones");
        let mut cmd = Command::new(node_binary());
        cmd.args(&self.args).stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: prctl is async-signal-safe; it asks the kernel to kill the child with its parent.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        self.child = Some(cmd.spawn().expect("ergon-node starts"));
    }

    /// Stops the process (SIGTERM, then SIGKILL after 10 s) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: plain signal to a child we own and have not reaped.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the process again with the same arguments (and so the same base path).
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// The last `lines` lines of this node's log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// A JSON-RPC call to this node.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        rpc::call(self.ports.rpc, method, params)
    }

    /// Number of the block with `hash` (best block when `None`).
    pub fn block_number(&self, hash: Option<H256>) -> Option<u32> {
        let header = self.call("chain_getHeader", json!([hash])).ok()?;
        rpc::hex_u32(header.get("number")?)
    }

    /// Hash and number of the last finalized block.
    pub fn finalized(&self) -> Option<(H256, u32)> {
        let hash = rpc::h256(&self.call("chain_getFinalizedHead", json!([])).ok()?)?;
        Some((hash, self.block_number(Some(hash))?))
    }

    /// Hash of block `number` on this node's best chain.
    pub fn block_hash(&self, number: u32) -> Option<H256> {
        rpc::h256(&self.call("chain_getBlockHash", json!([number])).ok()?)
    }

    /// Waits until the finalized block number reaches `target`; returns it. Panics with the log tail
    /// on timeout.
    pub fn wait_finalized(&self, target: u32, timeout: Duration) -> (H256, u32) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((hash, n)) = self.finalized() {
                if n >= target {
                    return (hash, n);
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "{}: finalized block did not reach #{target} within {timeout:?}\n--- log tail ---\n{}",
                    self.name,
                    self.log_tail(40)
                );
            }
            sleep(Duration::from_millis(500));
        }
    }

    /// Raw storage at `key` in the best block.
    pub fn storage(&self, key: &[u8]) -> Option<Vec<u8>> {
        let value = self.call("state_getStorage", json!([rpc::to_hex(key)])).ok()?;
        rpc::bytes(&value)
    }

    /// A decoded storage value in the best block.
    pub fn storage_decoded<T: Decode>(&self, key: &[u8]) -> Option<T> {
        self.storage(key).and_then(|bytes| T::decode(&mut &bytes[..]).ok())
    }

    /// `state_call` of a runtime API function with SCALE-encoded `args`; the SCALE-encoded result.
    pub fn runtime_call(&self, function: &str, args: &[u8]) -> Result<Vec<u8>, RpcError> {
        let value = self.call("state_call", json!([function, rpc::to_hex(args)]))?;
        rpc::bytes(&value).ok_or_else(|| RpcError::Malformed(value.to_string()))
    }

    /// Submits a SCALE-encoded extrinsic; returns its hash.
    pub fn submit(&self, xt: &[u8]) -> Result<H256, RpcError> {
        let value = self.call("author_submitExtrinsic", json!([rpc::to_hex(xt)]))?;
        rpc::h256(&value).ok_or_else(|| RpcError::Malformed(value.to_string()))
    }

    /// What signed extrinsics for this chain commit to (runtime version, genesis).
    pub fn chain_context(&self) -> extrinsic::ChainContext {
        let version = self.call("state_getRuntimeVersion", json!([])).expect("runtime version");
        let field = |name: &str| version[name].as_u64().expect("version field") as u32;
        extrinsic::ChainContext {
            spec_version: field("specVersion"),
            transaction_version: field("transactionVersion"),
            genesis: self.block_hash(0).expect("genesis hash"),
        }
    }

    /// Signs `call` by `signer` with its next nonce, submits it and waits until it is in a block
    /// (the nonce moved on). Whether the call succeeded is for the caller to check in state.
    pub fn send(&self, call: &[u8], signer: &sp_core::sr25519::Pair, timeout: Duration) {
        self.send_all(&[(call.to_vec(), signer)], timeout);
    }

    /// Signs and submits every `(call, signer)` at once, each signer's calls with consecutive nonces
    /// in the order given, and waits until all are in blocks (each signer's nonce moved past its
    /// last). Whether the calls succeeded is for the caller to check in state.
    pub fn send_all(&self, calls: &[(Vec<u8>, &sp_core::sr25519::Pair)], timeout: Duration) {
        use sp_core::Pair;
        use std::collections::BTreeMap;
        let ctx = self.chain_context();
        let account = |who: &[u8; 32]| {
            self.storage_decoded::<extrinsic::AccountInfo>(&extrinsic::system_account_key(who))
                .map_or(0, |a| a.nonce)
        };
        let mut next: BTreeMap<[u8; 32], u32> = BTreeMap::new();
        for (call, signer) in calls {
            let who = signer.public().0;
            let nonce = *next.entry(who).or_insert_with(|| account(&who));
            let xt = extrinsic::signed_extrinsic(call, signer, nonce, ctx);
            self.submit(&xt).expect("the pool accepts the extrinsic");
            next.insert(who, nonce + 1);
        }
        wait_for("the extrinsics to be included", timeout, || {
            next.iter().all(|(who, nonce)| account(who) >= *nonce).then_some(())
        });
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A well-known development key (`//Alice`, `//Bob`, …).
pub fn dev_pair(uri: &str) -> sp_core::sr25519::Pair {
    use sp_core::Pair;
    sp_core::sr25519::Pair::from_string(uri, None).expect("dev key URIs are valid")
}

/// Polls `f` every 500 ms until it yields `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        sleep(Duration::from_millis(500));
    }
}
