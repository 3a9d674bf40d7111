//! The daemon's command line. Every option is also an environment variable (`ERGON_*`), so a
//! service manager or a container needs no wrapper script; nothing is asked interactively.

use std::path::PathBuf;

use ergon_client::keys;
use ergon_engine::device::OpenDevice;

use super::policy::{self, Capacity, Policy, ERG};

/// What the daemon does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Bids on open jobs it can train in time, trains the ones it wins, serves and commits bundles.
    Trainer,
    /// Joins the verifier pool and replays the segments it is drawn for; commits and reveals.
    Verifier,
    /// Takes Proof-of-Drilling tasks at the declared capacity; computes, commits and reveals.
    Driller,
}

/// `ergon-worker run` options.
#[derive(Clone, Debug, clap::Args)]
pub struct Config {
    /// The node's WebSocket RPC.
    #[arg(long, env = "ERGON_CHAIN", default_value = "ws://127.0.0.1:9944")]
    pub chain: String,
    /// File whose first line is the account's secret URI (a mnemonic, or a 0x seed).
    #[arg(long, env = "ERGON_KEY_FILE", required_unless_present = "dev_key")]
    pub key_file: Option<PathBuf>,
    /// A well-known development key instead (`//Alice`, `//Bob`…): dev chains only.
    #[arg(long, env = "ERGON_DEV_KEY", conflicts_with = "key_file")]
    pub dev_key: Option<String>,
    /// Roles, comma-separated.
    #[arg(
        long,
        env = "ERGON_ROLES",
        value_delimiter = ',',
        default_value = "trainer,verifier,driller"
    )]
    pub roles: Vec<Role>,
    /// Address the bundle server listens on.
    #[arg(long, env = "ERGON_LISTEN", default_value = "127.0.0.1:8700")]
    pub listen: String,
    /// URL verifiers and validators fetch bundles from (default: `http://<listen>`).
    #[arg(long, env = "ERGON_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Directory for bundles, the store and downloads.
    #[arg(long, env = "ERGON_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Bond this many ERG in all at start (0: bond nothing; the roles need the minimum bond).
    #[arg(long, env = "ERGON_BOND", default_value_t = 0)]
    pub bond: u128,
    /// Asking price per ut of training work, in ERG (decimals allowed: the chain's floors are
    /// 0.05 ERG on a CPU, 0.0086 on a GPU). Default: none — the bid is the machine's cost plus
    /// the margin, never below the floor of the class it trains on, so a job posted with its
    /// least budget gets bids.
    #[arg(long, env = "ERGON_PRICE_PER_UT", value_parser = erg_amount)]
    pub price_per_ut: Option<u128>,
    /// What an hour of this machine costs, in milli-ERG (bids never go below it plus the margin).
    #[arg(long, env = "ERGON_COST_PER_HOUR", default_value_t = 1_000)]
    pub cost_per_hour_milli: u128,
    /// Least margin over the cost, in percent.
    #[arg(long, env = "ERGON_MIN_MARGIN", default_value_t = 20)]
    pub min_margin: u32,
    /// Training throughput in ut per hour, for the deadline check (default: measured at start by
    /// training a reference model for a second, halved). With --cuda, the GPU's.
    #[arg(long, env = "ERGON_THROUGHPUT")]
    pub throughput: Option<f64>,
    /// Drilling capacity to declare, in ut per hour (default: half the measured f32 peak). Tasks are
    /// sized to it: declaring more than the machine does makes it miss commit windows (slashed).
    #[arg(long, env = "ERGON_DRILL_CAPACITY")]
    pub drill_capacity: Option<f64>,
    /// Serve Prometheus metrics at this address (e.g. 127.0.0.1:9616); off when not given.
    #[arg(long, env = "ERGON_METRICS")]
    pub metrics: Option<String>,
    /// Memory a training may use, in MiB (default: what the kernel reports available at start, or
    /// with --cuda the GPU's memory).
    #[arg(long, env = "ERGON_MEMORY_MIB")]
    pub memory_mib: Option<u64>,
    /// CPU threads for trainings, verifications and drills (0: one per core).
    #[arg(long, env = "ERGON_THREADS", default_value_t = 0)]
    pub threads: usize,
    /// Train and verify on a GPU (`--cuda`, `--cuda-device N`); drills stay on the CPU, and so do
    /// trainings of convolutional models (CPU verifiers replay a GPU's CNN over ε).
    #[command(flatten)]
    pub device: crate::device::DeviceArgs,
    /// Decoded datasets kept between jobs, in MiB (the least recently used go first past it).
    #[arg(long, env = "ERGON_DATASET_CACHE_MIB", default_value_t = 1024)]
    pub dataset_cache_mib: u64,
    /// Tests only (the `attacks` feature): a cheating trainer that commits this forger's bundle
    /// (an attack suite name: `wronglearningrate`, `lazy-1`, …) instead of training.
    #[cfg(feature = "attacks")]
    #[arg(long, hide = true, value_parser = parse_attack)]
    pub forge: Option<ergon_engine::attacks::Attack>,
    /// Tests only (the `attacks` feature): a training started from scratch hangs once step N is
    /// done (its checkpoints through N still reach the disk), as a stuck machine would, so that a
    /// test kills the daemon mid-training at a known point; a resumed training never hangs.
    #[cfg(feature = "attacks")]
    #[arg(long, hide = true, value_name = "STEP")]
    pub stall_training_at: Option<u64>,
}

