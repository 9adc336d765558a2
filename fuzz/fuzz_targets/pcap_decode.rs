//! Fuzz the packet decoders and the CSV/JSONL formatters: the first two
//! bytes pick a link type, the rest is the captured packet.
#![no_main]
use commbench_pcap::decode::{decode, Fields};
use commbench_pcap::format::{Field, Formatter, OutBuf, OutputFormat};
use libfuzzer_sys::fuzz_target;

const LINKTYPES: [u32; 10] = [0, 1, 12, 14, 101, 108, 113, 228, 229, 276];

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let lt = LINKTYPES[data[0] as usize % LINKTYPES.len()];
    let mut f = Fields::default();
    decode(lt, &data[2..], &mut f);
    let mut out = OutBuf::new();
    let csv = Formatter::new(Field::ALL.to_vec(), OutputFormat::Csv);
    csv.write(1, &f, &mut out);
    let json = Formatter::new(Field::ALL.to_vec(), OutputFormat::Jsonl);
    json.write(1, &f, &mut out);
    assert!(out.as_bytes().ends_with(b"\n"));
});
