//! The reader processes of a live writer's reader table (issue 50), as `stats` and `inspect`
//! list them: each slot's process, the txid its transaction reads, the bytes of the file that
//! transaction may read, and how long it has read. Nothing is listed when the command holds
//! the shared lock (no writer is open), so the output is bbolt's then.

use anyhow::Result;
use serde::Serialize;
use std::io::Write;

/// One slot of the table, as the commands show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReaderSlot {
    /// The slot's index in the table.
    pub slot: usize,
    /// The process that holds it.
    pub pid: u32,
    /// Whether that process is this command.
    pub this_command: bool,
    /// Whether the process id is seen from here (not when it is in another PID namespace,
    /// or a child process holds the slot's lock).
    pub pid_seen: bool,
    /// The txid its open transaction reads, `None` between transactions.
    pub txid: Option<u64>,
    /// The bytes of the file that transaction may read (has mapped), `None` between
    /// transactions.
    pub mapped_bytes: Option<u64>,
    /// Seconds since that transaction began, `None` between transactions.
    pub age_seconds: Option<u64>,
}

/// [`ReaderSlot`] with bbolt's `BucketStats` naming (`stats --json`).
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReaderSlotStats {
    slot: usize,
    pid: u32,
    this_command: bool,
    pid_seen: bool,
    txid: Option<u64>,
    mapped_bytes: Option<u64>,
    age_seconds: Option<u64>,
}

impl From<ReaderSlot> for ReaderSlotStats {
    fn from(slot: ReaderSlot) -> ReaderSlotStats {
        ReaderSlotStats {
            slot: slot.slot,
            pid: slot.pid,
            this_command: slot.this_command,
            pid_seen: slot.pid_seen,
            txid: slot.txid,
            mapped_bytes: slot.mapped_bytes,
            age_seconds: slot.age_seconds,
        }
    }
}

/// The slots live reader processes hold (this command's among them when it reads beside a
/// live writer); empty when there is no reader table.
pub fn reader_slots(db: &rbolt::Db) -> Result<Vec<ReaderSlot>> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ok(db
        .reader_processes()?
        .into_iter()
        .map(|slot| ReaderSlot {
            slot: slot.index,
            pid: slot.pid,
            this_command: slot.pid == std::process::id(),
            pid_seen: slot.pid_seen,
            txid: slot.txid,
            mapped_bytes: slot.txid.map(|_| slot.len),
            age_seconds: slot.txid.map(|_| now.saturating_sub(slot.since)),
        })
        .collect())
}

/// The text section of `rbolt stats`, after bbolt's, when there are slots.
pub fn write_text(w: &mut impl Write, slots: &[ReaderSlot]) -> Result<()> {
    if slots.is_empty() {
        return Ok(());
    }
    writeln!(w, "Reader processes (beside the writer)")?;
    for slot in slots {
        let this = if slot.this_command {
            " (this command)"
        } else if slot.pid_seen {
            ""
        } else {
            " (not seen from here: another PID namespace, or a child holds its lock)"
        };
        match (slot.txid, slot.mapped_bytes, slot.age_seconds) {
            (Some(txid), Some(bytes), Some(age)) => writeln!(
                w,
                "\tslot {}: pid {}{this}, reads txid {txid} ({bytes} bytes) for {age}s",
                slot.slot, slot.pid,
            )?,
            _ => writeln!(
                w,
                "\tslot {}: pid {}{this}, no transaction open",
                slot.slot, slot.pid
            )?,
        }
    }
    Ok(())
}

/// The `"readerProcesses"` field `inspect` adds to its root object when there are slots:
/// `,\n` and the field, indented as Go's `json.MarshalIndent` with four spaces would at the
/// root's depth. Empty when there are none.
pub fn inspect_field(slots: &[ReaderSlot]) -> Result<String> {
    if slots.is_empty() {
        return Ok(String::new());
    }
    let mut json = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut json, formatter);
    slots.serialize(&mut serializer)?;
    let json = String::from_utf8(json)?;
    Ok(format!(
        ",\n    \"readerProcesses\": {}",
        json.replace('\n', "\n    ")
    ))
}