/// Whether the node's `system_chainType` is a test network (`Development` or `Local`), whose
/// validators and daemons all run on one host: there bundle URLs may be loopback, and URIs from the
/// chain may be local paths and private hosts.
pub fn is_test_network(chain_type: &serde_json::Value) -> bool {
    matches!(chain_type.as_str(), Some("Development" | "Local"))
}

/// Refuses a bundle URL that the validators and verifiers of a live chain cannot reach (issue 34):
/// a trainer that forgets `--public-url` would commit `http://127.0.0.1:8700/…`, which every remote
/// validator and verifier resolves to itself (and on a live chain refuses, as any private host:
/// `ergon_protocol::url`), and be slashed for an unavailable bundle. Test networks
/// ([`is_test_network`]) take any URL.
pub fn check_public_url(url: &str, chain_type: &serde_json::Value) -> Result<(), String> {
    if is_test_network(chain_type) {
        return Ok(());
    }
    ergon_protocol::url::check(url).map_err(|why| {
        format!(
            "the bundle URL {url} is {why}, and this is a live chain ({chain_type}): give \
             --public-url with a public address the validators and verifiers reach"
        )
    })
}

/// An attack of the suite by its report name.
#[cfg(feature = "attacks")]
fn parse_attack(name: &str) -> Result<ergon_engine::attacks::Attack, String> {
    // The segment count only sizes the variants with a parameter; 30 is the market's minimum.
    ergon_engine::attacks::Attack::all(30)
        .into_iter()
        .find(|a| a.name() == name)
        .ok_or_else(|| format!("no attack called {name}"))
}

impl Config {
    /// Whether the daemon has `role`.
    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// The signing key (from the key file, or the dev key).
    pub fn signer(&self) -> ergon_client::Result<keys::Signer> {
        match (&self.key_file, &self.dev_key) {
            (Some(file), _) => keys::from_file(file),
            (None, Some(uri)) => keys::dev(uri),
            (None, None) => Err(ergon_client::Error::Key("give --key-file or --dev-key".into())),
        }
    }

    /// The URL the bundles are served at.
    pub fn public_url(&self) -> String {
        self.public_url.clone().unwrap_or_else(|| format!("http://{}", self.listen))
    }

    /// [`check_public_url`] for this daemon's bundle URL.
    pub fn check_public_url(&self, chain_type: &serde_json::Value) -> Result<(), String> {
        check_public_url(&self.public_url(), chain_type)
    }

    /// The drilling capacity to declare, in micro-ut per hour.
    pub fn drill_capacity(&self) -> u128 {
        match self.drill_capacity {
            Some(ut) => (ut * 1e6) as u128,
            None => (peak_micro_ut_per_hour() as f64 * 0.5) as u128,
        }
    }

