//! The read commands on every bbolt fixture, checked against the fixture's manifest and the
//! summary bbolt wrote for it. Every command here must leave the file as it was.

use crate::support::{Dir, arg, page_size, rbolt, unchanged};
use rbolt_fixtures::{Bucket, Item, NAMES, hex, manifest, manifest_text, summary};
use serde_json::Value;

#[test]
fn export_of_every_fixture_is_its_manifest() {
    let dir = Dir::new();
    for name in NAMES {
        let db = dir.fixture(name);
        let run = unchanged(&db, || rbolt(["export", arg(&db)]));
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        assert!(
            run.stdout == manifest_text(name).as_bytes(),
            "{name}: export differs from the manifest"
        );
    }
}

#[test]
fn export_to_a_file_is_the_same() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    let out = dir.path("small.jsonl");
    rbolt(["export", arg(&db), "-o", arg(&out)]).ok();
    assert_eq!(
        std::fs::read_to_string(out).unwrap(),
        manifest_text("small")
    );
}

#[test]
fn check_is_ok_on_every_fixture() {
    let dir = Dir::new();
    for name in NAMES {
        let db = dir.fixture(name);
        let run = unchanged(&db, || rbolt(["check", arg(&db)]));
        assert_eq!(run.code, 0, "{name}: {} {}", run.out(), run.stderr);
        assert_eq!(run.out(), "OK\n", "{name}");
        let json = rbolt(["check", "--json", arg(&db)]).ok();
        assert_eq!(json, "{\"ok\":true,\"errors\":[]}\n", "{name}");
    }
}

#[test]
fn check_from_a_page_checks_its_subtree() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    // Page 19 is the root of the root bucket in the fixture's current meta (see small.json).
    assert_eq!(rbolt(["check", "--from-page", "19", arg(&db)]).ok(), "OK\n");
    let run = rbolt(["check", "--from-page", "99", arg(&db)]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.out(),
        "page ID (99) out of range [2, 37)\n1 errors found\n"
    );
}

#[test]
fn info_shows_the_meta_in_use() {
    let dir = Dir::new();
    for name in NAMES {
        let db = dir.fixture(name);
        let s = summary(name);
        let text = unchanged(&db, || rbolt(["info", arg(&db)]).ok());
        assert!(
            text.starts_with(&format!("Page Size: {}\n", s["page_size"])),
            "{name}: {text}"
        );
        let info: Value = serde_json::from_str(&rbolt(["info", "--json", arg(&db)]).ok()).unwrap();
        assert_eq!(info["page_size"], s["page_size"], "{name}");
        assert_eq!(info["txid"], s["txid"], "{name}");
        assert_eq!(info["hwm"], s["hwm_pgid"], "{name}");
        assert_eq!(info["meta_page"], s["active_meta"], "{name}");
        if s["no_freelist_sync"].as_bool().unwrap() {
            assert!(info["freelist"].is_null(), "{name}");
        } else {
            assert_eq!(info["freelist"], s["freelist_pgid"], "{name}");
        }
    }
}

#[test]
fn stats_agree_with_bbolt() {
    let dir = Dir::new();
    for name in NAMES {
        let db = dir.fixture(name);
        let s = summary(name);
        let run = unchanged(&db, || rbolt(["stats", "--json", arg(&db)]));
        let stats: Value = serde_json::from_str(&run.ok()).unwrap();
        for (field, value) in s["stats"].as_object().unwrap() {
            assert_eq!(&stats[field], value, "{name}: {field}");
        }
    }
}

#[test]
fn stats_text_is_bbolts() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    let expected = "Aggregate statistics for 5 buckets

