//! `ergon-worker verify`: Proof of Training on a bundle, local or served.

use std::{path::PathBuf, process::ExitCode};

use ergon_engine::{
    data, load_spec, rng,
    verify::{self, VerifyOptions},
};

use super::{parse_account, parse_hex, parse_seed, Outcome};

/// `verify` options.
#[derive(clap::Args)]
pub struct Args {
    /// The job spec (JSON).
    #[arg(long)]
    spec: PathBuf,
    /// Bundle directory, or the http(s) URL it is served at.
    #[arg(long)]
    bundle: String,
    /// Challenge bytes as hex (on-chain randomness): choose the replayed segments.
    #[arg(long, default_value = "")]
    challenge: String,
    /// Replay these segments instead (comma-separated `i` for Cᵢ → Cᵢ₊₁).
    #[arg(long, value_delimiter = ',')]
    segments: Vec<u32>,
    /// Segments to draw from the challenge.
    #[arg(long, default_value_t = verify::DEFAULT_SEGMENTS)]
    count: u32,
    /// The committed Merkle root (64 hex digits).
    #[arg(long)]
    root: Option<String>,
    /// The prescribed seed (64 hex digits); else derived from --job-id and --trainer. One of the
    /// two is required: a bundle is only valid under its job's seed.
    #[arg(long, conflicts_with = "trainer", required_unless_present = "trainer")]
    seed: Option<String>,
    /// On-chain job id (seed derivation).
    #[arg(long, default_value_t = 0)]
    job_id: u64,
    /// Trainer account (seed derivation): its raw 32 bytes as 0x-hex.
    #[arg(long)]
    trainer: Option<String>,
    /// ε: largest accepted relative error of a replayed update.
    #[arg(long, default_value_t = verify::DEFAULT_EPSILON)]
    epsilon: f64,
    /// τ: smallest accepted cosine between claimed and replayed updates.
    #[arg(long, default_value_t = verify::DEFAULT_TAU)]
    tau: f64,
    /// The kernels revision the job pins (its on-chain record's `kernels`): the bundle must name
    /// it, and only a worker of that revision replays it (default: this worker's).
    #[arg(long, default_value_t = ergon_engine::KERNELS_REVISION)]
    kernels: u32,
    /// Also write the report (JSON) here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Print one JSON object instead of the checks: `passed`, `evidence`, `failed_segment`,
    /// `checks`, `sketches`, `replay_seconds`, `seconds` (the whole command: download, reading,
    /// replay, rules, metrics) and `downloaded_bytes` (of a served bundle).
    #[arg(long)]
    json: bool,
    /// CPU threads for the tensor kernels (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Replay on a GPU (a bundle trained on a CPU or another GPU passes within the tolerances).
    #[command(flatten)]
    device: ergon_worker::device::DeviceArgs,
}

/// Verifies and prints each check; exit status 0 = pass, 1 = fail.
pub fn run(args: Args) -> Outcome {
    let started = std::time::Instant::now();
    let spec = load_spec(&args.spec)?;
    let expected_seed = match (&args.seed, &args.trainer) {
        (Some(s), _) => parse_seed(s)?,
        (None, Some(t)) => rng::job_seed(args.job_id, &parse_account(Some(t))?),
        // clap requires one of the two.
        (None, None) => return Err("the seed is mandatory: give --seed or --trainer".into()),
    };
    // A served bundle is downloaded first, only the checkpoints the checks read (and removed
    // afterwards).
    let served = args.bundle.starts_with("http://") || args.bundle.starts_with("https://");
    let local = if served { download_dir() } else { PathBuf::from(&args.bundle) };
    let mut opts = VerifyOptions::new(local.clone(), expected_seed);
    opts.source = served.then(|| args.bundle.clone());
    opts.challenge = parse_hex(&args.challenge)?;
    opts.segments = args.segments;
    opts.segment_count = args.count;
    opts.epsilon = args.epsilon;
    opts.tau = args.tau;
    opts.kernels = args.kernels;
    opts.expected_root = args.root.as_deref().map(parse_seed).transpose()?;
    opts.threads = Some(super::threads(args.threads)?);
    let device = args.device.open()?;
    eprintln!("device {}", device.description);
    opts.device = device.device;
    let verdict = if served {
        let verdict = verify::fetch_for(&spec, &args.bundle, &opts)
            .and_then(|_| verify::verify(&spec, &opts));
        let _ = std::fs::remove_dir_all(&local);
        verdict?
    } else {
        verify::verify(&spec, &opts)?
    };
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_vec_pretty(&verdict)?)?;
    }
    let exit = if verdict.passed { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    if args.json {
        let out = serde_json::json!({
            "passed": verdict.passed,
            "evidence": data::hex(&verdict.evidence_hash()),
            "failed_segment": verdict.failed_segment(),
            "checks": verdict.checks,
            "sketches": verdict.sketches,
            "replay_seconds": verdict.replay_seconds,
            "seconds": started.elapsed().as_secs_f64(),
            "downloaded_bytes": data::downloaded_bytes(),
        });
        println!("{out}");
        return Ok(exit);
    }
    for c in &verdict.checks {
        println!(
            "{} {:<12} {}  [{}]",
            if c.passed { "ok  " } else { "FAIL" },
            c.name,
            c.measured,
            c.threshold
        );
    }
    println!("evidence {}", data::hex(&verdict.evidence_hash()));
    // The replay evidence a pass reveals on chain: one sketch per segment, in order.
    println!("sketches {}", serde_json::to_string(&verdict.sketches)?);
    if let Some(segment) = verdict.failed_segment() {
        println!("failed-segment {segment}");
    }
    println!("verdict {}", if verdict.passed { "PASS" } else { "FAIL" });
    Ok(exit)
}

/// A fresh temporary directory for a download.
fn download_dir() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    std::env::temp_dir().join(format!("ergon-verify-{}-{nanos}", std::process::id()))
}
