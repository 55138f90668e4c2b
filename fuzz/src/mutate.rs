//! Mutations of an encoded request: bit flips, boundary values, truncation, inserted and
//! duplicated bytes, lying string/array lengths, a wrong api key or version in the header,
//! garbage tagged fields, and size prefixes that lie. Each mutation is named, so a saved
//! frame says what was done to it.

/// Where the parts of an encoded request (header then body, no size prefix) are.
pub struct Layout<'a> {
    /// Bytes of the request header; the body starts here.
    pub header_bytes: usize,
    /// The header is v2 (it ends with a tagged-field count).
    pub header_tagged: bool,
    /// The body uses compact (flexible) encodings and ends with a tagged-field count.
    pub flexible: bool,
    /// Strings known to be in the body (topic names, group ids…): their length prefixes
    /// sit right before them.
    pub needles: &'a [Vec<u8>],
    /// Other api keys to swap in.
    pub keys: &'a [i16],
}

/// A mutated frame, size prefix included, and what was done to it.
pub struct Mutated {
    /// The bytes to write.
    pub bytes: Vec<u8>,
    /// The mutations applied, e.g. `bitflip(3)+prefix_short(2)`.
    pub what: String,
}

/// Values that sit on the edges of integer types, big-endian, widest first.
const EDGES_32: [u32; 7] = [
    0,
    0xffff_ffff,
    0x7fff_ffff,
    0x8000_0000,
    0x0000_ffff,
    0x0001_0000,
    0xffff_fffe,
];
const EDGES_16: [u16; 6] = [0, 0xffff, 0x7fff, 0x8000, 0x00ff, 0xfffe];
const EDGES_8: [u8; 6] = [0, 0xff, 0x7f, 0x80, 0x01, 0xfe];
/// Unsigned varints that decode to huge lengths (and one that never ends within 5 bytes).
const HUGE_VARINTS: [&[u8]; 4] = [
    &[0xff, 0xff, 0xff, 0xff, 0x0f],
    &[0xff, 0xff, 0xff, 0xff, 0x07],
    &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
    &[0xff, 0xff, 0xff, 0xff, 0xff],
];

fn put(out: &mut [u8], at: usize, bytes: &[u8]) {
    for (i, b) in bytes.iter().enumerate() {
        if let Some(slot) = out.get_mut(at + i) {
            *slot = *b;
        }
    }
}