Page count statistics
\tNumber of logical branch pages: 2
\tNumber of physical branch overflow pages: 0
\tNumber of logical leaf pages: 20
\tNumber of physical leaf overflow pages: 0
Tree statistics
\tNumber of keys/value pairs: 564
\tNumber of levels in B+tree: 4
Page size utilization
\tBytes allocated for physical branch pages: 8192
\tBytes actually used for branch data: 570 (6%)
\tBytes allocated for physical leaf pages: 81920
\tBytes actually used for leaf data: 38887 (47%)
Bucket statistics
\tTotal number of buckets: 8
\tTotal number on inlined buckets: 3 (37%)
\tBytes used for inlined buckets: 245 (0%)
";
    assert_eq!(rbolt(["stats", arg(&db)]).ok(), expected);
    // A prefix selects top-level buckets by name: "beta" alone (see small.json).
    let beta = rbolt(["stats", arg(&db), "be"]).ok();
    assert!(
        beta.starts_with("Aggregate statistics for 1 buckets\n"),
        "{beta}"
    );
    assert!(
        beta.contains("\tNumber of keys/value pairs: 345\n"),
        "{beta}"
    );
}

#[test]
fn buckets_keys_and_get_show_the_manifests_content() {
    let dir = Dir::new();
    for name in NAMES {
        let db = dir.fixture(name);
        let content = manifest(name);
        let names: Vec<&Vec<u8>> = content.entries.keys().collect();
        let run = unchanged(&db, || rbolt(["buckets", arg(&db), "--format", "hex"]));
        let expected: String = names.iter().map(|n| format!("{}\n", hex(n))).collect();
        assert_eq!(run.ok(), expected, "{name}");
        // Every top-level bucket with a UTF-8 name: its keys (hex), and one value by key.
        for (bucket_name, item) in &content.entries {
            let (Ok(bucket_text), Item::Bucket(bucket)) = (std::str::from_utf8(bucket_name), item)
            else {
                continue;
            };
            let keys = rbolt(["keys", arg(&db), bucket_text, "--format", "hex"]).ok();
            let expected: String = bucket
                .entries
                .keys()
                .map(|k| format!("{}\n", hex(k)))
                .collect();
            assert_eq!(keys, expected, "{name}/{bucket_text}");
            let value_entry = bucket.entries.iter().find_map(|(k, item)| match item {
                Item::Value(v) => Some((k, v)),
                Item::Bucket(_) => None,
            });
            if let Some((key, value)) = value_entry {
                let run = rbolt([
                    "get",
                    arg(&db),
                    bucket_text,
                    &hex(key),
                    "--parse-format",
                    "hex",
                    "--format",
                    "hex",
                ]);
                assert_eq!(
                    run.ok(),
                    format!("{}\n", hex(value)),
                    "{name}/{bucket_text}"
                );
            }
        }
    }
}

#[test]
fn nested_and_binary_bucket_names_are_reachable() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    // beta/two/deeper is nested two levels down; 00ff10 is a binary name.
    let keys = rbolt(["keys", arg(&db), "beta", "two", "deeper"]).ok();
    assert_eq!(keys.lines().count(), 40);
    let binary = rbolt([
        "keys",
        arg(&db),
        "--bucket-format",
        "hex",
        "00ff10",
        "-f",
        "hex",
    ])
    .ok();
    assert_eq!(binary, "0923c4ab\n2826a19a\n9ee3eb9f\na72493dd\ncf33b1e2\n");
    let value = rbolt([
        "get",
        arg(&db),
        "--bucket-format",
        "hex",
        "00ff10",
        "0923c4ab",
        "--parse-format",
        "hex",
    ]);
    assert_eq!(value.ok(), "2f8607f8eeb7c7a5\n");
    // Nested bucket names are keys of their parent, as bbolt lists them.
    assert_eq!(
        rbolt(["keys", arg(&db), "beta"]).ok(),
        "aaa\none\ntwo\nzzz\n"
    );
    let quoted = rbolt(["get", arg(&db), "beta", "aaa", "--format", "ascii-encoded"]).ok();
    assert_eq!(quoted, "\"first plain key in beta\"\n");
}

