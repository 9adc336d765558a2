//! Fuzz the capture readers: any bytes (pcap, pcapng, gzip, zstd or junk)
//! must be framed, counted and decoded without a panic or an allocation
//! sized by the input.
#![no_main]
use commbench_pcap::issues::Issues;
use commbench_pcap::reader::{open_reader, Splitter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = open_reader("fuzz", Box::new(std::io::Cursor::new(data.to_vec())), None) else {
        return;
    };
    let Ok(mut sp) = Splitter::new(input, 0) else {
        return;
    };
    let mut issues = Issues::default();
    let mut buf = Vec::new();
    let mut guard = 0;
    while let Ok(Some(chunk)) = sp.next_chunk(std::mem::take(&mut buf)) {
        let mut f = commbench_pcap::decode::Fields::default();
        chunk.for_each_packet(&mut issues, |p| {
            commbench_pcap::decode::decode(p.linktype, p.data, &mut f)
        });
        buf = chunk.buf;
        guard += 1;
        assert!(guard < 1_000_000, "no progress");
    }
});
