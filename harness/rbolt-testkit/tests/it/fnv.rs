//! FNV-1a gives the reference hashes, and a hash written in pieces is the hash of the whole.

use rbolt_testkit::fnv::{Fnv1a64, fnv1a32, fnv1a64};

#[test]
fn fnv1a64_gives_the_reference_hashes() {
    // Vectors from the FNV reference (draft-eastlake-fnv).
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn fnv1a32_gives_the_reference_hashes() {
    assert_eq!(fnv1a32(b""), 0x811c_9dc5);
    assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
    assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
}

#[test]
fn a_hash_written_in_pieces_is_the_hash_of_the_pieces_joined() {
    let mut hash = Fnv1a64::default();
    for piece in [&b"fo"[..], b"", b"o", b"bar"] {
        hash.write(piece);
    }
    assert_eq!(hash.finish(), fnv1a64(b"foobar"));
    assert_ne!(hash.finish(), fnv1a64(b"foobaz"));
}
