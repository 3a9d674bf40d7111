//! Test harness for Ergon's integration tests: starts real `ergon-node` processes on free loopback
//! ports and talks to them as any client would: transactions and storage through `ergon-client`
//! (the types generated from the runtime's metadata, see [`chain`]), views over JSON-RPC.
//!
//! Every process is killed when its [`Node`] is dropped (also when a test panics), and the kernel kills
//! it if the test process itself dies (`PR_SET_PDEATHSIG`).
//!
//! The node binary is `$ERGON_NODE`, or `ergon-node` in the cargo target directory's `release/`.

pub mod bundle_server;
pub mod chain;
pub mod measure;
pub mod network;
pub mod played;
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

use ergon_client::H256;
use serde_json::{json, Value};

pub use rpc::RpcError;

/// What the tests' own verifier accounts declare when they join the pool: the CPU at 100 ut an
/// hour (the test jobs' rounds are a fraction of a ut), which their 1 100-ERG bonds back on the
/// fast chain (a round filling its 3-minute commit window at that rate: 5 ut, 120 ERG of fees).
pub const TEST_VERIFIER_OFFER: Option<(ergon_protocol::DeviceClass, u128)> =
    Some((ergon_protocol::DeviceClass::Cpu, 100 * ergon_protocol::units::MICRO_UT_PER_UT));

/// Path of the `ergon-node` binary under test: `$ERGON_NODE`, or `ergon-node` in the cargo target
/// directory's `release/`. It must embed the `fast-runtime` build (short slots, epochs and
/// windows): the tests' waits are sized for it, and on the production runtime they would run four
/// to ten times as long and time out. Checked once per test process.
pub fn node_binary() -> PathBuf {
    static CHECKED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let bin = node_binary_path();
            check_fast_runtime(&bin);
            bin
        })
        .clone()
}

/// This checkout's root. Read at run time (cargo sets `CARGO_MANIFEST_DIR` for the tests it runs):
/// a test binary cargo reuses from another checkout sharing the target directory (CI's fresh clone)
/// keeps that checkout's compile-time path, which may be gone.
pub fn repo_dir() -> PathBuf {
    let tests = std::env::var("CARGO_MANIFEST_DIR").unwrap_or(env!("CARGO_MANIFEST_DIR").into());
    Path::new(&tests).join("..")
}

fn node_binary_path() -> PathBuf {
    if let Ok(path) = std::env::var("ERGON_NODE") {
        return PathBuf::from(path);
    }
    let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| {
        // tests/ sits in the workspace root: ../target by default.
        repo_dir().join("target")
    });
    let bin = target.join("release").join("ergon-node");
    assert!(
        bin.exists(),
        "{} not found: build it first with `cargo build --release -p ergon-node --features \
         fast-runtime` (or set ERGON_NODE)",
        bin.display()
    );
    bin
}

/// The last `n` lines of `text`, for failure messages.
fn last_lines(text: &str, n: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(n)..].join("\n")
}

/// Panics unless `bin`'s development chain is marked as running the fast runtime.
fn check_fast_runtime(bin: &Path) {
    let out = Command::new(bin)
        .args(["build-spec", "--chain", "dev"])
        .output()
        .unwrap_or_else(|e| panic!("running {} build-spec: {e}", bin.display()));
    let spec: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{} build-spec --chain dev: not JSON ({e}); {}, {} bytes of output; its stderr ends:\n{}",
            bin.display(),
            out.status,
            out.stdout.len(),
            last_lines(&String::from_utf8_lossy(&out.stderr), 20)
        )
    });
    let name = spec["name"].as_str().unwrap_or_default();
    assert!(
        name.ends_with("(fast runtime)"),
        "{} runs the production runtime (chain {name:?}): the integration tests need the fast \
         one, `cargo build --release -p ergon-node --features fast-runtime` (scripts/test.sh \
         builds it)",
        bin.display()
    );
}

