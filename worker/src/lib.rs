//! # ergon-worker
//!
//! The trainer process of Ergon around [`ergon_engine`] (which trains, verifies and drills, and
//! knows no chain):
//!
//! - [`daemon`]: `ergon-worker run`, the trainer daemon that takes part in the market on its own;
//! - [`device`]: `--cuda` and `--cuda-device`, shared by the commands and the daemon;
//! - [`serve`]: the bundle server (byte ranges, a connection limit, a clean shutdown) on the
//!   daemon's async runtime, also `ergon-worker serve`.
//!
//! The one-shot commands (`train`, `verify`, `drill`, …) live in the binary's `cli/` folder. The
//! worker depends on no node crate: the daemon reaches the chain through `ergon-client`, as any
//! client does.

pub mod daemon;
pub mod device;
pub mod serve;

pub use ergon_engine as engine;
