//! The generator's shuffle is a permutation, reproducible from the seed, and moves items.

use rbolt_testkit::rng::Rng;

#[test]
fn shuffle_permutes_and_replays_from_its_seed() {
    let shuffled = |seed| {
        let mut items: Vec<u32> = (0..100).collect();
        Rng::new(seed).shuffle(&mut items);
        items
    };
    let first = shuffled(7);
    let mut sorted = first.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..100).collect::<Vec<_>>());
    assert_eq!(shuffled(7), first);
    assert_ne!(shuffled(8), first);
    assert_ne!(first, sorted);
    // Empty and one-item slices are left as they are.
    Rng::new(1).shuffle(&mut [0u8; 0]);
    let mut one = [5];
    Rng::new(1).shuffle(&mut one);
    assert_eq!(one, [5]);
}
