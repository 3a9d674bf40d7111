//! `ergon-worker`: the command line of Ergon's trainer process.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use ergon_worker::{bundle, data, load_spec, rng, train, Error};

#[derive(Parser)]
#[command(
    name = "ergon-worker",
    version,
    about = "Ergon trainer: train job specs into verifiable bundles"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the trainer daemon: follow the chain, bid, train, serve, verify — until SIGINT/SIGTERM.
    /// Every option is also an environment variable (ERGON_*); logs go to stderr (RUST_LOG).
    Run(Box<ergon_worker::daemon::Config>),
    /// Print what a daemon is doing and what it earned: from its store (as its metrics endpoint
    /// counts) and from the chain (its jobs, ECP and bond).
    Status {
        /// The daemon's data directory.
        #[arg(long, env = "ERGON_DATA_DIR")]
        data_dir: PathBuf,
        /// The node's WebSocket RPC.
        #[arg(long, env = "ERGON_CHAIN", default_value = "ws://127.0.0.1:9944")]
        chain: String,
    },
    /// Train a job spec into a checkpoint bundle (resumes an interrupted run in the same directory).
    Train {
        /// The job spec (JSON).
        #[arg(long)]
        spec: PathBuf,
        /// Bundle directory.
        #[arg(long)]
        out: PathBuf,
        /// Training seed as 64 hex digits; default: derived from --job-id and --trainer.
        #[arg(long, conflicts_with_all = ["job_id", "trainer"])]
        seed: Option<String>,
        /// On-chain job id (seed derivation).
        #[arg(long, default_value_t = 0)]
        job_id: u64,
        /// Trainer account (seed derivation): its raw 32 bytes as 0x-hex (all zeros offline).
        #[arg(long)]
        trainer: Option<String>,
        /// CPU threads for the tensor kernels (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Train on the first CUDA GPU (needs the `cuda` build feature).
        #[arg(long)]
        cuda: bool,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Print a bundle's manifest summary and check every file against it and the root.
    Inspect {
        /// Bundle directory.
        bundle: PathBuf,
    },
    /// Verify a bundle against its job spec (Proof of Training); exit status 0 = pass, 1 = fail.
    Verify {
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
        #[arg(long, default_value_t = ergon_worker::verify::DEFAULT_SEGMENTS)]
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
        #[arg(long, default_value_t = ergon_worker::verify::DEFAULT_EPSILON)]
        epsilon: f64,
        /// τ: smallest accepted cosine between claimed and replayed updates.
        #[arg(long, default_value_t = ergon_worker::verify::DEFAULT_TAU)]
        tau: f64,
        /// Also write the report (JSON) here.
        #[arg(long)]
        report: Option<PathBuf>,
        /// CPU threads for the tensor kernels (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Download a completed job's model (the bundle's manifest and final checkpoint), check it
    /// against the committed root, and evaluate it on the spec's validation set.
    FetchModel {
        /// The job spec (JSON; `ergon_job` returns it).
        #[arg(long)]
        spec: PathBuf,
        /// The URL the bundle is served at.
        #[arg(long)]
        bundle: String,
        /// The committed Merkle root (64 hex digits).
        #[arg(long)]
        root: String,
        /// Directory to write the manifest and the final checkpoint to.
        #[arg(long)]
        out: PathBuf,
    },
    /// Validate a job spec and print its parameter count and FLOPs.
    Check {
        /// The job spec (JSON).
        #[arg(long)]
        spec: PathBuf,
    },
    /// Print the content root of data files (for writing specs).
    ContentRoot {
        /// Files or URLs, in the order the format names them.
        files: Vec<String>,
    },
    /// Run a Proof-of-Drilling task; print its result hash, difficulty and measured throughput.
    Drill {
        /// The task (JSON: `{"kind": "MatmulChain", "seed": "0x…", "dim": 512, "length": 16}` or
        /// `{"kind": "QuantizedInference", "model": "0x…", "model_uri": "…", "dataset": "0x…",
        /// "dataset_uri": "…", "widths": [784, 128, 10], "samples": 10000}`).
        #[arg(long)]
        task: PathBuf,
        /// Threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Run matrix products on the first CUDA GPU (a build with `--features cuda`).
        #[arg(long)]
        cuda: bool,
        /// Use the integer matrix kernel instead of exact f32 products (same bytes; slower on CPUs
        /// whose f32 units outrun their int8 ones).
        #[arg(long, conflicts_with = "cuda")]
        int8: bool,
    },
    /// Serve bundle directories over HTTP (with byte ranges) for verifiers and availability checks:
    /// `<dir>/<bundle>/manifest.json` is served at `http://<addr>/<bundle>/manifest.json`.
    Serve {
        /// Directory whose files are served.
        #[arg(long)]
        dir: PathBuf,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8700")]
        addr: String,
    },
}

/// A trainer account: its raw 32 bytes as 0x-hex (the seed binds the bytes, never an address text);
/// none is the all-zero account of offline runs.
fn parse_account(s: Option<&str>) -> Result<[u8; 32], String> {
    match s {
        None => Ok([0; 32]),
        Some(s) => bundle::parse_hash(s).ok_or_else(|| {
            format!("trainer {s:?} is not an account's 32 bytes as hex (0x followed by 64 digits)")
        }),
    }
}

fn parse_seed(s: &str) -> Result<rng::Seed, String> {
    bundle::parse_hash(s).ok_or_else(|| format!("seed {s:?} is not 32 bytes of hex"))
}

fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim_start_matches("0x");
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return Err(format!("{s:?} is not hex"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("{s:?} is not hex")))
        .collect()
}

