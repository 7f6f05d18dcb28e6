//! The page-level commands: `pages` (a table of every page, through the database), and
//! `page`, `page-item` and `dump`, which read the raw file so they work on files that do not
//! open.

use crate::format::{Format, go_quote, hex, is_printable};
use crate::open::{FileArgs, LockArgs, open_read};
use crate::raw::{RawFile, RawPages};
use anyhow::{Result, anyhow, bail};
use clap::Args;
use rbolt_page::{BucketHeader, FreelistPage, LeafPage, Meta, PageKind, PageRef, Pgid};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

/// The separator bbolt prints between pages.
const PAGE_SEPARATOR: &str = "===============================================";

/// A page's type as bbolt names it: `branch`, `leaf`, `meta`, `freelist` or `unknown<XX>`.
pub fn type_name(flags: u16) -> String {
    match PageKind::from_flags(flags) {
        Some(kind) => kind.name().to_owned(),
        None => format!("unknown<{flags:02x}>"),
    }
}

/// Arguments of `pages`.
#[derive(Args, Debug)]
pub struct PagesArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// Print one JSON object a line instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct PageRow<'a> {
    id: u64,
    #[serde(rename = "type")]
    kind: &'a str,
    items: Option<u64>,
    overflow: Option<u32>,
}

/// `rbolt pages PATH`: every page below the high-water mark, overflow pages folded into the
/// page they continue; free pages show as `free`.
pub fn pages(args: &PagesArgs) -> Result<()> {
    let db = open_read(&args.file.path, &args.file.lock)?;
    let tx = db.begin_read()?;
    let meta = *tx.meta();
    let high_water = meta.pgid;
    let pages = RawPages::new(tx.raw_pages()?, db.page_size(), high_water)?;
    // Free pages, ascending: what the freelist lists, or what nothing reaches.
    let free = tx
        .free_page_ids()
        .map_err(|error| anyhow!("the freelist is corrupt: {error}"))?;
    let mut w = crate::out::stdout();
    if !args.json {
        writeln!(w, "ID       TYPE       ITEMS  OVRFLW")?;
        writeln!(w, "======== ========== ====== ======")?;
    }
    let mut id = 0u64;
    while id < high_water {
        let header = pages.header(id).expect("below the high-water mark");
        let is_free = free.binary_search(&Pgid(id)).is_ok();
        let kind = if is_free {
            "free".to_owned()
        } else {
            type_name(header.flags)
        };
        // A freelist page may hold more ids than its 16-bit count says.
        let items = match PageKind::from_flags(header.flags) {
            Some(PageKind::Freelist) if !is_free => {
                FreelistPage::new(pages.span(Pgid(0), Pgid(id)).unwrap_or_default(), Pgid(id))
                    .map_or(u64::from(header.count), |page| page.len() as u64)
            }
            _ => u64::from(header.count),
        };
        if args.json {
            let row = PageRow {
                id,
                kind: &kind,
                items: (!is_free).then_some(items),
                overflow: (!is_free).then_some(header.overflow),
            };
            serde_json::to_writer(&mut w, &row)?;
            writeln!(w)?;
        } else {
            let (count, overflow) = if is_free {
                (String::new(), String::new())
            } else {
                let overflow = if header.overflow > 0 {
                    header.overflow.to_string()
                } else {
                    String::new()
                };
                (items.to_string(), overflow)
            };
            writeln!(w, "{id:<8} {kind:<10} {count:<6} {overflow:<6}")?;
        }
        id += 1;
        if !is_free {
            id = id.saturating_add(u64::from(header.overflow));
        }
    }
    crate::out::flush(w)
}

/// Arguments of `page`.
#[derive(Args, Debug)]
#[command(
    group(clap::ArgGroup::new("which").required(true).args(["pgids", "all"])),
    override_usage = "rbolt page [OPTIONS] <PATH> <PGID>...\n       rbolt page --all [OPTIONS] <PATH>"
)]
pub struct PageArgs {
    /// The database file (read raw: it need not open as a database).
    pub path: PathBuf,
    #[command(flatten)]
    pub lock: LockArgs,
    /// The pages to print.
    #[arg(value_name = "PGID", conflicts_with = "all")]
    pub pgids: Vec<u64>,
    /// Print every page below the high-water mark.
    #[arg(long)]
    pub all: bool,
    /// How to print the values of leaf pages.
    #[arg(long, alias = "format", value_enum, default_value = "auto")]
    pub format_value: Format,
    /// Never shorten lines to the terminal's width (they are shortened only on a terminal).
    #[arg(long)]
    pub wide: bool,
}

