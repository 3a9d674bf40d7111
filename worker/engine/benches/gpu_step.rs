//! A training step on a GPU (a benchmark, not a test; needs an NVIDIA GPU and the `cuda` feature):
//! for a spec (default the char transformer example), the same optimizer steps on the same batches
//! three ways, all in this run:
//!   - eagerly, as candle launches them one op at a time;
//!   - through a CUDA graph ([`ergon_engine::step::Stepper`]), which must give the same losses, bit
//!     for bit (the bench stops otherwise); the ratio of the two is the graph's speedup;
//!   - eagerly again with the device synchronized after each phase (forward with the loss,
//!     backward, optimizer): each phase's wall time once the GPU has finished it, and the host's
//!     time to issue it (the calls return before the GPU is done). A phase whose issue time is
//!     close to its wall time is bound by the host (launches, allocations), one far under it by
//!     the GPU;
//!   - one more eager step between `cuProfilerStart` and `cuProfilerStop`, so that a profiler
//!     started with profiling off sees that step's kernels alone:
//!     `ncu --profile-from-start off --metrics gpu__time_duration.sum --print-summary per-kernel`
//!     gives what each kernel costs.
//!
//! Last, the step times as one JSON line (`{"spec", "eager_ms", "graph_ms", "forward_ms", …}`).
//!
//! Usage: `cargo bench -p ergon-engine --features cuda --bench gpu_step -- [SPEC] [STEPS]`.

use std::{path::PathBuf, time::Instant};

use candle_core::{
    cuda::{cudarc::driver::Profiler, WrapErr},
    DType, Device,
};
use ergon_engine::{
    data, device, model, model::Model, optim::Optimizer, rng, step::Stepper, trajectory,
};

fn main() -> ergon_engine::Result<()> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let spec: PathBuf =
        args.next().unwrap_or_else(|| "worker/examples/char-transformer.json".into()).into();
    let steps: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let name = spec.display().to_string();
    let spec = ergon_engine::load_spec(&spec)?;
    let opened = device::open(device::DeviceChoice::Cuda(0))?;
    let dev = &opened.device;
    println!("{name} on {}", opened.description);
    let warm = 5;
    let data = data::JobData::load_with(&spec, None)?;
    let train = data.train();
    let seed = [1u8; 32];
    let order = rng::epoch_order(&seed, 0, train.len as u64);
    let full = spec.batch_size as usize;
    // Full batches only (the graph's shape), in the epoch's order.
    let batches = (order.len() / full).max(1);
    let batch = |step: u64| {
        let lo = (step as usize % batches) * full;
        trajectory::batch(train, &order[lo..(lo + full).min(order.len())], dev)
    };

    // Eager, then through the graph: the same steps from the same initial state.
    let mut timed = vec![];
    for graphs in [false, true] {
        let model = Model::new(&spec, &seed, dev, DType::F32)?;
        let mut opt = Optimizer::new(&spec, &model.params)?;
        let mut stepper = Stepper::with_graphs(dev, graphs, &spec);
        let mut losses = vec![];
        let mut start = Instant::now();
        for step in 0..warm + steps {
            if step == warm {
                sync(dev)?;
                start = Instant::now();
            }
            let (x, y) = batch(step)?;
            let layouts = device::cache_layouts(dev);
            let loss = stepper.step(&model, &mut opt, &x, &y)?;
            drop(layouts);
            losses.push(loss.to_scalar::<f32>()?.to_bits());
        }
        timed.push((start.elapsed().as_secs_f64() / steps as f64, losses, stepper.graph_steps()));
    }
    let ((eager, eager_losses, _), (graph, graph_losses, graph_steps)) = (&timed[0], &timed[1]);
    if eager_losses != graph_losses {
        eprintln!("the graph's losses differ from the eager steps'");
        std::process::exit(1);
    }
    println!(
        "eager {:.3} ms per step, CUDA graph {:.3} ms ({graph_steps} of {} steps replayed; same losses): {:.2}x",
        eager * 1e3,
        graph * 1e3,
        warm + steps,
        eager / graph
    );

    let model = Model::new(&spec, &seed, dev, DType::F32)?;
    let mut opt = Optimizer::new(&spec, &model.params)?;
    // Phase by phase, eagerly, on the same batches.
    let mut wall = [0.0f64; 3];
    let mut issue = [0.0f64; 3];
    for step in 0..warm + steps {
        let (x, y) = batch(step)?;
        sync(dev)?;
        let layouts = device::cache_layouts(dev);
        let t0 = Instant::now();
        let loss = model::cross_entropy(&model.forward(&x)?, &y)?;
        let t1 = Instant::now();
        sync(dev)?;
        let t2 = Instant::now();
        let grads = loss.backward()?;
        let t3 = Instant::now();
        sync(dev)?;
        let t4 = Instant::now();
        let grads: Vec<_> =
            model.params.iter().map(|p| grads.get(p.var.as_tensor()).cloned()).collect();
        opt.step(&model.params, &grads)?;
        let t5 = Instant::now();
        sync(dev)?;
        let t6 = Instant::now();
        drop(layouts);
        if step < warm {
            continue;
        }
        for (i, (a, b, c)) in [(t0, t1, t2), (t2, t3, t4), (t4, t5, t6)].into_iter().enumerate() {
            issue[i] += (b - a).as_secs_f64();
            wall[i] += (c - a).as_secs_f64();
        }
    }
    let ms = |s: f64| s / steps as f64 * 1e3;
    println!("{:<10} {:>10} {:>10}", "phase", "wall ms", "issue ms");
    for (i, phase) in ["forward", "backward", "optimizer"].iter().enumerate() {
        println!("{phase:<10} {:>10.3} {:>10.3}", ms(wall[i]), ms(issue[i]));
    }
    println!("{:<10} {:>10.3} {:>10.3}", "total", ms(wall.iter().sum()), ms(issue.iter().sum()));
    // The same, machine-readable (scripts/bench-gpu.sh reads it).
    let times = serde_json::json!({
        "spec": name,
        "eager_ms": eager * 1e3,
        "graph_ms": graph * 1e3,
        "forward_ms": ms(wall[0]),
        "backward_ms": ms(wall[1]),
        "optimizer_ms": ms(wall[2]),
    });
    println!("{times}");

    // The profiled step (see the module's doc).
    let (x, y) = batch(warm + steps)?;
    sync(dev)?;
    let profiled = Profiler::new().w()?;
    let loss = model::cross_entropy(&model.forward(&x)?, &y)?;
    let grads = loss.backward()?;
    let grads: Vec<_> =
        model.params.iter().map(|p| grads.get(p.var.as_tensor()).cloned()).collect();
    opt.step(&model.params, &grads)?;
    sync(dev)?;
    drop(profiled);
    Ok(())
}

fn sync(dev: &Device) -> ergon_engine::Result<()> {
    Ok(dev.synchronize()?)
}
