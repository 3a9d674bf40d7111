//! The driller role: runs Proof-of-Drilling tasks on every core, producing the same bytes as the
//! reference in `ergon-drill` (the generation of the matrices and the result hash are the reference's
//! own code; only the matrix product is the fast multi-threaded one, and integer sums do not depend on
//! their order, so every machine agrees).

use std::{path::Path, time::Instant};

use ergon_drill::{requantize, MatmulChain};
use serde::Deserialize;

use crate::error::{io, Error, Result};

/// A drilling task file (`--task task.json`).
#[derive(Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
enum TaskFile {
    /// `{"kind": "MatmulChain", "seed": "0x…", "dim": 512, "length": 16}`
    MatmulChain { seed: String, dim: u32, length: u32 },
}

/// Reads and validates a task file.
pub fn load_task(path: &Path) -> Result<MatmulChain> {
    let bytes = std::fs::read(path).map_err(io("reading", path))?;
    let bad = |reason: String| Error::Task { path: path.into(), reason };
    let TaskFile::MatmulChain { seed, dim, length } =
        serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    let seed = crate::bundle::parse_hash(&seed)
        .ok_or_else(|| bad(format!("seed {seed:?} is not 32 bytes of hex")))?;
    let task = MatmulChain { seed, dim, length };
    task.validate().map_err(|e| bad(e.to_string()))?;
    Ok(task)
}

/// What a run produced and how fast.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The result hash executors commit to.
    pub result: [u8; 32],
    /// Integer operations done.
    pub ops: u128,
    /// The task's difficulty (D credit on agreement), in micro-ut.
    pub micro_ut: u128,
    /// Wall time.
    pub seconds: f64,
}

impl Outcome {
    /// Throughput in ut per hour.
    pub fn ut_per_hour(&self) -> f64 {
        self.micro_ut as f64 / 1e6 / self.seconds.max(1e-9) * 3600.0
    }

    /// Throughput in integer operations per second.
    pub fn ops_per_second(&self) -> f64 {
        self.ops as f64 / self.seconds.max(1e-9)
    }
}

/// Runs `task` on `threads` threads.
pub fn run(task: &MatmulChain, threads: usize) -> Result<Outcome> {
    task.validate().map_err(|e| Error::Task { path: "task".into(), reason: e.to_string() })?;
    let started = Instant::now();
    let result = task.run_with(|x, w, dim| product(x, w, dim, threads));
    Ok(Outcome {
        result,
        ops: task.ops(),
        micro_ut: task.difficulty_micro_ut(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// `x · w` for `dim × dim` int8 matrices (row-major), i32 accumulation, requantized: the rows are
/// split over `threads` threads; each row accumulates `x[i][k] · w[k][·]` in a vector of i32 (a loop
/// the compiler vectorizes).
pub fn product(x: &[i8], w: &[i8], dim: usize, threads: usize) -> Vec<i8> {
    let mut out = vec![0i8; dim * dim];
    if dim == 0 {
        return out;
    }
    let rows_per_thread = dim.div_ceil(threads.max(1));
    std::thread::scope(|scope| {
        for (block, out_rows) in out.chunks_mut(rows_per_thread * dim).enumerate() {
            scope.spawn(move || rows(x, w, dim, block * rows_per_thread, out_rows));
        }
    });
    out
}

fn rows(x: &[i8], w: &[i8], dim: usize, first_row: usize, out: &mut [i8]) {
    let mut acc = vec![0i32; dim];
    for (r, out_row) in out.chunks_mut(dim).enumerate() {
        let i = first_row + r;
        acc.fill(0);
        for (k, &a) in x[i * dim..(i + 1) * dim].iter().enumerate() {
            let a = a as i32;
            for (sum, &b) in acc.iter_mut().zip(&w[k * dim..(k + 1) * dim]) {
                *sum = sum.wrapping_add(a * b as i32);
            }
        }
        for (o, sum) in out_row.iter_mut().zip(&acc) {
            *o = requantize(*sum);
        }
    }
}

/// The machine's peak int8 multiply-add rate, in integer operations per second: the same vectorized
/// inner loop as [`product`] on one cache-resident row, on `threads` threads for about `seconds`.
pub fn peak_ops_per_second(threads: usize, seconds: f64) -> f64 {
    const LEN: usize = 1024;
    let started = Instant::now();
    let total: u64 = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|t| {
                scope.spawn(move || {
                    let row: Vec<i8> = (0..LEN).map(|i| (i * 7 + t) as i8).collect();
                    let mut acc = vec![0i32; LEN];
                    let mut rounds = 0u64;
                    while started.elapsed().as_secs_f64() < seconds {
                        for _ in 0..1024 {
                            let a = std::hint::black_box(rounds as i32 & 0x7f);
                            for (sum, &b) in acc.iter_mut().zip(&row) {
                                *sum = sum.wrapping_add(a * b as i32);
                            }
                        }
                        rounds += 1024;
                    }
                    std::hint::black_box(&acc);
                    rounds * LEN as u64 * 2
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    total as f64 / started.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_product_matches_the_reference_on_odd_shapes_and_thread_counts() {
        for dim in [1usize, 2, 3, 7, 33] {
            let t = MatmulChain { seed: [dim as u8; 32], dim: dim as u32, length: 1 };
            let (x, w) = (t.matrix(0), t.matrix(1));
            for threads in [1, 2, 3, 8] {
                assert_eq!(product(&x, &w, dim, threads), ergon_drill::product(&x, &w, dim));
            }
        }
    }
}
