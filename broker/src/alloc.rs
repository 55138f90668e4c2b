//! The process allocator: the system allocator, except that very large allocations are
//! backed by lazily-committed anonymous mappings.
//!
//! Why: the `kafka-protocol` decoder sizes vectors from the array lengths it reads
//! (`Vec::with_capacity(n)`) before it knows whether `n` elements follow. A 20-byte request
//! claiming 2^31 elements asks for ~150 GB; the system allocator refuses and Rust aborts the
//! process. Mapping such requests with `MAP_NORESERVE` reserves address space only: the
//! decoder fails a few elements later on "not enough bytes", the vector is dropped and the
//! mapping released, having touched no memory. Legitimate allocations never come near the
//! threshold (frames are capped far below it).

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at or above this size are served by `mmap` with `MAP_NORESERVE`: far above
/// any legitimate allocation (frames are capped at `frame_bytes_max`, 100 MiB by default),
/// so only the decoder's pre-sizing from a hostile array length reaches it. Unrelated to
/// `logbook_protocol::STAND_IN_BYTES`, which is lazily mapped on either side of it (see the
/// tests).
pub const GUARD_BYTES_MIN: usize = 1 << 30;

/// Page alignment an anonymous mapping guarantees.
const PAGE_BYTES: usize = 4096;

/// See the module documentation.
pub struct GuardedAllocator;

fn mapped(layout: Layout) -> bool {
    layout.size() >= GUARD_BYTES_MIN && layout.align() <= PAGE_BYTES
}

#[expect(unsafe_code, reason = "a global allocator is unsafe by definition")]
// SAFETY: every method forwards to the system allocator or to mmap/munmap with the exact
// size it was given; a mapping is only ever released by `dealloc` with the same layout,
// which `GlobalAlloc`'s contract guarantees.
unsafe impl GlobalAlloc for GuardedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            // SAFETY: an anonymous private mapping with no address hint; the result is
            // checked for MAP_FAILED before use.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    layout.size(),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            ptr.cast()
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            // SAFETY: anonymous mappings are zero-filled.
            unsafe { self.alloc(layout) }
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mapped(layout) {
            // SAFETY: `ptr` came from our mmap of exactly `layout.size()` bytes.
            unsafe {
                libc::munmap(ptr.cast(), layout.size());
            }
        } else {
            // SAFETY: `ptr` came from System with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        if !mapped(layout) && !mapped(new_layout) {
            // SAFETY: both layouts belong to System.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // Crossing the threshold (or staying above it): move the bytes.
        // SAFETY: `new_layout` is valid; the copy covers the smaller of both sizes, and the
        // old block is released with its own layout.
        unsafe {
            let new_ptr = self.alloc(new_layout);
            if !new_ptr.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new_ptr
        }
    }
}

/// Largest allocation glibc serves from its heaps instead of a fresh `mmap`.
pub const MALLOC_MMAP_THRESHOLD_BYTES: i32 = 32 << 20;
/// Free memory at the top of a heap that glibc keeps instead of returning it to the OS.
pub const MALLOC_TRIM_THRESHOLD_BYTES: i32 = 128 << 20;
/// malloc arenas (heaps) shared by all threads. glibc's default (8 per core) lets every
/// tokio worker and blocking thread keep its own heap of freed buffers.
pub const MALLOC_ARENAS_MAX: i32 = 2;

/// Keeps request and read buffers (up to a frame's size) in malloc's heaps between uses.
///
/// Why: by default glibc maps each buffer above 128 KiB afresh and returns freed heap tops
/// to the OS, so every 1 MiB produce frame or fetch read costs page faults and zeroing;
/// profiles of the produce path showed 17% of broker CPU in page faults. With these
/// thresholds the memory is reused, and at most `MALLOC_TRIM_THRESHOLD_BYTES` per heap
/// stays resident after a burst; capping the heaps at `MALLOC_ARENAS_MAX` bounds the total
/// (peak RSS while serving consumers: 450-480 MiB with glibc's arena count, 148-154 MiB
/// with two). `GLIBC_TUNABLES` in the environment takes precedence.
pub fn tune_malloc() {
    if std::env::var_os("GLIBC_TUNABLES").is_some() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[expect(
        unsafe_code,
        reason = "mallopt is a C call with no memory-safety preconditions"
    )]
    // SAFETY: mallopt only changes allocator parameters; it is called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD_BYTES);
        libc::mallopt(libc::M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD_BYTES);
        libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS_MAX);
    }
}

#[cfg(test)]
mod tests;
