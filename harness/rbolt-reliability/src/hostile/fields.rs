//! A valid file's structure read field by field (headers, elements, bucket values, metas,
//! freelist ids), so that each field can be set to the values that break things.

use rbolt_page::{LEAF_FLAG_BUCKET, MAGIC, fnv1a64};

pub(super) fn u16_at(image: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(
        image.get(offset..offset + 2)?.try_into().ok()?,
    )))
}

pub(super) fn u32_at(image: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(
        image.get(offset..offset + 4)?.try_into().ok()?,
    )))
}

pub(super) fn u64_at(image: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        image.get(offset..offset + 8)?.try_into().ok()?,
    ))
}

pub(super) fn read_field(image: &[u8], offset: usize, width: usize) -> Option<u64> {
    match width {
        2 => u16_at(image, offset),
        4 => u32_at(image, offset),
        _ => u64_at(image, offset),
    }
}

pub(super) fn write_field(image: &mut [u8], offset: usize, width: usize, value: u64) {
    if let Some(target) = image.get_mut(offset..offset + width) {
        target.copy_from_slice(&value.to_le_bytes()[..width]);
    }
}

/// Recomputes the checksum of meta `index` after its fields changed.
pub fn fix_meta_checksum(image: &mut [u8], page_size: usize, index: usize) {
    let body = index * page_size + 16;
    if let Some(fields) = image.get(body..body + 56) {
        let checksum = fnv1a64(fields);
        write_field(image, body + 56, 8, checksum);
    }
}

/// One integer field of a file.
#[derive(Clone, Debug)]
pub struct Field {
    /// Its byte offset.
    pub offset: usize,
    /// 2, 4 or 8 bytes.
    pub width: usize,
    /// What it is, for failure messages.
    pub what: String,
    /// The meta whose checksum covers it, recomputed after a change.
    pub meta: Option<usize>,
}

/// The newest valid meta's high-water mark.
pub(super) fn high_water(image: &[u8], page_size: usize) -> u64 {
    (0..2)
        .filter_map(|m| {
            let body = m * page_size + 16;
            (u32_at(image, body)? == u64::from(MAGIC))
                .then(|| Some((u64_at(image, body + 48)?, u64_at(image, body + 40)?)))?
        })
        .max()
        .map_or(0, |(_, pgid)| pgid)
}

/// Every header, element, bucket and freelist field of a valid file.
pub fn fields(image: &[u8], page_size: usize) -> Vec<Field> {
    let mut out = Vec::new();
    let mut push = |offset: usize, width: usize, what: String, meta: Option<usize>| {
        if offset + width <= image.len() {
            out.push(Field {
                offset,
                width,
                what,
                meta,
            });
        }
    };
    for m in 0..2 {
        let base = m * page_size;
        header_fields(&mut push, base, &format!("meta {m}"));
        let body = base + 16;
        for (offset, width, name) in [
            (0, 4, "magic"),
            (4, 4, "version"),
            (8, 4, "page size"),
            (12, 4, "flags"),
            (16, 8, "root"),
            (24, 8, "root sequence"),
            (32, 8, "freelist"),
            (40, 8, "high-water mark"),
            (48, 8, "txid"),
        ] {
            push(body + offset, width, format!("meta {m} {name}"), Some(m));
        }
        push(body + 56, 8, format!("meta {m} checksum"), None);
    }
    let hwm = high_water(image, page_size);
    let mut pgid = 2u64;
    while pgid < hwm {
        let base = pgid as usize * page_size;
        let (Some(flags), Some(count), Some(overflow)) = (
            u16_at(image, base + 8),
            u16_at(image, base + 10),
            u32_at(image, base + 12),
        ) else {
            break;
        };
        let page = format!("page {pgid}");
        header_fields(&mut push, base, &page);
        let elements = (count as usize).min((page_size - 16) / 16);
        match flags {
            0x01 => {
                for i in 0..elements {
                    let e = base + 16 + i * 16;
                    push(e, 4, format!("{page} branch {i} pos"), None);
                    push(e + 4, 4, format!("{page} branch {i} ksize"), None);
                    push(e + 8, 8, format!("{page} branch {i} pgid"), None);
                }
            }
            0x02 => leaf_fields(image, &mut push, base, elements, &page),
            0x10 => {
                let mut ids = base + 16;
                if count == 0xFFFF {
                    push(ids, 8, format!("{page} freelist count"), None);
                    ids += 8;
                }
                for i in 0..(count as usize).min(16) {
                    push(ids + i * 8, 8, format!("{page} free id {i}"), None);
                }
            }
            _ => {}
        }
        pgid += 1 + overflow;
    }
    out
}

fn header_fields(
    push: &mut impl FnMut(usize, usize, String, Option<usize>),
    base: usize,
    page: &str,
) {
    push(base, 8, format!("{page} header id"), None);
    push(base + 8, 2, format!("{page} header flags"), None);
    push(base + 10, 2, format!("{page} header count"), None);
    push(base + 12, 4, format!("{page} header overflow"), None);
}

fn leaf_fields(
    image: &[u8],
    push: &mut impl FnMut(usize, usize, String, Option<usize>),
    base: usize,
    elements: usize,
    page: &str,
) {
    for i in 0..elements {
        let e = base + 16 + i * 16;
        push(e, 4, format!("{page} leaf {i} flags"), None);
        push(e + 4, 4, format!("{page} leaf {i} pos"), None);
        push(e + 8, 4, format!("{page} leaf {i} ksize"), None);
        push(e + 12, 4, format!("{page} leaf {i} vsize"), None);
        let (Some(flags), Some(pos), Some(ksize)) =
            (u32_at(image, e), u32_at(image, e + 4), u32_at(image, e + 8))
        else {
            continue;
        };
        if flags & u64::from(LEAF_FLAG_BUCKET) == 0 {
            continue;
        }
        let value = e + (pos + ksize) as usize;
        push(value, 8, format!("{page} leaf {i} bucket root"), None);
        push(
            value + 8,
            8,
            format!("{page} leaf {i} bucket sequence"),
            None,
        );
        if u64_at(image, value) == Some(0) {
            // An inline bucket: a leaf page inside the value.
            let inline = value + 16;
            let inline_page = format!("{page} leaf {i} inline page");
            header_fields(push, inline, &inline_page);
            let count = u16_at(image, inline + 10).unwrap_or(0) as usize;
            for j in 0..count.min(8) {
                let e = inline + 16 + j * 16;
                push(e, 4, format!("{inline_page} leaf {j} flags"), None);
                push(e + 4, 4, format!("{inline_page} leaf {j} pos"), None);
                push(e + 8, 4, format!("{inline_page} leaf {j} ksize"), None);
                push(e + 12, 4, format!("{inline_page} leaf {j} vsize"), None);
            }
        }
    }
}

/// The values a field of `width` bytes is set to: 0, 1, the high-water mark and its
/// neighbours, the largest value, its own neighbours and the page size.
pub(super) fn field_values(original: u64, width: usize, hwm: u64, page_size: usize) -> Vec<u64> {
    let mask = if width == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * width)) - 1
    };
    let mut values: Vec<u64> = [
        0,
        1,
        hwm.wrapping_sub(1),
        hwm,
        hwm + 1,
        u64::MAX,
        original.wrapping_add(1),
        original.wrapping_sub(1),
        page_size as u64,
    ]
    .iter()
    .map(|v| v & mask)
    .filter(|&v| v != original)
    .collect();
    values.sort_unstable();
    values.dedup();
    values
}
