//! The emulator's switch side, message by message, against what cbench's
//! fakeswitch.c sends (oflops cbench/fakeswitch.c): a
//! scripted controller drives one emulated switch and checks every reply
//! byte for byte.

use commbench_openflow::emulator::{self, CbenchConfig, Line};
use commbench_openflow::wire::frame;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

fn msg(ty: u8, xid: u32, body: &[u8]) -> Vec<u8> {
    let mut m = vec![1, ty];
    m.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
    m.extend_from_slice(&xid.to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Read one OpenFlow message; `None` at EOF.
fn read_msg(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut h = [0u8; 8];
    if s.read_exact(&mut h).is_err() {
        return None;
    }
    let len = u16::from_be_bytes([h[2], h[3]]) as usize;
    let mut m = h.to_vec();
    m.resize(len.max(8), 0);
    s.read_exact(&mut m[8..]).ok()?;
    Some(m)
}

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes(b[o..o + 4].try_into().unwrap())
}

/// Next message that is not a packet_in; packet_ins go to `probes`.
fn next_reply(s: &mut TcpStream, probes: &mut Vec<Vec<u8>>) -> Vec<u8> {
    loop {
        let m = read_msg(s).expect("emulator closed the connection early");
        if m[1] == 10 {
            probes.push(m);
        } else {
            return m;
        }
    }
}

#[test]
fn switch_answers_and_probes_like_cbench_fakeswitch() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let ctl = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut probes = Vec::new();
        // HELLO, xid 1, no negotiation elements.
        assert_eq!(read_msg(&mut s).unwrap(), msg(0, 1, &[]));
        s.write_all(&msg(0, 1, &[])).unwrap();
        s.write_all(&msg(5, 0x11, &[])).unwrap();
        // FEATURES_REPLY: 224 bytes, cbench's captured ports.
        let f = next_reply(&mut s, &mut probes);
        assert_eq!((f[1], f.len(), be32(&f, 4)), (6, 224, 0x11));
        assert_eq!(u64::from_be_bytes(f[8..16].try_into().unwrap()), 1);
        assert_eq!(
            (be32(&f, 16), f[20], be32(&f, 24), be32(&f, 28)),
            (256, 2, 0, 0x7ff)
        );
        let names: Vec<&[u8]> = (0..4).map(|p| &f[32 + 48 * p + 8..][..5]).collect();
        assert_eq!(names, [b"veth1", b"veth3", b"veth5", b"veth7"]);
        assert_eq!(&f[32..40], &[0, 1, 0x1a, 0xc1, 0x51, 0xff, 0xef, 0x8a]);
        assert_eq!(be32(&f, 32 + 32), 0xc0, "port 1 curr");
        // The learn-dst-mac packet_in: xid 1, 84 bytes, total_len 64.
        let arp = read_msg(&mut s).unwrap();
        assert_eq!((arp[1], arp.len(), be32(&arp, 4)), (10, 84, 1));
        assert_eq!(be32(&arp, 8), 0xffff_ffff);
        assert_eq!(&arp[12..18], &[0, 64, 0, 2, 0, 0]);
        assert_eq!(&arp[18..82], &frame::gratuitous_arp(1)[..]);
        assert_eq!(&arp[82..], &[0, 0]);
        // The first probe: xid 2 (after the ARP's 1), buffer_id 1, MAC 0.
        let p = read_msg(&mut s).unwrap();
        assert_eq!((p[1], p.len(), be32(&p, 4), be32(&p, 8)), (10, 82, 2, 1));
        assert_eq!(&p[12..18], &[0, 64, 0, 1, 0, 0]);
        assert_eq!(&p[18..], &frame::probe_frame(1, 0)[..]);
        assert_eq!(&p[18 + 24..18 + 26], &[0xf7, 0x2c], "cbench's IP checksum");
        probes.push(p);

        // ECHO_REQUEST with data -> a bare 8-byte ECHO_REPLY.
        s.write_all(&msg(2, 0x21, b"ping")).unwrap();
        assert_eq!(next_reply(&mut s, &mut probes), msg(3, 0x21, &[]));
        // VENDOR -> 12-byte BAD_REQUEST/BAD_VENDOR, no data; restarts the probe.
        s.write_all(&msg(4, 0x22, &[0, 0, 0x23, 0x20])).unwrap();
        assert_eq!(next_reply(&mut s, &mut probes), msg(1, 0x22, &[0, 1, 0, 3]));
        // BARRIER_REQUEST -> BARRIER_REPLY.
        s.write_all(&msg(18, 0x23, &[])).unwrap();
        assert_eq!(next_reply(&mut s, &mut probes), msg(19, 0x23, &[]));
        // A non-DESC stats request is ignored; DESC gets a 1068-byte reply
        // (and restarts the probe in flight).
        s.write_all(&msg(16, 0x24, &[0, 4, 0, 0, 0xff, 0xff, 0, 0]))
            .unwrap();
        s.write_all(&msg(16, 0x25, &[0, 0, 0, 0])).unwrap();
        let d = next_reply(&mut s, &mut probes);
        assert_eq!((d[1], d.len(), be32(&d, 4)), (17, 1068, 0x25));
        assert_eq!(&d[8..12], &[0, 0, 0, 0], "DESC, flags 0");
        // GET_CONFIG before any SET_CONFIG: zeros (restarts the probe).
        s.write_all(&msg(7, 0x26, &[])).unwrap();
        assert_eq!(next_reply(&mut s, &mut probes), msg(8, 0x26, &[0; 4]));
        // SET_CONFIG is stored and answered back (restarts the probe).
        s.write_all(&msg(9, 0x27, &[0, 1, 0x00, 0x80])).unwrap();
        s.write_all(&msg(7, 0x28, &[])).unwrap();
        assert_eq!(
            next_reply(&mut s, &mut probes),
            msg(8, 0x28, &[0, 1, 0x00, 0x80])
        );
        // Unanswered probes: read whatever else comes until the run ends.
        while let Some(m) = read_msg(&mut s) {
            assert_eq!(m[1], 10, "only probes remain: {m:?}");
            probes.push(m);
        }
        probes
    });
    let cfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port,
        switches: 1,
        loops: 2,
        ms_per_test: 1000,
        handshake_timeout_ms: 5000,
        ..Default::default()
    };
    let r = emulator::run_with(&cfg, &mut |l| {
        if let Line::Notice(n) = l {
            eprintln!("{n}")
        }
    })
    .expect("cbench run");
    let probes = ctl.join().unwrap();
    // Window 0: the first probe and 4 restarts (vendor, DESC, 2 x
    // GET_CONFIG); window 1: one fresh probe after the drain.
    let t = &r.rounds[0].tally;
    assert_eq!(t.probes_sent, 6, "{t:?}");
    assert_eq!(probes.len(), 6);
    for (i, p) in probes.iter().enumerate() {
        let i = i as u32;
        assert_eq!((p.len(), be32(p, 4), be32(p, 8)), (82, i + 2, i + 1));
        assert_eq!(&p[18..], &frame::probe_frame(1, i)[..]);
    }
    assert_eq!(t.echo_request, 1);
    assert_eq!(t.vendor, 1);
    assert_eq!(t.stats_request, 2);
    assert_eq!(t.responses, 0);
}
