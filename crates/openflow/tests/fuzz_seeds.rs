//! Replays the fuzz target's body (`wire::fuzz_decode`) on stable: every
//! committed seed in `fuzz/seeds/openflow_decode`, then a bounded number of
//! deterministic mutations of them (byte flips, truncations, length-field
//! rewrites, splices). A failure here is a codec bug the fuzzer would find.

use commbench_openflow::wire::fuzz_decode;

fn seeds() -> Vec<Vec<u8>> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/seeds/openflow_decode"
    );
    let mut v: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .expect("seed directory")
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    v.sort();
    assert!(v.len() >= 10, "seeds are committed");
    v
}

#[test]
fn seeds_decode_cleanly() {
    for s in seeds() {
        fuzz_decode(&s);
    }
}

#[test]
fn mutated_seeds_never_panic() {
    let seeds = seeds();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..20_000 {
        let mut s = seeds[(rnd() as usize) % seeds.len()].clone();
        match rnd() % 4 {
            0 => {
                let i = (rnd() as usize) % s.len();
                s[i] ^= 1 << (rnd() % 8);
            }
            1 => s.truncate((rnd() as usize) % (s.len() + 1)),
            2 if s.len() >= 4 => {
                // Rewrite a length field somewhere in the first message.
                let i = 2 + ((rnd() as usize) % (s.len() - 3)).min(s.len() - 2);
                let v = (rnd() % 0x1_0000) as u16;
                if i + 2 <= s.len() {
                    s[i..i + 2].copy_from_slice(&v.to_be_bytes());
                }
            }
            _ => {
                let other = &seeds[(rnd() as usize) % seeds.len()];
                let cut = (rnd() as usize) % (other.len() + 1);
                s.extend_from_slice(&other[..cut]);
            }
        }
        fuzz_decode(&s);
    }
}