/// Runs the daemon on a multi-threaded async runtime; a fatal error exits with its own code.
fn run_daemon(
    config: ergon_worker::daemon::Config,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match runtime.block_on(ergon_worker::daemon::run(config)) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(fatal) => {
            eprintln!("error: {fatal}");
            Ok(ExitCode::from(fatal.exit_code()))
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, Box<dyn std::error::Error>> {
    match cli.command {
        Command::Run(config) => run_daemon(*config),
        Command::Status { data_dir, chain } => {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let report =
                runtime.block_on(ergon_worker::daemon::status::report(&data_dir, &chain))?;
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Train { spec, out, seed, job_id, trainer, threads, cuda, quiet } => {
            if let Some(t) = threads {
                // Read by candle's CPU kernels at first use.
                std::env::set_var("RAYON_NUM_THREADS", t.to_string());
            }
            let spec = load_spec(&spec)?;
            let seed = match seed {
                Some(s) => parse_seed(&s)?,
                None => rng::job_seed(job_id, &parse_account(trainer.as_deref())?),
            };
            let device =
                if cuda { candle_core::Device::new_cuda(0)? } else { candle_core::Device::Cpu };
            let summary = spec.validate()?;
            eprintln!(
                "training {} parameters, {} steps, {:.3} ut of work, seed {}",
                summary.parameters,
                summary.total_steps,
                summary.training_micro_ut() as f64 / 1e6,
                data::hex(&seed)
            );
            let opts = train::TrainOptions {
                device,
                progress: !quiet,
                ..train::TrainOptions::new(out, seed)
            };
            match train::train(&spec, &opts)? {
                train::Outcome::Finished(r) => {
                    println!("root {}", data::hex(&r.root));
                    println!(
                        "validation loss {:.4}, accuracy {:.2}%",
                        r.manifest.metrics.validation_loss,
                        100.0 * r.manifest.metrics.validation_accuracy
                    );
                    let samples = spec.train.samples as f64 * spec.epochs as f64;
                    println!(
                        "trained in {:.1} s ({:.1}% writing checkpoints)",
                        r.train_seconds,
                        100.0 * r.checkpoint_seconds / r.train_seconds.max(1e-9)
                    );
                    println!(
                        "throughput {:.0} samples/s (checkpoint writes excluded)",
                        samples / (r.train_seconds - r.checkpoint_seconds).max(1e-9)
                    );
                }
                train::Outcome::Halted(step) => println!("halted after step {step}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Drill { task, threads, cuda, int8 } => {
            let task = ergon_worker::drill::load_task(&task)?;
            let threads = threads.unwrap_or_else(|| {
                std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
            });
            use ergon_worker::drill::Engine;
            let engine = match (cuda, int8) {
                (true, _) => Engine::Candle(candle_core::Device::new_cuda(0)?),
                (false, true) => Engine::Int8 { threads },
                (false, false) => Engine::Candle(candle_core::Device::Cpu),
            };
            let outcome = ergon_worker::drill::run_task(&task, threads, &engine)?;
            let engine = match &engine {
                Engine::Candle(candle_core::Device::Cpu) => "exact f32 products, CPU".to_string(),
                Engine::Candle(_) => "exact f32 products, CUDA".to_string(),
                Engine::Int8 { threads } => format!("int8 kernel, {threads} threads"),
            };
            match &task {
                ergon_worker::drill::DrillTask::MatmulChain(t) => {
                    println!("task        MatmulChain dim={} length={}", t.dim, t.length)
                }
                ergon_worker::drill::DrillTask::QuantizedInference { task: t, .. } => println!(
                    "task        QuantizedInference widths={:?} samples={}",
                    t.widths, t.samples
                ),
            }
            if let Some(why) = &outcome.invalid {
                println!("invalid     {why}: the result is the agreed \"invalid inputs\" hash");
            }
            println!("difficulty  {} micro-ut ({} integer ops)", outcome.micro_ut, outcome.ops);
            println!("result      {}", data::hex(&outcome.result));
            println!("time        {:.3} s ({engine})", outcome.seconds);
            println!(
                "throughput  {:.3} ut/hour ({:.2} Gop/s)",
                outcome.ut_per_hour(),
                outcome.ops_per_second() / 1e9
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { dir, addr } => {
            let server = ergon_worker::serve::Server::bind(&addr, &dir)?;
            println!("serving {} at http://{}/", dir.display(), server.local_addr()?);
            server.run()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect { bundle: dir } => {
            let report = bundle::inspect(&dir)?;
            let m = &report.manifest;
            println!("spec hash      {}", m.spec_hash);
            println!("seed           {}", m.seed);
            println!(
                "environment    {} {} threads={} [{}]",
                m.environment.device,
                m.environment.precision,
                m.environment.threads,
                m.environment.cpu_features.join(",")
            );
            println!(
                "steps          {} ({} per epoch, batch {})",
                m.total_steps, m.steps_per_epoch, m.batch_size
            );
            println!(
                "checkpoints    {} (every {} steps)",
                m.checkpoints.len(),
                m.checkpoint_interval
            );
            if let (Some(first), Some(last)) = (m.losses.first(), m.losses.last()) {
                println!("loss           {first:.4} → {last:.4}");
            }
            println!(
                "validation     loss {:.4}, accuracy {:.2}%",
                m.metrics.validation_loss,
                100.0 * m.metrics.validation_accuracy
            );
            println!("final model    {}", m.final_model_hash);
            println!("root           {}", data::hex(&report.root));
            if report.problems.is_empty() {
                println!("ok: every checkpoint matches the manifest");
                Ok(ExitCode::SUCCESS)
            } else {
                for p in &report.problems {
                    println!("PROBLEM: {p}");
                }
                Ok(ExitCode::FAILURE)
            }
        }
        Command::Verify {
            spec,
            bundle: dir,
            challenge,
            segments,
            count,
            root,
            seed,
            job_id,
            trainer,
            epsilon,
            tau,
            report,
            threads,
        } => {
            if let Some(t) = threads {
                std::env::set_var("RAYON_NUM_THREADS", t.to_string());
            }
            let spec = load_spec(&spec)?;
            let expected_seed = match (seed, trainer) {
                (Some(s), _) => parse_seed(&s)?,
                (None, Some(t)) => rng::job_seed(job_id, &parse_account(Some(&t))?),
                // clap requires one of the two.
                (None, None) => {
                    return Err("the seed is mandatory: give --seed or --trainer".into())
                }
            };
            // A served bundle is downloaded first (and removed afterwards).
            let download = (dir.starts_with("http://") || dir.starts_with("https://")).then(|| {
                std::env::temp_dir().join(format!(
                    "ergon-verify-{}-{}",
                    std::process::id(),
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_nanos())
                        .unwrap_or_default()
                ))
            });
            let local = match &download {
                Some(tmp) => {
                    bundle::fetch(&dir, tmp)?;
                    tmp.clone()
                }
                None => PathBuf::from(&dir),
            };
            let mut opts = ergon_worker::verify::VerifyOptions::new(local, expected_seed);
            opts.challenge = parse_hex(&challenge)?;
            opts.segments = segments;
            opts.segment_count = count;
            opts.epsilon = epsilon;
            opts.tau = tau;
            opts.expected_root = root.as_deref().map(parse_seed).transpose()?;
            let verdict = ergon_worker::verify::verify(&spec, &opts);
            if let Some(tmp) = &download {
                let _ = std::fs::remove_dir_all(tmp);
            }
            let verdict = verdict?;
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
            if let Some(path) = report {
                std::fs::write(&path, serde_json::to_vec_pretty(&verdict)?)?;
            }
            Ok(if verdict.passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::FetchModel { spec, bundle: url, root, out } => {
            let spec = load_spec(&spec)?;
            let root = parse_seed(&root)?;
            let model = ergon_worker::delivery::fetch_model(&spec, &url, &root, &out)?;
            let claimed = &model.manifest.metrics;
            println!("model       {} (step {})", model.file.display(), model.step);
            println!("root        {} (matches the commitment)", data::hex(&root));
            println!(
                "validation  loss {:.4}, accuracy {:.2}% (claimed {:.4}, {:.2}%)",
                model.validation_loss,
                100.0 * model.validation_accuracy,
                claimed.validation_loss,
                100.0 * claimed.validation_accuracy
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { spec } => {
            let spec = load_spec(&spec)?;
            let s = spec.validate()?;
            println!("parameters        {}", s.parameters);
            println!("forward FLOPs     {} per sample", s.forward_flops_per_sample);
            println!("training FLOPs    {}", s.training_flops);
            println!("training work     {} micro-ut", s.training_micro_ut());
            println!("steps             {} ({} per epoch)", s.total_steps, s.steps_per_epoch);
            println!("checkpoints       {}", s.checkpoints);
            Ok(ExitCode::SUCCESS)
        }
        Command::ContentRoot { files } => {
            let bytes = files.iter().map(|f| data::fetch(f)).collect::<Result<Vec<_>, Error>>()?;
            println!("{}", data::hex(&data::content_root(bytes.iter().map(|b| b.as_slice()))));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