/// A TCP port that was free a moment ago, below the kernel's ephemeral range (32768–60999 on Linux)
/// and never handed out twice by this process. A port the OS picks for `bind(0)` comes from the
/// ephemeral range, where the nodes' own outgoing connections may take it before the node that was
/// given it binds it; ports from a fixed window per process cannot collide that way.
///
/// Test binaries that run at the same time (the lanes of `scripts/test.sh`) get disjoint windows
/// from `ERGON_TEST_PORTS=<first>-<last>`, so two of them never race for one port; by default the
/// window is 20000–31999.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (first, last) = port_window();
    let span = last - first + 1;
    let offset = (std::process::id() * 97) % span;
    for _ in 0..span {
        let port = (first + (offset + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {first}..={last}")
}

/// The window of [`free_port`]: `ERGON_TEST_PORTS`, or 20000–31999.
fn port_window() -> (u32, u32) {
    const DEFAULT: (u32, u32) = (20_000, 31_999);
    let Ok(window) = std::env::var("ERGON_TEST_PORTS") else { return DEFAULT };
    let parsed = window
        .split_once('-')
        .and_then(|(a, b)| Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?)));
    match parsed {
        Some((first, last)) if 1024 <= first && first < last => (first.into(), last.into()),
        _ => panic!("ERGON_TEST_PORTS={window:?}: expected <first>-<last>, 1024 ≤ first < last"),
    }
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
    /// The `ergon-client` connection, made at first use and dropped when the process stops.
    client: std::sync::OnceLock<chain::Client>,
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
        let mut node = Node {
            name: name.to_string(),
            ports,
            child: None,
            log,
            args: all_args,
            client: std::sync::OnceLock::new(),
        };
        node.spawn();
        node
    }

    fn spawn(&mut self) {
        self.child = Some(spawn_logged(&node_binary(), &self.args, &self.log));
    }

    /// Stops the process (SIGTERM, then SIGKILL after 10 s) and waits for it.
    pub fn stop(&mut self) {
        self.client.take();
        if let Some(child) = self.child.take() {
            terminate(child);
        }
    }

    /// Starts the process again with the same arguments (and so the same base path).
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// The `ergon-client` connection to this node (made at first use).
    pub fn client(&self) -> &chain::Client {
        self.client.get_or_init(|| chain::Client::connect(self.ports.rpc))
    }

    /// The last `lines` lines of this node's log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        last_lines(&fs::read_to_string(&self.log).unwrap_or_default(), lines)
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

    /// `state_call` of a runtime API function with SCALE-encoded `args`; the SCALE-encoded result.
    pub fn runtime_call(&self, function: &str, args: &[u8]) -> Result<Vec<u8>, RpcError> {
        let value = self.call("state_call", json!([function, rpc::to_hex(args)]))?;
        rpc::bytes(&value).ok_or_else(|| RpcError::Malformed(value.to_string()))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts `binary` with `args`, stdout and stderr appended to `log`; the kernel kills it if the test
/// process dies.
fn spawn_logged(binary: &Path, args: &[String], log: &Path) -> Child {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file can be created");
    let err = out.try_clone().expect("log file handle clones");
    let mut cmd = Command::new(binary);
    cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: prctl is async-signal-safe; it asks the kernel to kill the child with its parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().unwrap_or_else(|e| panic!("{} starts: {e}", binary.display()))
}

/// SIGTERM, then SIGKILL after 10 s; waits for the process.
fn terminate(mut child: Child) {
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

/// Path of the `ergon-worker` binary under test: `$ERGON_WORKER`, or the target directory's.
pub fn worker_binary() -> PathBuf {
    if let Ok(path) = std::env::var("ERGON_WORKER") {
        return PathBuf::from(path);
    }
    let bin = node_binary().with_file_name("ergon-worker");
    assert!(
        bin.exists(),
        "{} not found: build it first with `cargo build --release -p ergon-worker` (or set \
         ERGON_WORKER)",
        bin.display()
    );
    bin
}

/// Runs the user command line (`node scripts/client/ergon.mjs ARGS`) against the node whose RPC
/// listens on `rpc_port`, with this build's worker for `fetch-model`; returns whether it succeeded
/// and what it printed (stdout, then stderr). Needs nodejs and `npm ci` in `scripts/client`
/// (`scripts/test.sh` does both).
pub fn user_cli(rpc_port: u16, args: &[&str]) -> (bool, String) {
    client_script("ergon.mjs", rpc_port, args)
}

/// The user command line's result with `--yes --json`: the JSON document it prints on stdout.
/// Panics with everything it printed if it fails.
pub fn user_cli_json(rpc_port: u16, args: &[&str]) -> Value {
    let run = run_client("ergon.mjs", rpc_port, &[args, &["--yes", "--json"]].concat());
    match (run.ok, serde_json::from_str(run.stdout.trim())) {
        (true, Ok(value)) => value,
        _ => panic!("ergon.mjs {}: {}{}", args.join(" "), run.stdout, run.stderr),
    }
}

/// The user command line's exit status (None if it was killed) and what it printed.
pub fn user_cli_status(rpc_port: u16, args: &[&str]) -> (Option<i32>, String) {
    let run = run_client("ergon.mjs", rpc_port, args);
    (run.code, format!("{}{}", run.stdout, run.stderr))
}

/// Runs a polkadot.js script of the client package (`node scripts/client/SCRIPT --ws … ARGS`),
/// bounded like [`user_cli`]: whether it succeeded, and what it printed.
pub fn client_script(script: &str, rpc_port: u16, args: &[&str]) -> (bool, String) {
    let run = run_client(script, rpc_port, args);
    (run.ok, format!("{}{}", run.stdout, run.stderr))
}

/// What a Node.js script did.
pub struct ClientRun {
    /// Whether it exited with status 0.
    pub ok: bool,
    /// Its exit status (None if it was killed).
    pub code: Option<i32>,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr (and a line saying it was killed, if it was).
    pub stderr: String,
}

fn run_client(script: &str, rpc_port: u16, args: &[&str]) -> ClientRun {
    let script = repo_dir().join("scripts/client").join(script);
    let ws = format!("ws://127.0.0.1:{rpc_port}");
    // Longer than the CLI's own wait for a transaction (5 minutes), so that its message shows.
    run_node_script(&script, &[&["--ws", &ws][..], args].concat(), USER_CLI_TIMEOUT)
}

/// Runs `node SCRIPT ARGS` (with this build's worker as `$ERGON_WORKER`), killed after `timeout`.
pub fn run_node_script(script: &Path, args: &[&str], timeout: Duration) -> ClientRun {
    let mut child = Command::new("node")
        .arg(script)
        .args(args)
        .env("ERGON_WORKER", worker_binary())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nodejs runs the script (install nodejs, and `npm ci` in its package)");
    let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => sleep(Duration::from_millis(100)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut stderr = stderr.join().unwrap_or_default();
    if status.is_none() {
        stderr.push_str(&format!("\n[killed: {} ran past {timeout:?}]", script.display()));
    }
    ClientRun {
        ok: status.is_some_and(|s| s.success()),
        code: status.and_then(|s| s.code()),
        stdout: stdout.join().unwrap_or_default(),
        stderr,
    }
}

/// Reads a child's pipe to its end on a thread of its own (a full pipe would stall the child).
fn drain<R: std::io::Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Longest a user CLI command may run in a test.
const USER_CLI_TIMEOUT: Duration = Duration::from_secs(360);

/// The asking price, in ERG per ut, of the tests' trainer daemons ([`Daemon::start`]).
pub const TEST_PRICE_PER_UT: u32 = 100;

/// A running `ergon-worker run` daemon (killed when dropped).
pub struct Daemon {
    name: String,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    /// Starts `ergon-worker run` with `args`; output goes to `log_dir/<name>.log`.
    ///
    /// Unless `args` name a price, the daemon asks [`TEST_PRICE_PER_UT`] ERG per ut: the tests'
    /// amounts (the example job's 8.48 ERG price, its fees) and their "budget below every asking
    /// price" jobs are written for it. A daemon without `--price-per-ut` bids the chain's floor.
    pub fn start(name: &str, args: &[String], log_dir: &Path) -> Daemon {
        let mut all = vec!["run".to_string()];
        all.extend(args.iter().cloned());
        if !args.iter().any(|a| a.starts_with("--price-per-ut")) {
            all.extend(["--price-per-ut".to_string(), TEST_PRICE_PER_UT.to_string()]);
        }
        let log = log_dir.join(format!("{name}.log"));
        let mut daemon = Daemon { name: name.into(), args: all, log, child: None };
        daemon.child = Some(spawn_logged(&worker_binary(), &daemon.args, &daemon.log));
        daemon
    }

    /// Kills it with SIGKILL, as a crash or an out-of-memory kill would: no clean shutdown.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again with the same arguments (and so the same data directory).
    pub fn restart(&mut self) {
        self.kill();
        self.child = Some(spawn_logged(&worker_binary(), &self.args, &self.log));
    }

    /// Stops it with SIGTERM, as a service manager does; returns whether it exited by itself
    /// within 10 s with status 0 (else it was killed).
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else { return true };
        // SAFETY: plain signal to a child we own and have not reaped.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Stops it and starts it again (same data directory) with `roles` instead.
    pub fn restart_with_roles(&mut self, roles: &str) {
        self.stop();
        if let Some(i) = self.args.iter().position(|a| a == "--roles") {
            self.args[i + 1] = roles.to_string();
        }
        self.child = Some(spawn_logged(&worker_binary(), &self.args, &self.log));
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of its log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        format!("--- {} ---\n{}", self.name, last_lines(&self.log(), lines))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            terminate(child);
        }
    }
}

/// A well-known development key (`//Alice`, `//Bob`, …).
pub fn dev_pair(uri: &str) -> ergon_client::keys::Signer {
    ergon_client::keys::from_uri(uri).expect("dev key URIs are valid")
}

/// Polls `f` every 500 ms until it yields `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    wait_for_daemons(what, timeout, &[], f)
}

/// [`wait_for`], with the log tails of `daemons` in the panic message: what a failed run in CI
/// leaves to find out why.
pub fn wait_for_daemons<T>(
    what: &str,
    timeout: Duration,
    daemons: &[&Daemon],
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        check(
            Instant::now() <= deadline,
            &format!("timed out after {timeout:?} waiting for {what}"),
            daemons,
        );
        sleep(Duration::from_millis(500));
    }
}

