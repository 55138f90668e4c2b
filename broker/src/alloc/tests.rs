//! The fetch path's stand-in region (`logbook_protocol::STAND_IN_BYTES` of zeros, never
//! written) must cost address space only. It does whether the guard maps it or malloc does,
//! so its size and `GUARD_BYTES_MIN` need not agree; these tests hold both paths to it.

use std::alloc::{GlobalAlloc, Layout, System};

use logbook_protocol::STAND_IN_BYTES;

use super::{GuardedAllocator, GUARD_BYTES_MIN, MALLOC_MMAP_THRESHOLD_BYTES};

/// Resident memory of this process in KiB, from `/proc/self/status`.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Allocates `bytes` zeroed with `allocator`, checks a few bytes (reading maps the zero page)
/// and that resident memory grew by far less than `bytes`.
fn assert_lazily_zeroed(allocator: &dyn GlobalAlloc, bytes: usize, what: &str) {
    let layout = Layout::from_size_align(bytes, 1).expect("layout");
    let before = rss_kib();
    // SAFETY: a non-zero layout; the block is released below with the same layout.
    #[expect(unsafe_code, reason = "exercising the allocator directly")]
    let ptr = unsafe { allocator.alloc_zeroed(layout) };
    assert!(!ptr.is_null(), "{what}: allocation of {bytes} bytes failed");
    for offset in [0, bytes / 2, bytes - 1] {
        // SAFETY: within the allocation, which is initialised (zeroed).
        #[expect(unsafe_code, reason = "reading the allocation")]
        let byte = unsafe { ptr.add(offset).read() };
        assert_eq!(byte, 0, "{what}: byte {offset}");
    }
    let grown_kib = rss_kib().saturating_sub(before);
    // SAFETY: allocated above with this layout.
    #[expect(unsafe_code, reason = "releasing the allocation")]
    unsafe {
        allocator.dealloc(ptr, layout);
    }
    assert!(
        grown_kib < 16 * 1024,
        "{what}: {bytes} zeroed bytes made {grown_kib} KiB resident"
    );
}

// Through the guard (the path today, as STAND_IN_BYTES >= GUARD_BYTES_MIN) the region is
// an untouched mapping.
#[test]
fn stand_in_region_is_lazy_through_the_guard() {
    assert_lazily_zeroed(
        &GuardedAllocator,
        STAND_IN_BYTES.max(GUARD_BYTES_MIN),
        "guard",
    );
}

// Below the guard, malloc maps anything over its mmap threshold afresh and skips zeroing,
// so a stand-in region smaller than GUARD_BYTES_MIN would be just as cheap.
#[test]
fn stand_in_region_is_lazy_below_the_guard() {
    let threshold = usize::try_from(MALLOC_MMAP_THRESHOLD_BYTES).expect("positive");
    assert!(
        STAND_IN_BYTES > threshold,
        "stand-in region under malloc's mmap threshold"
    );
    assert_lazily_zeroed(&System, STAND_IN_BYTES.min(GUARD_BYTES_MIN - 1), "malloc");
}