    /// The bidding policy: prices from the options, capacity from the options or measured on
    /// `device` and `threads` (where the daemon trains). On a GPU host, `--throughput` and
    /// `--memory-mib` are the GPU's (a training must fit in its memory), and the CPU's capacity,
    /// for the jobs it trains there, is measured.
    pub fn policy(&self, threads: &ergon_engine::Threads, device: &OpenDevice) -> Policy {
        // Measured on an MLP; jobs of other shapes (convolutions on a CPU) train slower per FLOP:
        // half of it, conservatively.
        let measured =
            |on: &candle_core::Device| measured_training_micro_ut_per_hour(threads, on) / 2;
        let given = Capacity {
            micro_ut_per_hour: match self.throughput {
                Some(ut) => (ut * 1e6) as u128,
                None => measured(&device.device),
            },
            memory_bytes: match (self.memory_mib, device.memory_bytes) {
                (Some(mib), _) => mib << 20,
                (None, Some(gpu)) => gpu,
                (None, None) => policy::available_memory().unwrap_or(1 << 30),
            },
            class: device.class,
        };
        let (cpu, gpu) = if device.device.is_cpu() {
            (given, None)
        } else {
            let cpu = Capacity {
                micro_ut_per_hour: measured(&candle_core::Device::Cpu),
                memory_bytes: policy::available_memory().unwrap_or(1 << 30),
                class: ergon_protocol::DeviceClass::Cpu,
            };
            (cpu, Some(given))
        };
        Policy {
            price_per_ut: self.price_per_ut.unwrap_or(0),
            cost_per_hour: self.cost_per_hour_milli.saturating_mul(ERG / 1_000),
            min_margin_percent: self.min_margin,
            cpu,
            gpu,
            deadline_use_percent: 50,
        }
    }
}

/// Training throughput in micro-ut per hour, measured once by training the reference model
/// (`ergon_engine::calibrate`) for a second on `device` (and `threads`).
fn measured_training_micro_ut_per_hour(
    threads: &ergon_engine::Threads,
    device: &candle_core::Device,
) -> u128 {
    let flops = ergon_engine::calibrate::training_flops_per_second(Some(threads), device, 1.0)
        .unwrap_or(1e8);
    (flops * 3600.0 / ergon_job_spec::FLOPS_PER_UT as f64 * 1e6) as u128
}

/// The machine's f32 matrix-product peak in micro-ut per hour, measured once (half a second).
fn peak_micro_ut_per_hour() -> u128 {
    static PEAK: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    *PEAK.get_or_init(|| {
        let ops = ergon_engine::drill::peak_f32_ops_per_second(&candle_core::Device::Cpu, 0.5)
            .unwrap_or(1e9);
        (ops * 3600.0 / ergon_job_spec::FLOPS_PER_UT as f64 * 1e6) as u128
    })
}

/// An amount of ERG on the command line, in plancks.
fn erg_amount(text: &str) -> Result<u128, String> {
    ergon_protocol::units::plancks(text)
        .ok_or_else(|| format!("'{text}' is not an amount of ERG (e.g. 100 or 0.0086)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// No asking price unless the operator sets one: the bid is then the cost plus the margin,
    /// or the chain's floor (`policy`'s `a_daemon_on_defaults_bids_what_a_least_budget_pays`).
    #[test]
    fn the_asking_price_is_none_by_default() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            run: Config,
        }
        let parse = |extra: &[&str]| {
            let args = ["run", "--dev-key", "//Bob", "--data-dir", "/tmp/x"];
            <Cli as clap::Parser>::try_parse_from(args.iter().chain(extra)).unwrap().run
        };
        assert_eq!(parse(&[]).price_per_ut, None);
        assert_eq!(parse(&["--price-per-ut", "0.01"]).price_per_ut, Some(ERG / 100));
    }

    #[test]
    fn a_loopback_or_private_bundle_url_is_refused_on_a_live_chain_only() {
        let live = json!("Live");
        for url in [
            "http://127.0.0.1:8700",
            "http://127.3.4.5:8700/jobs",
            "http://localhost:8700",
            "http://LOCALHOST.:80",
            "http://node.localhost",
            "http://[::1]:8700",
            "http://0.0.0.0:8700",
            "https://user@127.0.0.1/x",
        ] {
            let err = check_public_url(url, &live).expect_err(url);
            assert!(err.contains("--public-url"), "{err}");
            assert!(check_public_url(url, &json!("Development")).is_ok(), "{url}");
            assert!(check_public_url(url, &json!("Local")).is_ok(), "{url}");
            assert!(check_public_url(url, &json!({ "Custom": "x" })).is_err(), "{url}");
        }
        // A private range is as unreachable from outside, and refused by every validator.
        for url in ["http://10.0.0.7:8700", "http://192.168.1.20:8700/b", "http://[fd00::7]:80"] {
            assert!(check_public_url(url, &live).is_err(), "{url}");
            assert!(check_public_url(url, &json!("Local")).is_ok(), "{url}");
        }
        for url in
            ["http://8.8.4.4:8700", "https://bundles.example.org/b", "http://[2606:4700::1111]:80"]
        {
            assert!(check_public_url(url, &live).is_ok(), "{url}");
        }
    }
}
