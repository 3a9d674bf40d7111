//! The WebAssembly interface: plain `extern "C"` functions over linear memory.
//!
//! The page [`alloc`]s room for each input, copies the bytes in, calls a check, and reads its
//! status (0: passed) and [`message`] (the error, or the root's hex). [`reset`] frees everything
//! at once before the next check: memory here is a bump arena, as the inputs (a manifest and one
//! checkpoint file) are read whole and dropped together.

use alloc::string::String;
use core::{
    alloc::{GlobalAlloc, Layout},
    arch::wasm32,
    sync::atomic::{AtomicUsize, Ordering::Relaxed},
};

/// Bytes of a WebAssembly memory page.
const PAGE: usize = 65_536;

/// The arena: memory grown by this module, from `START` to `END`, used up to `NEXT`.
struct Arena;

static START: AtomicUsize = AtomicUsize::new(0);
static NEXT: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let align = layout.align();
        let Some(start) = NEXT.load(Relaxed).checked_add(align - 1).map(|n| n & !(align - 1))
        else {
            return core::ptr::null_mut();
        };
        let Some(end) = start.checked_add(layout.size()) else {
            return core::ptr::null_mut();
        };
        if end > END.load(Relaxed) || START.load(Relaxed) == 0 {
            // Grow: the new pages follow the arena's (this module alone grows the memory).
            let need = end.saturating_sub(END.load(Relaxed)).max(layout.size() + align);
            let pages = need.div_ceil(PAGE);
            let previous = wasm32::memory_grow(0, pages);
            if previous == usize::MAX {
                return core::ptr::null_mut();
            }
            if START.load(Relaxed) == 0 {
                START.store(previous * PAGE, Relaxed);
                NEXT.store(previous * PAGE, Relaxed);
                END.store((previous + pages) * PAGE, Relaxed);
                return self.alloc(layout);
            }
            END.store((previous + pages) * PAGE, Relaxed);
        }
        NEXT.store(end, Relaxed);
        start as *mut u8
    }

    unsafe fn dealloc(&self, _: *mut u8, _: Layout) {}
}

#[global_allocator]
static ARENA: Arena = Arena;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    wasm32::unreachable()
}

/// The last check's message: the error, or the root in hex.
static mut MESSAGE: Option<String> = None;

fn set_message(text: String) {
    // Single-threaded: a WebAssembly instance runs one call at a time.
    unsafe { *core::ptr::addr_of_mut!(MESSAGE) = Some(text) };
}

fn message_bytes() -> &'static [u8] {
    unsafe { (*core::ptr::addr_of!(MESSAGE)).as_deref().unwrap_or("").as_bytes() }
}

/// `len` bytes of memory for an input.
#[no_mangle]
pub extern "C" fn alloc(len: usize) -> *mut u8 {
    match Layout::from_size_align(len.max(1), 1) {
        Ok(layout) => unsafe { ARENA.alloc(layout) },
        Err(_) => core::ptr::null_mut(),
    }
}

/// Frees every allocation (the arena starts over).
#[no_mangle]
pub extern "C" fn reset() {
    unsafe { *core::ptr::addr_of_mut!(MESSAGE) = None };
    NEXT.store(START.load(Relaxed), Relaxed);
}

/// Where the last check's message starts.
#[no_mangle]
pub extern "C" fn message() -> *const u8 {
    message_bytes().as_ptr()
}

/// The last check's message's length in bytes.
#[no_mangle]
pub extern "C" fn message_len() -> usize {
    message_bytes().len()
}

/// [`crate::manifest_root`] of the `len` bytes at `ptr`: 0 and the root's hex as the message, or 1
/// and why not.
///
/// # Safety
/// `ptr` must point to `len` readable bytes (memory from [`alloc`]).
#[no_mangle]
pub unsafe extern "C" fn manifest_root(ptr: *const u8, len: usize) -> u32 {
    let manifest = unsafe { core::slice::from_raw_parts(ptr, len) };
    match crate::manifest_root(manifest) {
        Ok((root, _)) => {
            set_message(ergon_bundle::to_hex(&root));
            0
        }
        Err(e) => {
            set_message(e);
            1
        }
    }
}

/// [`crate::check_file`]: whether the `data_len` bytes at `data` are the checkpoint file named by
/// the `name_len` bytes at `name` in the manifest at `manifest`: 0, or 1 and why not.
///
/// # Safety
/// Each pointer must point to as many readable bytes as its length says (memory from [`alloc`]).
#[no_mangle]
pub unsafe extern "C" fn check_file(
    manifest: *const u8,
    manifest_len: usize,
    name: *const u8,
    name_len: usize,
    data: *const u8,
    data_len: usize,
) -> u32 {
    let (manifest, name, data) = unsafe {
        (
            core::slice::from_raw_parts(manifest, manifest_len),
            core::slice::from_raw_parts(name, name_len),
            core::slice::from_raw_parts(data, data_len),
        )
    };
    let outcome = core::str::from_utf8(name)
        .map_err(|_| String::from("the file name is not UTF-8"))
        .and_then(|name| {
            let (_, index) = crate::manifest_root(manifest)?;
            crate::check_file(&index, name, data)
        });
    match outcome {
        Ok(()) => {
            set_message(String::new());
            0
        }
        Err(e) => {
            set_message(e);
            1
        }
    }
}
