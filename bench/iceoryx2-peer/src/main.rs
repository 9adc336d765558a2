//! iceoryx2 measured the way `commbench ipc reqres` measures: a client
//! process and a server process (this binary, started as a child) ping-pong
//! a payload of SIZE bytes COUNT times over iceoryx2's request/response
//! service; every round trip is timed, and the CPU of both processes
//! (getrusage) is divided by the round trips.
//!
//! `--wait poll` spins on `receive()` on both sides (iceoryx2's polling
//! mode, the counterpart of commbench's `--wait spin`); `--wait event`
//! sleeps in an iceoryx2 event listener and is woken by a notifier after
//! each request and each response (its blocking mode, the counterpart of
//! commbench's `block` / `adaptive`). Both sides write every payload byte
//! they send and read every byte they receive, as commbench copies each
//! payload into its ring and out of it.
//!
//! `--mode stream` sends COUNT samples one way over publish/subscribe
//! (loaned, zero-copy; the publisher blocks while the subscriber's buffer
//! is full, so nothing is lost), the subscriber reads every byte, and the
//! rate is the subscriber's, first sample to last.
//!
//! Prints one JSON line. Usage:
//!   iceoryx2-peer [--mode rr|stream] --wait poll|event --size 8|128|1024|65536
//!                 --count N [--warmup N] [--client-cpu C] [--server-cpu C]
//!
//! iceoryx2 keeps its state under /tmp/iceoryx2 and /dev/shm (iox2_*); a
//! normal exit removes what this run made, and a killed run's leftovers
//! are reclaimed by the next iceoryx2 node that starts (dead-node cleanup).

use core::mem::MaybeUninit;
use core::time::Duration;
use iceoryx2::prelude::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

type Error = Box<dyn std::error::Error>;

#[derive(Clone, Copy, PartialEq)]
enum Wait {
    Poll,
    Event,
}

struct Args {
    stream: bool,
    wait: Wait,
    size: usize,
    count: usize,
    warmup: usize,
    client_cpu: Option<usize>,
    server_cpu: Option<usize>,
    server: Option<String>,
}

const USAGE: &str = "usage: iceoryx2-peer [--mode rr|stream] --wait poll|event --size 8|128|1024|65536 --count N [--warmup N] [--client-cpu C] [--server-cpu C]";

fn parse() -> Result<Args, String> {
    let mut a = Args {
        stream: false,
        wait: Wait::Poll,
        size: 128,
        count: 100_000,
        warmup: 1000,
        client_cpu: None,
        server_cpu: None,
        server: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || {
            it.next()
                .ok_or_else(|| format!("{k} needs a value\n{USAGE}"))
        };
        let num = |s: String| {
            s.parse::<usize>()
                .map_err(|_| format!("{k}: '{s}' is not a number\n{USAGE}"))
        };
        match k.as_str() {
            "--wait" => {
                a.wait = match v()?.as_str() {
                    "poll" => Wait::Poll,
                    "event" => Wait::Event,
                    o => return Err(format!("--wait: '{o}' is neither poll nor event\n{USAGE}")),
                }
            }
            "--mode" => {
                a.stream = match v()?.as_str() {
                    "rr" => false,
                    "stream" => true,
                    o => return Err(format!("--mode: '{o}' is neither rr nor stream\n{USAGE}")),
                }
            }
            "--size" => a.size = num(v()?)?,
            "--count" => a.count = num(v()?)?,
            "--warmup" => a.warmup = num(v()?)?,
            "--client-cpu" => a.client_cpu = Some(num(v()?)?),
            "--server-cpu" => a.server_cpu = Some(num(v()?)?),
            "--server" => a.server = Some(v()?),
            "-h" | "--help" => return Err(USAGE.into()),
            o => return Err(format!("unknown argument '{o}'\n{USAGE}")),
        }
    }
    if a.count == 0 || a.count > 100_000_000 {
        return Err("--count must be 1..=100000000".into());
    }
    Ok(a)
}