/// `rbolt page PATH PGID... | --all`: each page's header and elements, as bbolt prints them.
/// A page that cannot be printed says so and the others follow; the exit status is then 1.
pub fn page(args: &PageArgs) -> Result<()> {
    let raw = RawFile::open(&args.path, &args.lock)?;
    let width = if args.wide {
        None
    } else {
        crate::out::terminal_width()
    };
    let mut w = crate::out::stdout();
    let mut failed = 0usize;
    let mut print = |w: &mut dyn Write, pgid: u64, first: bool| -> Result<u64> {
        if !first {
            writeln!(w, "{PAGE_SEPARATOR}")?;
        }
        match print_page(w, &raw, pgid, args.format_value, width) {
            Ok(overflow) => Ok(u64::from(overflow)),
            Err(error) if crate::out::is_broken_pipe(&error) => Err(error),
            Err(error) => {
                failed += 1;
                writeln!(
                    w,
                    "Printing page {pgid} failed: {}. Continuing...",
                    crate::one_line(&error)
                )?;
                Ok(0)
            }
        }
    };
    if args.all {
        let high_water = raw.high_water()?;
        let mut pgid = 0u64;
        while pgid < high_water {
            let overflow = print(&mut w, pgid, pgid == 0)?;
            pgid = pgid.saturating_add(overflow + 1);
        }
    } else {
        for (i, &pgid) in args.pgids.iter().enumerate() {
            print(&mut w, pgid, i == 0)?;
        }
    }
    crate::out::flush(w)?;
    if failed > 0 {
        bail!("{failed} pages could not be printed");
    }
    Ok(())
}

/// Prints one page; returns its overflow count.
fn print_page(
    w: &mut dyn Write,
    raw: &RawFile,
    pgid: u64,
    format: Format,
    width: Option<usize>,
) -> Result<u32> {
    let (header, bytes) = raw.read_page(pgid)?;
    writeln!(w, "Page ID:    {}", header.id)?;
    writeln!(w, "Page Type:  {}", type_name(header.flags))?;
    writeln!(w, "Total Size: {} bytes", bytes.len())?;
    writeln!(w, "Overflow pages: {}", header.overflow)?;
    let line = |w: &mut dyn Write, text: &[u8]| -> std::io::Result<()> {
        match width {
            Some(width) => {
                let text = String::from_utf8_lossy(text);
                writeln!(w, "{}", crate::format::elide(&text, width))
            }
            None => {
                w.write_all(text)?;
                w.write_all(b"\n")
            }
        }
    };
    let page = PageRef::new(&bytes, Pgid(pgid))?;
    match header.kind() {
        Some(PageKind::Meta) => {
            let meta =
                Meta::read_unchecked(&bytes).ok_or_else(|| anyhow!("meta page too short"))?;
            writeln!(w, "Version:    {}", meta.version)?;
            writeln!(w, "Page Size:  {} bytes", meta.page_size)?;
            writeln!(w, "Flags:      {:08x}", meta.flags)?;
            writeln!(w, "Root:       <pgid={}>", meta.root.root)?;
            writeln!(w, "Freelist:   <pgid={}>", meta.freelist)?;
            writeln!(w, "HWM:        <pgid={}>", meta.pgid)?;
            writeln!(w, "Txn ID:     {}", meta.txid)?;
            writeln!(w, "Checksum:   {:016x}", meta.checksum)?;
            writeln!(w)?;
        }
        Some(PageKind::Leaf) => {
            let leaf = page.leaf()?;
            writeln!(w, "Item Count: {}", leaf.len())?;
            writeln!(w)?;
            for index in 0..leaf.len() {
                let entry = leaf.entry(index)?;
                let mut text = show_key(entry.key).into_bytes();
                text.extend_from_slice(b": ");
                if entry.is_bucket() {
                    let bucket = BucketHeader::read(entry.value)
                        .ok_or_else(|| anyhow!("element {index}: bucket value too short"))?;
                    text.extend_from_slice(
                        format!("<pgid={},seq={}>", bucket.root, bucket.sequence).as_bytes(),
                    );
                } else {
                    crate::format::write_bytes(&mut text, entry.value, format)?;
                }
                line(w, &text)?;
            }
            writeln!(w)?;
        }
        Some(PageKind::Branch) => {
            let branch = page.branch()?;
            writeln!(w, "Item Count: {}", branch.len())?;
            writeln!(w)?;
            for index in 0..branch.len() {
                let text = format!(
                    "{}: <pgid={}>",
                    show_key(branch.key(index)?),
                    branch.child(index)?
                );
                line(w, text.as_bytes())?;
            }
            writeln!(w)?;
        }
        Some(PageKind::Freelist) => {
            let freelist = page.freelist()?;
            writeln!(w, "Item Count: {}", freelist.len())?;
            writeln!(w, "Overflow: {}", header.overflow)?;
            writeln!(w)?;
            for id in freelist.iter() {
                writeln!(w, "{id}")?;
            }
            writeln!(w)?;
        }
        None => {}
    }
    Ok(header.overflow)
}