/// Checks `inspect`'s tree against the manifest's, and returns the number of buckets seen.
fn compare_inspect(json: &Value, bucket: &Bucket, path: &str) -> usize {
    let values = bucket
        .entries
        .values()
        .filter(|item| matches!(item, Item::Value(_)))
        .count();
    assert_eq!(json["keyN"].as_u64().unwrap() as usize, values, "{path}");
    let children: Vec<(&Vec<u8>, &Bucket)> = bucket
        .entries
        .iter()
        .filter_map(|(name, item)| match item {
            Item::Bucket(child) => Some((name, child)),
            Item::Value(_) => None,
        })
        .collect();
    let json_children = json["buckets"].as_array().map_or(&[][..], Vec::as_slice);
    assert_eq!(json_children.len(), children.len(), "{path}");
    // `buckets` is left out, not empty, when there are none (Go's omitempty).
    assert_eq!(
        json.get("buckets").is_some(),
        !children.is_empty(),
        "{path}"
    );
    let mut count = 0;
    for (json_child, (name, child)) in json_children.iter().zip(children) {
        assert_eq!(
            json_child["name"].as_str().unwrap(),
            String::from_utf8_lossy(name),
            "{path}"
        );
        count += 1 + compare_inspect(json_child, child, &format!("{path}/{}", hex(name)));
    }
    count
}

#[test]
fn inspect_shows_the_bucket_tree() {
    let dir = Dir::new();
    for name in NAMES {
        let db = dir.fixture(name);
        let text = unchanged(&db, || rbolt(["inspect", arg(&db)]).ok());
        let json: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["name"], "root");
        let buckets = compare_inspect(&json, &manifest(name), name);
        assert_eq!(buckets as u64, summary(name)["n_buckets"].as_u64().unwrap());
    }
    // Go's layout: four-space indents, `"key": value`.
    let text = rbolt(["inspect", arg(&dir.fixture("small"))]).ok();
    assert!(text.starts_with("{\n    \"name\": \"root\",\n    \"keyN\": 0,\n    \"buckets\": [\n        {\n            \"name\": \"\\u0000\\ufffd\\u0010\",\n            \"keyN\": 5\n        },\n"), "{text}");
    assert!(text.ends_with("\n    ]\n}\n"), "{text}");
}

#[test]
fn pages_table_accounts_for_every_page() {
    let dir = Dir::new();
    for name in NAMES {
        let db = dir.fixture(name);
        let s = summary(name);
        let text = unchanged(&db, || rbolt(["pages", arg(&db)]).ok());
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("ID       TYPE       ITEMS  OVRFLW"));
        assert_eq!(lines.next(), Some("======== ========== ====== ======"));
        let mut next_id = 0u64;
        let mut free = 0u64;
        for line in lines {
            assert_eq!(line.len(), 33, "{name}: {line:?}");
            let id: u64 = line[..8].trim().parse().unwrap();
            assert_eq!(id, next_id, "{name}: pages must follow each other");
            let kind = line[9..19].trim();
            let overflow: u64 = line[27..].trim().parse().unwrap_or(0);
            if kind == "free" {
                free += 1;
            } else {
                assert!(
                    ["meta", "leaf", "branch", "freelist"].contains(&kind),
                    "{name}: {line}"
                );
            }
            next_id = id + 1 + overflow;
        }
        assert_eq!(next_id, s["hwm_pgid"].as_u64().unwrap(), "{name}");
        if let Some(ids) = s["freelist_page"]["ids"].as_u64() {
            assert_eq!(free, ids, "{name}: free pages");
        }
        // The JSON form has one object per row.
        let json = rbolt(["pages", "--json", arg(&db)]).ok();
        assert_eq!(json.lines().count(), text.lines().count() - 2, "{name}");
    }
}

#[test]
fn page_prints_pages_as_bbolt_does() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    let run = unchanged(&db, || rbolt(["page", arg(&db), "0", "19"]));
    let expected = "Page ID:    0
Page Type:  meta
Total Size: 4096 bytes
Overflow pages: 0
Version:    2
Page Size:  4096 bytes
Flags:      00000000
Root:       <pgid=19>
Freelist:   <pgid=30>
HWM:        <pgid=37>
Txn ID:     10
Checksum:   9d241ac900d26349