fn pin(cpu: Option<usize>) {
    if let Some(c) = cpu {
        // SAFETY: a zeroed cpu_set_t with one bit set, passed with its size.
        unsafe {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            libc::CPU_SET(c, &mut set);
            libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

/// (user + sys CPU seconds, voluntary + involuntary context switches).
fn usage() -> (f64, u64) {
    // SAFETY: getrusage fills a zeroed rusage.
    let mut r: libc::rusage = unsafe { core::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    (
        t(r.ru_utime) + t(r.ru_stime),
        (r.ru_nvcsw + r.ru_nivcsw) as u64,
    )
}

/// Write every byte of a payload (the first byte is the command: 1 =
/// request, 2 = stop, 3 = the measured loop starts).
fn fill<const N: usize>(p: &mut MaybeUninit<[u8; N]>, cmd: u8, seq: u8) {
    let b = p.as_mut_ptr() as *mut u8;
    // SAFETY: b points to N writable bytes of the loaned sample.
    unsafe {
        core::ptr::write_bytes(b, seq, N);
        *b = cmd;
    }
}

/// Read every byte of a received payload the way commbench does: copy it
/// out of shared memory into the consumer's own buffer (a byte-wise sum
/// instead cost ~30 µs per 64 KiB, far more than the copy).
fn read_all<const N: usize>(p: &[u8; N], scratch: &mut [u8]) {
    scratch.copy_from_slice(p);
    core::hint::black_box(&scratch);
}

struct Names {
    rr: String,
    req_ev: String,
    resp_ev: String,
}

fn names(tag: &str) -> Names {
    Names {
        rr: format!("commbench/iceoryx2-peer/{tag}/rr"),
        req_ev: format!("commbench/iceoryx2-peer/{tag}/req"),
        resp_ev: format!("commbench/iceoryx2-peer/{tag}/resp"),
    }
}

fn server<const N: usize>(a: &Args, tag: &str) -> Result<(), Error> {
    pin(a.server_cpu);
    let n = names(tag);
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let svc = node
        .service_builder(&n.rr.as_str().try_into()?)
        .request_response::<[u8; N], [u8; N]>()
        .open_or_create()?;
    let srv = svc.server_builder().create()?;
    let req_ev = node
        .service_builder(&n.req_ev.as_str().try_into()?)
        .event()
        .open_or_create()?;
    let resp_ev = node
        .service_builder(&n.resp_ev.as_str().try_into()?)
        .event()
        .open_or_create()?;
    let listener = req_ev.listener_builder().create()?;
    let notifier = resp_ev.notifier_builder().create()?;
    println!("ready");
    let mut u0 = usage();
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut stop = false;
    let mut scratch = vec![0u8; N];
    while !stop {
        if a.wait == Wait::Event {
            listener.timed_wait_all(|_| {}, Duration::from_millis(100))?;
        }
        while let Some(req) = srv.receive()? {
            let cmd = req.payload()[0];
            let seq = req.payload()[N - 1];
            read_all(req.payload(), &mut scratch);
            let mut resp = req.loan_uninit()?;
            fill(resp.payload_mut(), cmd, seq);
            // SAFETY: fill wrote all N bytes.
            unsafe { resp.assume_init() }.send()?;
            if a.wait == Wait::Event {
                notifier.notify()?;
            }
            stop |= cmd == 2;
            if cmd == 3 {
                u0 = usage();
            }
        }
        if Instant::now() > deadline {
            return Err("server: no stop request within 600 s".into());
        }
    }
    let u1 = usage();
    println!("{} {}", u1.0 - u0.0, u1.1 - u0.1);
    Ok(())
}

fn client<const N: usize>(a: &Args) -> Result<(), Error> {
    let tag = format!("{}", std::process::id());
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(std::env::args().skip(1))
        .args(["--server", &tag])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut out = BufReader::new(child.stdout.take().ok_or("no child stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)?;
    if line.trim() != "ready" {
        return Err(format!("server did not start: '{}'", line.trim()).into());
    }
    pin(a.client_cpu);
    let n = names(&tag);
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let svc = node
        .service_builder(&n.rr.as_str().try_into()?)
        .request_response::<[u8; N], [u8; N]>()
        .open_or_create()?;
    let cl = svc.client_builder().create()?;
    let req_ev = node
        .service_builder(&n.req_ev.as_str().try_into()?)
        .event()
        .open_or_create()?;
    let resp_ev = node
        .service_builder(&n.resp_ev.as_str().try_into()?)
        .event()
        .open_or_create()?;
    let notifier = req_ev.notifier_builder().create()?;
    let listener = resp_ev.listener_builder().create()?;
    // One round trip; `patience` bounds the wait for the response.
    let mut scratch = vec![0u8; N];
    let mut round = |cmd: u8, seq: u8, patience: Duration| -> Result<bool, Error> {
        let mut req = cl.loan_uninit()?;
        fill(req.payload_mut(), cmd, seq);
        // SAFETY: fill wrote all N bytes.
        let pending = unsafe { req.assume_init() }.send()?;
        if a.wait == Wait::Event {
            notifier.notify()?;
        }
        let until = Instant::now() + patience;
        loop {
            if let Some(r) = pending.receive()? {
                read_all(r.payload(), &mut scratch);
                if r.payload()[N - 1] != seq {
                    return Err("response does not echo the request".into());
                }
                return Ok(true);
            }
            if Instant::now() > until {
                return Ok(false);
            }
            if a.wait == Wait::Event {
                listener.timed_wait_all(|_| {}, Duration::from_millis(10))?;
            }
        }
    };
    // Handshake: until the server's port answers (a request sent before
    // it is connected is not delivered).
    let t0 = Instant::now();
    while !round(1, 0, Duration::from_millis(20))? {
        if t0.elapsed() > Duration::from_secs(10) {
            return Err("the server never answered".into());
        }
    }
    let patience = Duration::from_secs(10);
    for i in 0..a.warmup {
        if !round(1, i as u8, patience)? {
            return Err("a warm-up response did not come within 10 s".into());
        }
    }
    let mut rt = Vec::with_capacity(a.count);
    // The server's CPU is counted from here too.
    round(3, 0, patience)?;
    let u0 = usage();
    let w0 = Instant::now();
    for i in 0..a.count {
        let t = Instant::now();
        if !round(1, i as u8, patience)? {
            return Err("a response did not come within 10 s".into());
        }
        rt.push(t.elapsed().as_nanos() as u64);
    }
    let wall = w0.elapsed().as_secs_f64();
    let u1 = usage();
    // Stop the server; it prints its CPU over the same span.
    round(2, 0, patience)?;
    line.clear();
    out.read_line(&mut line)?;
    let st = child.wait()?;
    if !st.success() {
        return Err(format!("server exited with {st}").into());
    }
    let mut f = line.split_whitespace();
    let s_cpu: f64 = f.next().ok_or("no server CPU")?.parse()?;
    let s_ctx: u64 = f.next().ok_or("no server ctx")?.parse()?;
    rt.sort_unstable();
    let q = |p: f64| rt[((rt.len() as f64 * p) as usize).min(rt.len() - 1)];
    let cpu = (u1.0 - u0.0) + s_cpu;
    let ctx = (u1.1 - u0.1) + s_ctx;
    println!(
        "{{\"peer\":\"iceoryx2\",\"version\":\"0.7\",\"mode\":\"rr\",\"wait\":\"{}\",\"size\":{},\"count\":{},\"p50_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"round_trips_per_s\":{:.0},\"cpu_ns_per_round_trip\":{:.1},\"ctx_per_round_trip\":{:.4}}}",
        if a.wait == Wait::Poll { "poll" } else { "event" },
        N,
        a.count,
        q(0.50),
        q(0.99),
        q(0.999),
        a.count as f64 / wall,
        cpu * 1e9 / a.count as f64,
        ctx as f64 / a.count as f64
    );
    Ok(())
}

fn run<const N: usize>(a: &Args) -> Result<(), Error> {
    match (&a.server, a.stream) {
        (Some(tag), false) => server::<N>(a, tag),
        (None, false) => client::<N>(a),
        (Some(tag), true) => subscriber::<N>(a, tag),
        (None, true) => publisher::<N>(a),
    }
}

fn stream_service<const N: usize>(
    node: &Node<ipc::Service>,
    tag: &str,
) -> Result<
    iceoryx2::service::port_factory::publish_subscribe::PortFactory<ipc::Service, [u8; N], ()>,
    Error,
> {
    let name = format!("commbench/iceoryx2-peer/{tag}/stream");
    Ok(node
        .service_builder(&name.as_str().try_into()?)
        .publish_subscribe::<[u8; N]>()
        .subscriber_max_buffer_size(64)
        .history_size(0)
        .enable_safe_overflow(false)
        .open_or_create()?)
}

fn subscriber<const N: usize>(a: &Args, tag: &str) -> Result<(), Error> {
    pin(a.server_cpu);
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let svc = stream_service::<N>(&node, tag)?;
    let sub = svc.subscriber_builder().create()?;
    println!("ready");
    let mut u0 = usage();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut n = 0u64;
    let mut sum = 0u64;
    let mut scratch = vec![0u8; N];
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        match sub.receive()? {
            Some(smp) => {
                let p: &[u8; N] = smp.payload();
                if p[0] == 2 {
                    break;
                }
                if first.is_none() {
                    first = Some(Instant::now());
                    u0 = usage();
                }
                // Read every byte, as a consumer of the data would.
                read_all(p, &mut scratch);
                sum = sum.wrapping_add(scratch[N - 1] as u64);
                n += 1;
                last = Instant::now();
            }
            None => {
                if Instant::now() > deadline {
                    return Err("subscriber: no end marker within 600 s".into());
                }
                core::hint::spin_loop();
            }
        }
    }
    let u1 = usage();
    let ns = first.map(|f| (last - f).as_nanos()).unwrap_or(0);
    println!(
        "{} {} {} {} {}",
        u1.0 - u0.0,
        u1.1 - u0.1,
        ns,
        n,
        core::hint::black_box(sum) & 1
    );
    Ok(())
}

fn publisher<const N: usize>(a: &Args) -> Result<(), Error> {
    let tag = format!("{}", std::process::id());
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(std::env::args().skip(1))
        .args(["--server", &tag])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut out = BufReader::new(child.stdout.take().ok_or("no child stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)?;
    if line.trim() != "ready" {
        return Err(format!("subscriber did not start: '{}'", line.trim()).into());
    }
    pin(a.client_cpu);
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let svc = stream_service::<N>(&node, &tag)?;
    let publ = svc
        .publisher_builder()
        .unable_to_deliver_strategy(UnableToDeliverStrategy::Block)
        .create()?;
    let t0 = Instant::now();
    while svc.dynamic_config().number_of_subscribers() == 0 {
        if t0.elapsed() > Duration::from_secs(10) {
            return Err("the subscriber never connected".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let u0 = usage();
    for i in 0..=a.count {
        let mut smp = loop {
            match publ.loan_uninit() {
                Ok(s) => break s,
                Err(_) => core::hint::spin_loop(),
            }
        };
        fill(smp.payload_mut(), if i == a.count { 2 } else { 1 }, i as u8);
        // SAFETY: fill wrote all N bytes.
        unsafe { smp.assume_init() }.send()?;
    }
    let u1 = usage();
    line.clear();
    out.read_line(&mut line)?;
    let st = child.wait()?;
    if !st.success() {
        return Err(format!("subscriber exited with {st}").into());
    }
    let f: Vec<f64> = line
        .split_whitespace()
        .map(|x| x.parse::<f64>())
        .collect::<Result<_, _>>()?;
    if f.len() < 4 || f[3] as usize != a.count {
        return Err(format!("subscriber received {:?} of {} samples", f.get(3), a.count).into());
    }
    let secs = f[2] / 1e9;
    println!(
        "{{\"peer\":\"iceoryx2\",\"version\":\"0.7\",\"mode\":\"stream\",\"size\":{},\"count\":{},\"msgs_per_s\":{:.0},\"gib_per_s\":{:.3},\"cpu_ns_per_msg\":{:.1},\"ctx_per_msg\":{:.4}}}",
        N,
        a.count,
        a.count as f64 / secs,
        a.count as f64 * N as f64 / secs / (1u64 << 30) as f64,
        ((u1.0 - u0.0) + f[0]) * 1e9 / a.count as f64,
        ((u1.1 - u0.1) as f64 + f[1]) / a.count as f64
    );
    Ok(())
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("iceoryx2-peer: {e}");
            std::process::exit(2);
        }
    };
    set_log_level(LogLevel::Error);
    let r = match a.size {
        8 => run::<8>(&a),
        128 => run::<128>(&a),
        1024 => run::<1024>(&a),
        65536 => run::<65536>(&a),
        s => {
            eprintln!("iceoryx2-peer: --size {s}: one of 8, 128, 1024, 65536\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = r {
        eprintln!("iceoryx2-peer: {e}");
        std::process::exit(1);
    }
}
