//! The straightforward Rust baseline for the pcap lab (issue 5): read with
//! pcap-parser, decode with etherparse, print the same CSV columns as
//! `commbench pcap extract` through `write!` (the general formatter).
//! Only used by bench/pcap-compare.sh as the "plain program" peer.

use etherparse::{LinkSlice, NetSlice, SlicedPacket, TransportSlice, VlanSlice};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{LegacyPcapReader, PcapBlockOwned, PcapError};
use std::fs::File;
use std::io::{BufWriter, Write};

fn mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: pcap-baseline FILE")?;
    let file = File::open(&path)?;
    let mut reader = LegacyPcapReader::new(1 << 20, file)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    writeln!(out, "ts,caplen,len,eth_src,eth_dst,ethertype,vlan_outer,vlan_inner,ip_version,ip_src,ip_dst,proto,ttl,ip_len,frag,src_port,dst_port,tcp_flags,tcp_seq,tcp_ack,tcp_win,icmp_type,icmp_code,arp_op")?;
    let mut nsec = false;
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                match block {
                    PcapBlockOwned::LegacyHeader(h) => nsec = h.is_nanosecond_precision(),
                    PcapBlockOwned::Legacy(b) => {
                        let frac = if nsec { b.ts_usec } else { b.ts_usec * 1000 };
                        write!(out, "{}.{:09},{},{},", b.ts_sec, frac, b.caplen, b.origlen)?;
                        match SlicedPacket::from_ethernet(b.data) {
                            Ok(p) => {
                                let mut et = String::new();
                                if let Some(LinkSlice::Ethernet2(e)) = &p.link {
                                    write!(out, "{},{},", mac(e.source()), mac(e.destination()))?;
                                    et = format!("0x{:04x}", e.ether_type().0);
                                } else {
                                    write!(out, ",,")?;
                                }
                                let (vo, vi) = match &p.vlan {
                                    Some(VlanSlice::SingleVlan(s)) => {
                                        et = format!("0x{:04x}", s.ether_type().0);
                                        (s.vlan_identifier().value().to_string(), String::new())
                                    }
                                    Some(VlanSlice::DoubleVlan(d)) => {
                                        et = format!("0x{:04x}", d.inner().ether_type().0);
                                        (
                                            d.outer().vlan_identifier().value().to_string(),
                                            d.inner().vlan_identifier().value().to_string(),
                                        )
                                    }
                                    None => (String::new(), String::new()),
                                };
                                write!(out, "{et},{vo},{vi},")?;
                                let mut frag = false;
                                match &p.net {
                                    Some(NetSlice::Ipv4(s)) => {
                                        let h = s.header();
                                        frag = h.more_fragments() || h.fragments_offset().value() != 0;
                                        write!(
                                            out,
                                            "4,{},{},{},{},{},{},",
                                            h.source_addr(),
                                            h.destination_addr(),
                                            h.protocol().0,
                                            h.ttl(),
                                            h.total_len(),
                                            frag as u8
                                        )?;
                                    }
                                    Some(NetSlice::Ipv6(s)) => {
                                        let h = s.header();
                                        frag = s.is_payload_fragmented();
                                        write!(
                                            out,
                                            "6,{},{},{},{},{},{},",
                                            h.source_addr(),
                                            h.destination_addr(),
                                            s.payload().ip_number.0,
                                            h.hop_limit(),
                                            h.payload_length(),
                                            frag as u8
                                        )?;
                                    }
                                    None => write!(out, ",,,,,,,")?,
                                }
                                let _ = frag;
                                match &p.transport {
                                    Some(TransportSlice::Tcp(t)) => {
                                        let flags = (t.ns() as u16) << 8
                                            | (t.cwr() as u16) << 7
                                            | (t.ece() as u16) << 6
                                            | (t.urg() as u16) << 5
                                            | (t.ack() as u16) << 4
                                            | (t.psh() as u16) << 3
                                            | (t.rst() as u16) << 2
                                            | (t.syn() as u16) << 1
                                            | t.fin() as u16;
                                        writeln!(
                                            out,
                                            "{},{},0x{:03x},{},{},{},,,",
                                            t.source_port(),
                                            t.destination_port(),
                                            flags,
                                            t.sequence_number(),
                                            t.acknowledgment_number(),
                                            t.window_size()
                                        )?;
                                    }
                                    Some(TransportSlice::Udp(u)) => {
                                        writeln!(out, "{},{},,,,,,,", u.source_port(), u.destination_port())?;
                                    }
                                    Some(TransportSlice::Icmpv4(i)) => {
                                        writeln!(out, ",,,,,,{},{},", i.type_u8(), i.code_u8())?;
                                    }
                                    Some(TransportSlice::Icmpv6(i)) => {
                                        writeln!(out, ",,,,,,{},{},", i.type_u8(), i.code_u8())?;
                                    }
                                    None => writeln!(out, ",,,,,,,,")?,
                                }
                            }
                            Err(_) => writeln!(out, ",,,,,,,,,,,,,,,,,,,,")?,
                        }
                    }
                    _ => {}
                }
                reader.consume(offset);
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => reader.refill().map_err(|e| format!("{e:?}"))?,
            Err(e) => return Err(format!("{e:?}").into()),
        }
    }
    out.flush()?;
    Ok(())
}