/// Panics with `what` and the last 40 lines of each of `daemons`' logs if `cond` fails.
pub fn check(cond: bool, what: &str, daemons: &[&Daemon]) {
    if !cond {
        let logs: Vec<String> = daemons.iter().map(|d| d.log_tail(40)).collect();
        panic!("{what}\n{}", logs.join("\n"));
    }
}

/// `ergon-worker run` arguments for the dev key `key` with `roles` (comma-separated) against
/// `node`: its data under `dir/name`, its bundle server on a free loopback port, 2 000 ERG bonded.
pub fn daemon_args(node: &Node, key: &str, roles: &str, dir: &Path, name: &str) -> Vec<String> {
    [
        "--chain",
        &format!("ws://127.0.0.1:{}", node.ports.rpc),
        "--dev-key",
        key,
        "--roles",
        roles,
        "--listen",
        &format!("127.0.0.1:{}", free_port()),
        "--data-dir",
        &dir.join(name).to_string_lossy(),
        "--bond",
        "2000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Job `job` as the node's `ergon_job` RPC shows it (JSON).
pub fn job_view(node: &Node, job: u64) -> Value {
    node.call("ergon_job", json!([job])).expect("ergon_job")
}

/// Daemon arguments (the attack suite's) that hang a training started from scratch once its step
/// 90 is done, three checkpoints past C0 in the example specs, for a test to kill the daemon there:
/// the example MLP trains in about a second, faster than a test can catch it mid-training.
pub const STALL_MID_TRAINING: [&str; 2] = ["--stall-training-at", "90"];

/// The market's daemons on a dev chain: Bob a trainer (with the arguments `bob_extra` too),
/// Charlie and Dave verifiers and drillers, each with 2 000 ERG bonded (data under `dir/bob`, …).
/// Returns once all three have bonded and the verifiers have joined the pool and registered as
/// drillers: a draw only takes verifiers that joined before its randomness began, so jobs should
/// be posted after this.
pub fn market_daemons(node: &Node, dir: &Path, bob_extra: &[&str]) -> [Daemon; 3] {
    let start = |name: &str, key: &str, roles: &str, extra: &[&str]| {
        let mut args = daemon_args(node, key, roles, dir, name);
        args.extend(extra.iter().map(|a| a.to_string()));
        Daemon::start(name, &args, dir)
    };
    let daemons = [
        start("bob", "//Bob", "trainer", bob_extra),
        start("charlie", "//Charlie", "verifier,driller", &[]),
        start("dave", "//Dave", "verifier,driller", &[]),
    ];
    for who in ["//Bob", "//Charlie", "//Dave"] {
        let account = dev_pair(who).public_key().0;
        wait_for(&format!("{who}'s daemon to bond"), Duration::from_secs(180), || {
            node.bond(&account).filter(|b| b.active >= 2_000 * ergon_protocol::units::ERG)
        });
    }
    for daemon in &daemons[1..] {
        wait_for("the verifiers to join the pool and drill", Duration::from_secs(120), || {
            let log = daemon.log();
            (log.contains("joining the verifier pool: in a block")
                && log.contains("registering as a driller: in a block"))
            .then_some(())
        });
    }
    daemons
}

/// Alice posts the job spec at `spec_path` with the user CLI: 100 ERG budget, bids for 20 blocks,
/// 400 blocks to deliver. Returns the job id the CLI prints.
pub fn post_job_as_alice(rpc_port: u16, spec_path: &Path) -> u64 {
    post_job_as(rpc_port, spec_path, "//Alice", 100)
}

/// `key` posts the job spec at `spec_path` with the user CLI: `budget_erg` ERG, bids for 20
/// blocks, 400 blocks to deliver. Returns the job id the CLI prints.
pub fn post_job_as(rpc_port: u16, spec_path: &Path, key: &str, budget_erg: u32) -> u64 {
    post_job_windowed(rpc_port, spec_path, key, budget_erg, 20, 400)
}

/// [`post_job_as`] with the bid window and the deadline (blocks from now) given: a test whose
/// owner accepts a bid itself gives a window long enough never to close first.
pub fn post_job_windowed(
    rpc_port: u16,
    spec_path: &Path,
    key: &str,
    budget_erg: u32,
    bid_window: u32,
    deadline: u32,
) -> u64 {
    let spec = spec_path.to_string_lossy();
    let (budget, window, deadline) =
        (budget_erg.to_string(), bid_window.to_string(), deadline.to_string());
    let args = ["post-job", &spec, "--key", key, "--budget", &budget];
    let posted = user_cli_json(
        rpc_port,
        &[&args[..], &["--bid-window", &window, "--deadline", &deadline]].concat(),
    );
    posted["jobs"][0].as_u64().unwrap_or_else(|| panic!("a job id: {posted}"))
}

/// Whether the worker under test was built with the attack suite (`--features ergon-worker/attacks`,
/// as `scripts/test.sh` builds it): only then does the daemon take `--forge`.
pub fn worker_has_forgers() -> bool {
    let out = Command::new(worker_binary())
        .args(["run", "--dev-key", "//Eve", "--data-dir", "/nonexistent", "--forge", "no-such"])
        .stdin(Stdio::null())
        .output()
        .expect("ergon-worker runs");
    String::from_utf8_lossy(&out.stderr).contains("no attack called no-such")
}
