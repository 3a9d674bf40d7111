//! `ergon-worker drill`: run a Proof-of-Drilling task and print its result and throughput.

use std::{path::PathBuf, process::ExitCode};

use ergon_engine::{
    data,
    drill::{self, DrillTask, Engine},
};

use super::Outcome;

/// `drill` options.
#[derive(clap::Args)]
pub struct Args {
    /// The task (JSON: `{"kind": "MatmulChain", "seed": "0x…", "dim": 512, "length": 16}` or
    /// `{"kind": "QuantizedInference", "model": "0x…", "model_uri": "…", "dataset": "0x…",
    /// "dataset_uri": "…", "widths": [784, 128, 10], "samples": 10000}`).
    #[arg(long)]
    task: PathBuf,
    /// Threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Run matrix products on a CUDA GPU (a build with `--features cuda`).
    #[command(flatten)]
    device: ergon_worker::device::DeviceArgs,
    /// Use the integer matrix kernel instead of exact f32 products (same bytes; slower on CPUs
    /// whose f32 units outrun their int8 ones).
    #[arg(long, conflicts_with = "cuda")]
    int8: bool,
}

/// Runs the task on the pool `--threads` asks for and prints what it found.
pub fn run(Args { task, threads, device, int8 }: Args) -> Outcome {
    let task = drill::load_task(&task)?;
    let pool = super::threads(threads)?;
    let engine = match (device.cuda, int8) {
        (true, _) => Engine::Candle(device.open()?.device),
        (false, true) => Engine::Int8 { threads: pool.count() },
        (false, false) => Engine::Candle(candle_core::Device::Cpu),
    };
    let outcome = pool.install(|| drill::run_task(&task, pool.count(), &engine))?;
    let engine = match &engine {
        Engine::Candle(candle_core::Device::Cpu) => "exact f32 products, CPU".to_string(),
        Engine::Candle(_) => "exact f32 products, CUDA".to_string(),
        Engine::Int8 { threads } => format!("int8 kernel, {threads} threads"),
    };
    match &task {
        DrillTask::MatmulChain(t) => {
            println!("task        MatmulChain dim={} length={}", t.dim, t.length)
        }
        DrillTask::QuantizedInference { task: t, .. } => {
            println!("task        QuantizedInference widths={:?} samples={}", t.widths, t.samples)
        }
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