/// One mutation of the payload (header and body), described.
///
/// Longer than 70 lines because it is one match with an arm per mutation (fourteen), each
/// a few lines; together they are the fuzzer's whole mutation menu, and their draws
/// from `rng` must stay in the order a recorded seed replays.
#[expect(
    clippy::too_many_lines,
    reason = "one arm per mutation, each a few lines"
)]
fn mutate_once(rng: &mut fastrand::Rng, p: &mut Vec<u8>, layout: &Layout<'_>) -> String {
    let body = layout.header_bytes.min(p.len());
    let anywhere = |rng: &mut fastrand::Rng, len: usize| rng.usize(..len.max(1));
    let in_body = |rng: &mut fastrand::Rng, len: usize| {
        if body < len {
            rng.usize(body..len)
        } else {
            anywhere(rng, len)
        }
    };
    match rng.u32(0..14) {
        0 => {
            let flips = rng.usize(1..9);
            for _ in 0..flips {
                let at = anywhere(rng, p.len());
                if let Some(b) = p.get_mut(at) {
                    *b ^= 1 << rng.u32(0..8);
                }
            }
            format!("bitflip({flips})")
        }
        1 => {
            let at = in_body(rng, p.len());
            match rng.u32(0..3) {
                0 => put(p, at, &[EDGES_8[rng.usize(..EDGES_8.len())]]),
                1 => put(p, at, &EDGES_16[rng.usize(..EDGES_16.len())].to_be_bytes()),
                _ => put(p, at, &EDGES_32[rng.usize(..EDGES_32.len())].to_be_bytes()),
            }
            format!("edge@{at}")
        }
        2 => {
            let at = anywhere(rng, p.len());
            p.truncate(at);
            format!("truncate({at})")
        }
        3 => {
            let at = anywhere(rng, p.len() + 1).min(p.len());
            let len = rng.usize(1..64);
            let junk: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            p.splice(at..at, junk);
            format!("insert({at},{len})")
        }
        4 => {
            let from = anywhere(rng, p.len());
            let len = rng.usize(1..=(p.len() - from).clamp(1, 256));
            let end = (from + len).min(p.len());
            let copy = p.get(from..end).map(<[u8]>::to_vec).unwrap_or_default();
            let times = rng.usize(1..4);
            for _ in 0..times {
                p.splice(end..end, copy.iter().copied());
            }
            format!("dup({from},{len}x{times})")
        }
        5 => {
            let from = in_body(rng, p.len());
            let end = (from + rng.usize(1..32)).min(p.len());
            p.drain(from..end);
            format!("delete({from}..{end})")
        }
        6 | 7 => {
            // A string's length prefix lies: find a known string, overwrite what precedes it.
            let Some((needle, at)) = find_needle(rng, p, layout) else {
                let at = in_body(rng, p.len());
                put(p, at, &EDGES_32[rng.usize(..EDGES_32.len())].to_be_bytes());
                return format!("int_lie@{at}");
            };
            if layout.flexible && needle < 127 && at >= 1 {
                let huge = HUGE_VARINTS[rng.usize(..HUGE_VARINTS.len())];
                let choice = rng.u32(0..3);
                let what = match choice {
                    0 => {
                        p.splice(at - 1..at, huge.iter().copied());
                        "huge"
                    }
                    1 => {
                        put(p, at - 1, &[0]);
                        "null"
                    }
                    _ => {
                        let longer = u8::try_from(needle + 2 + rng.usize(0..100)).unwrap_or(0x7f);
                        put(p, at - 1, &[longer.min(0x7f)]);
                        "longer"
                    }
                };
                format!("compact_strlen_{what}@{}", at - 1)
            } else if at >= 2 {
                let v = EDGES_16[rng.usize(..EDGES_16.len())];
                put(p, at - 2, &v.to_be_bytes());
                format!("strlen={v:#x}@{}", at - 2)
            } else {
                "nothing".to_owned()
            }
        }
        8 => {
            // An array count (or any i32) lies: i32 or a huge varint somewhere in the body.
            let at = in_body(rng, p.len());
            if layout.flexible && rng.bool() {
                let end = (at + 1).min(p.len());
                p.splice(
                    at..end,
                    HUGE_VARINTS[rng.usize(..HUGE_VARINTS.len())]
                        .iter()
                        .copied(),
                );
                format!("varint_huge@{at}")
            } else {
                let v = EDGES_32[rng.usize(..EDGES_32.len())];
                put(p, at, &v.to_be_bytes());
                format!("i32={v:#x}@{at}")
            }
        }
        9 => {
            let v: i16 =
                [-1, i16::MAX, i16::MIN, rng.i16(0..20), rng.i16(0..20), 99][rng.usize(..6)];
            put(p, 2, &v.to_be_bytes());
            format!("api_version={v}")
        }
        10 => {
            let v = if rng.bool() && !layout.keys.is_empty() {
                layout.keys[rng.usize(..layout.keys.len())]
            } else {
                [-1, i16::MAX, i16::MIN, 93, 1000, 32000, 32004][rng.usize(..7)]
            };
            put(p, 0, &v.to_be_bytes());
            format!("api_key={v}")
        }
        11 => {
            // Garbage tagged fields: at the body's end (its top-level count) or the header's.
            let at = if layout.header_tagged && rng.bool() {
                layout.header_bytes.saturating_sub(1)
            } else if layout.flexible {
                p.len().saturating_sub(1)
            } else {
                in_body(rng, p.len())
            };
            let garbage = tagged_garbage(rng);
            let at = at.min(p.len());
            let end = (at + 1).min(p.len());
            p.splice(at..end, garbage);
            format!("tagged@{at}")
        }
        12 => {
            let v = EDGES_16[rng.usize(..EDGES_16.len())];
            put(p, 8, &v.to_be_bytes());
            format!("client_id_len={v:#x}")
        }
        _ => {
            let len = rng.usize(0..p.len().max(1));
            let at = in_body(rng, p.len());
            let end = (at + len).min(p.len());
            for b in p.get_mut(at..end).unwrap_or_default() {
                *b = rng.u8(..);
            }
            format!("random({at}..{end})")
        }
    }
}