/// A key as bbolt's `page` shows it: quoted when printable, else hex.
fn show_key(key: &[u8]) -> String {
    if is_printable(key) {
        go_quote(key)
    } else {
        hex(key)
    }
}

/// Arguments of `page-item`.
#[derive(Args, Debug)]
pub struct PageItemArgs {
    /// The database file (read raw: it need not open as a database).
    pub path: PathBuf,
    #[command(flatten)]
    pub lock: LockArgs,
    /// The leaf page.
    pub pgid: u64,
    /// The element's index in the page, from 0.
    pub item: u64,
    /// Print only the key.
    #[arg(long, conflicts_with = "value_only")]
    pub key_only: bool,
    /// Print only the value.
    #[arg(long)]
    pub value_only: bool,
    /// How to print the key and the value.
    #[arg(long, short = 'f', value_enum, default_value = "auto")]
    pub format: Format,
}

/// `rbolt page-item PATH PGID ITEM`: the key, then the value, of one leaf element.
pub fn page_item(args: &PageItemArgs) -> Result<()> {
    let raw = RawFile::open(&args.path, &args.lock)?;
    let (header, bytes) = raw.read_page(args.pgid)?;
    if args.item >= u64::from(header.count) {
        bail!(
            "page {}: expected an item index less than {}, but got {}",
            args.pgid,
            header.count,
            args.item
        );
    }
    if header.kind() != Some(PageKind::Leaf) {
        bail!(
            "page {}: expected a page of type 'leaf', but it is '{}'",
            args.pgid,
            type_name(header.flags)
        );
    }
    let leaf = LeafPage::new(&bytes, Pgid(args.pgid))?;
    let entry = leaf.entry(args.item as usize)?;
    let mut w = crate::out::stdout();
    if !args.value_only {
        crate::format::writeln_bytes(&mut w, entry.key, args.format)?;
    }
    if !args.key_only {
        crate::format::writeln_bytes(&mut w, entry.value, args.format)?;
    }
    crate::out::flush(w)
}

/// Arguments of `dump`.
#[derive(Args, Debug)]
pub struct DumpArgs {
    /// The database file (read raw: it need not open as a database).
    pub path: PathBuf,
    #[command(flatten)]
    pub lock: LockArgs,
    /// The pages to dump (the first page of each; overflow pages are pages too).
    #[arg(required = true, value_name = "PGID")]
    pub pgids: Vec<u64>,
}

/// `rbolt dump PATH PGID...`: a hex dump of each page, 16 bytes a line in 2-byte groups,
/// runs of equal lines folded into `*`, as bbolt prints it.
pub fn dump(args: &DumpArgs) -> Result<()> {
    const LINE_BYTES: usize = 16;
    let raw = RawFile::open(&args.path, &args.lock)?;
    let page_size = raw.page_size();
    let mut w = crate::out::stdout();
    for (i, &pgid) in args.pgids.iter().enumerate() {
        if i > 0 {
            writeln!(w, "{PAGE_SEPARATOR}")?;
        }
        let buf = raw.read_block(pgid)?;
        let address = pgid * page_size as u64;
        let mut previous: Option<&[u8]> = None;
        let mut skipped = false;
        for (index, line) in buf.chunks(LINE_BYTES).enumerate() {
            let offset = address + (index * LINE_BYTES) as u64;
            let last = (index + 1) * LINE_BYTES == page_size;
            if previous == Some(line) && !last {
                if !skipped {
                    writeln!(w, "{offset:07x} *")?;
                    skipped = true;
                }
            } else {
                write!(w, "{offset:07x}")?;
                for pair in line.chunks(2) {
                    write!(w, " {}", hex(pair))?;
                }
                writeln!(w)?;
                skipped = false;
            }
            previous = Some(line);
        }
        writeln!(w)?;
    }
    crate::out::flush(w)
}

#[cfg(test)]
mod tests {
    #[test]
    fn type_names() {
        assert_eq!(super::type_name(0x02), "leaf");
        assert_eq!(super::type_name(0x10), "freelist");
        assert_eq!(super::type_name(0x00), "unknown<00>");
        assert_eq!(super::type_name(0x120), "unknown<120>");
    }
}