===============================================
Page ID:    19
Page Type:  leaf
Total Size: 4096 bytes
Overflow pages: 0
Item Count: 5

00ff10: <pgid=0,seq=0>
\"alpha\": <pgid=3,seq=0>
\"beta\": <pgid=34,seq=0>
\"gamma\": <pgid=18,seq=0>
\"seq\": <pgid=0,seq=42>

";
    assert_eq!(run.ok(), expected);
    let freelist = rbolt(["page", arg(&db), "30"]).ok();
    assert!(freelist.contains("Page Type:  freelist\n"), "{freelist}");
    assert!(
        freelist.contains("Item Count: 11\nOverflow: 0\n\n5\n6\n15\n"),
        "{freelist}"
    );
    let branch = rbolt(["page", arg(&db), "33"]).ok();
    assert!(branch.contains("\"deeper\": <pgid=20>\n"), "{branch}");
}

#[test]
fn page_all_prints_every_page_of_every_fixture() {
    let dir = Dir::new();
    for name in ["small", "pagesize-16k", "overflow", "nofreelistsync"] {
        let db = dir.fixture(name);
        let text = unchanged(&db, || rbolt(["page", "--all", arg(&db)]).ok());
        assert!(!text.contains("failed"), "{name}");
        let pages = text.matches("Page ID:").count() as u64;
        assert!(pages > 1, "{name}");
    }
    // Overflow pages are folded into their page: a 1.5 MB value spans hundreds of pages.
    let overflow = rbolt(["page", "--all", arg(&dir.fixture("overflow"))]).ok();
    assert!(
        overflow
            .lines()
            .any(|l| l.starts_with("Overflow pages: ") && l.len() > 18)
    );
}

#[test]
fn page_item_prints_a_leaf_element() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    // Page 19 element 1 is the bucket "alpha" (a 16-byte bucket header: root 3, sequence 0).
    let run = unchanged(&db, || rbolt(["page-item", arg(&db), "19", "1"]));
    assert_eq!(run.ok(), "alpha\n03000000000000000000000000000000\n");
    assert_eq!(
        rbolt(["page-item", "--key-only", arg(&db), "19", "1"]).ok(),
        "alpha\n"
    );
    let value = rbolt([
        "page-item",
        "--value-only",
        "--format",
        "redacted",
        arg(&db),
        "19",
        "1",
    ]);
    assert!(value.ok().starts_with("<redacted len:16 sha256:"));
    rbolt(["page-item", arg(&db), "19", "9"]).fails_with("less than 5, but got 9");
    rbolt(["page-item", arg(&db), "30", "0"]).fails_with("'leaf'");
}

#[test]
fn dump_is_a_hex_dump_of_whole_pages() {
    let dir = Dir::new();
    for name in ["small", "pagesize-16k"] {
        let db = dir.fixture(name);
        let text = unchanged(&db, || rbolt(["dump", arg(&db), "0", "1"]).ok());
        let size = page_size(name);
        let pages: Vec<&str> = text
            .split("===============================================\n")
            .collect();
        assert_eq!(pages.len(), 2, "{name}");
        assert!(pages[0].starts_with("0000000 0000 0000 0000 0000 0400 0000 0000 0000\n"));
        assert!(
            pages[0].contains("\n0000010 edda 0ced 0200 0000"),
            "{name}: magic, version"
        );
        // The run of zero lines is folded into one `*`, the last line is always shown.
        assert!(pages[0].contains(" *\n"), "{name}");
        let last = format!(
            "{:07x} 0000 0000 0000 0000 0000 0000 0000 0000\n\n",
            size - 16
        );
        assert!(pages[0].ends_with(&last), "{name}: {}", pages[0]);
        assert!(
            pages[1].starts_with(&format!("{size:07x} 0100 0000")),
            "{name}"
        );
    }
}