/// A tagged-field section that lies: huge counts, sizes past the end, repeated tags.
fn tagged_garbage(rng: &mut fastrand::Rng) -> Vec<u8> {
    let mut out = Vec::new();
    match rng.u32(0..4) {
        0 => out.extend_from_slice(HUGE_VARINTS[rng.usize(..HUGE_VARINTS.len())]),
        1 => {
            // Two fields claiming more bytes than follow.
            out.extend_from_slice(&[2, 0, 0x7f, 1, 2, 3]);
        }
        2 => {
            // The same tag twice, out of order.
            out.extend_from_slice(&[3, 5, 1, 0xaa, 5, 1, 0xbb, 0, 2, 0, 0]);
        }
        _ => {
            let count = rng.u8(1..6);
            out.push(count);
            for _ in 0..count {
                out.push(rng.u8(..0x80));
                let len = rng.u8(..0x20);
                out.push(len);
                out.extend((0..len).map(|_| rng.u8(..)));
            }
        }
    }
    out
}

fn find_needle(rng: &mut fastrand::Rng, p: &[u8], layout: &Layout<'_>) -> Option<(usize, usize)> {
    if layout.needles.is_empty() {
        return None;
    }
    let start = rng.usize(..layout.needles.len());
    for i in 0..layout.needles.len() {
        let needle = &layout.needles[(start + i) % layout.needles.len()];
        if needle.is_empty() || needle.len() > p.len() {
            continue;
        }
        let from = layout.header_bytes.min(p.len());
        if let Some(pos) = p.get(from..).and_then(|body| {
            body.windows(needle.len())
                .position(|w| w == needle.as_slice())
        }) {
            return Some((needle.len(), from + pos));
        }
    }
    None
}

/// The size prefix of `payload`, honest or a lie, then the payload.
fn frame(rng: &mut fastrand::Rng, payload: &[u8], lie: bool) -> (Vec<u8>, Option<String>) {
    let len = i32::try_from(payload.len()).unwrap_or(i32::MAX);
    let (prefix, what) = if lie {
        match rng.u32(0..6) {
            0 => {
                let k = rng.i32(1..=len.clamp(1, 16));
                (len - k, Some(format!("prefix_short({k})")))
            }
            1 => {
                let k = rng.i32(1..4096);
                (len.saturating_add(k), Some(format!("prefix_long({k})")))
            }
            2 => (-1, Some("prefix=-1".to_owned())),
            3 => (i32::MIN, Some("prefix=min".to_owned())),
            4 => (0, Some("prefix=0".to_owned())),
            _ => (i32::MAX, Some("prefix=max".to_owned())),
        }
    } else {
        (len, None)
    };
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.extend_from_slice(&prefix.to_be_bytes());
    out.extend_from_slice(payload);
    (out, what)
}

/// One to three payload mutations, and a lying size prefix one time in eight.
pub fn mutate(rng: &mut fastrand::Rng, payload: &[u8], layout: &Layout<'_>) -> Mutated {
    let mut p = payload.to_vec();
    let mut what = Vec::new();
    for _ in 0..rng.usize(1..=3) {
        what.push(mutate_once(rng, &mut p, layout));
    }
    let lie = rng.u32(0..8) == 0;
    let (bytes, lie) = frame(rng, &p, lie);
    what.extend(lie);
    Mutated {
        bytes,
        what: what.join("+"),
    }
}

/// The payload with an honest size prefix.
#[must_use]
pub fn honest(payload: &[u8]) -> Vec<u8> {
    let len = i32::try_from(payload.len()).unwrap_or(i32::MAX);
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every mutation terminates and yields a prefixed frame, even of tiny payloads.
    #[test]
    fn mutations_never_panic_on_short_payloads() {
        let mut rng = fastrand::Rng::with_seed(7);
        let needles = vec![b"topic".to_vec()];
        let layout = Layout {
            header_bytes: 10,
            header_tagged: true,
            flexible: true,
            needles: &needles,
            keys: &[0, 1, 18],
        };
        for len in 0..40 {
            let payload: Vec<u8> = (0..len).map(|i| u8::try_from(i).unwrap_or(0)).collect();
            for _ in 0..500 {
                let m = mutate(&mut rng, &payload, &layout);
                assert!(m.bytes.len() >= 4, "frame without a prefix: {}", m.what);
            }
        }
    }
}
