//! The load testers' command lines: `bots` (the relay) and `requests` (the
//! manager path), with the server's CPU and memory read from `/proc`.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use crate::runtime;

#[derive(Debug, Args)]
pub(crate) struct BotsArgs {
    /// The relay's native address.
    #[arg(long, default_value = "127.0.0.1:7200")]
    addr: SocketAddr,
    /// Another relay of the same service (repeatable; `relay --redis`):
    /// the bots connect to the relays in turn and follow their zones.
    #[arg(long)]
    also: Vec<SocketAddr>,
    /// Connect to the relay's WebSocket port at this address instead
    /// (`relay --ws-port`): the same load over WebSocket.
    #[arg(long)]
    ws_addr: Option<SocketAddr>,
    /// Connect to the relay's QUIC port at this address instead (`relay
    /// --quic-port`): the bots ask for datagrams, so their transforms and
    /// what they hear travel as QUIC datagrams.
    #[arg(long)]
    quic_addr: Option<SocketAddr>,
    /// Bots.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Transforms per second per bot (0: idle connections, to measure memory).
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// Bots per zone.
    #[arg(long, default_value_t = 20)]
    zone_size: usize,
    /// Send in bursts: a zone's bots within about a fifth of the interval
    /// of each other (by default each bot sends at its own point of the
    /// interval, as independent players do)
    #[arg(long)]
    clustered: bool,
    /// Seconds of sending.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// The relay's process id, to report its CPU and memory (same
    /// machine; repeatable: several relays are summed).
    #[arg(long)]
    server_pid: Vec<u32>,
    /// Threads running the bots. On a machine shared with the relay, one
    /// leaves the relay more of the cores (1,000 bots at 20 Hz use about
    /// three quarters of one; `docs/PERFORMANCE.md`).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tls: crate::tls_cli::ClientTlsArgs,
    /// The moving mode, against a relay with interest by distance (`relay
    /// --view-radius R`, given here too): the bots walk one world and
    /// check what they hear against where the others are (violations in
    /// the report).
    #[arg(long)]
    walk: bool,
    /// With `--walk`: the relay's view radius.
    #[arg(long, default_value_t = 50.0)]
    view_radius: f32,
    /// With `--walk`: the relay's leave radius (default 1.2 times the view
    /// radius, as the relay's).
    #[arg(long)]
    leave_radius: Option<f32>,
    /// With `--walk`: the world's side (bots walk circles of 5 to 50 units
    /// round points spread over it).
    #[arg(long, default_value_t = 600.0)]
    world: f32,
    /// With `--walk`: walking speed, units a second.
    #[arg(long, default_value_t = 3.0)]
    speed: f32,
    /// Ask the relay for batches: what one write carries to a bot, in one
    /// frame (with the relay's `--tick-hz`, one frame a tick).
    #[arg(long)]
    batch: bool,
    /// Ask the relay for compact transforms (quantized, as differences,
    /// senders as small numbers; implies batches). With `--quic-addr`, as
    /// compact view datagrams, each against what the bot acknowledged.
    #[arg(long)]
    compact: bool,
    /// Every how many transforms carry the load tester's stamp (sequence
    /// number and send time); the others carry none.
    #[arg(long, default_value_t = 1)]
    stamp_every: u32,
}

#[derive(Debug, Args)]
pub(crate) struct RequestsArgs {
    /// The board server's address (`switchboard-server --port P`).
    #[arg(long, default_value = "127.0.0.1:7000")]
    addr: SocketAddr,
    /// Connect to the server's QUIC port at this address instead
    /// (`--quic-port`): the requests travel on the QUIC connection's stream.
    #[arg(long)]
    quic_addr: Option<SocketAddr>,
    /// Clients.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Requests per second per client; each accepted one goes to every client.
    #[arg(long, default_value_t = 2.0)]
    rate: f64,
    /// Seconds of sending.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// The server's process id, to report its CPU (same machine).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tls: crate::tls_cli::ClientTlsArgs,
}

/// Raises the open-file limit to its hard maximum; returns the limit in force.
pub(crate) fn raise_file_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
        limit.rlim_cur
    }
}

/// CPU seconds (user + system) and resident KiB of a process.
fn process_usage(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((ticks / hz.max(1.0), rss))
}

pub(crate) fn run_bots(args: BotsArgs) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    let limit = raise_file_limit();
    let mut count = args.count;
    if count as u64 + 64 > limit {
        count = limit.saturating_sub(64) as usize;
        eprintln!("the open-file limit ({limit}) caps this test at {count} bots");
    }
    let runtime = crate::runtime_with(args.threads)?;
    let config = switchboard_load::LoadConfig {
        addr: args.addr,
        also: args.also.clone(),
        websocket: args.ws_addr,
        quic: args.quic_addr,
        bots: count,
        rate: args.rate,
        zone_size: args.zone_size,
        duration: Duration::from_secs_f64(args.seconds),
        phases: if args.clustered {
            switchboard_load::Phases::Clustered
        } else {
            switchboard_load::Phases::Spread
        },
        walk: args.walk.then(|| {
            let mut walk = switchboard_load::Walk::new(args.world, args.speed, args.view_radius);
            if let Some(leave) = args.leave_radius {
                walk.leave_radius = leave;
            }
            walk
        }),
        options: switchboard_relay::RelayOptions {
            batch: args.batch,
            compact: args.compact,
            datagrams: false,
            webtransport_redirects: false,
            compact_datagrams: false,
        },
        stamp_every: args.stamp_every,
        tls: args.tls.client_for(args.addr.ip()),
    };
    let total = args.seconds;
    // CPU is measured over the sending window only (not connecting, not
    // the drain at the end): one sample a second after sending starts, the
    // last one before it ends.
    let servers = || usage_of_all(&args.server_pid);
    let sample = || {
        let server = servers();
        let own = process_usage(std::process::id());
        (std::time::Instant::now(), server, own)
    };
    let mut first = None;
    let mut last = None;
    let rss_before = servers().map(|(_, rss)| rss);
    let report = runtime.block_on(switchboard_load::run(config, |elapsed, sent, received| {
        let done = (elapsed.as_secs_f64() / total).clamp(0.0, 1.0);
        let bar: String = (0..30)
            .map(|i| if (i as f64) < done * 30.0 { '#' } else { '.' })
            .collect();
        eprint!(
            "\r[{bar}] {:>5.1}s sent {sent} received {received}   ",
            elapsed.as_secs_f64()
        );
        if elapsed.as_secs_f64() >= 0.5 && elapsed.as_secs_f64() <= total {
            if first.is_none() {
                first = Some(sample());
            } else {
                last = Some(sample());
            }
        }
    }));
    eprintln!();
    let percent = |cpu0: f64, cpu1: f64, wall: f64| 100.0 * (cpu1 - cpu0) / wall.max(1e-9);
    let (mut server, mut bots_cpu) = (None, None);
    if let (Some((t0, server0, own0)), Some((t1, server1, own1))) = (first, last) {
        let wall = t1.duration_since(t0).as_secs_f64();
        if let (Some((cpu0, _)), Some((cpu1, rss))) = (server0, server1) {
            server = Some((percent(cpu0, cpu1, wall), rss));
        }
        if let (Some((cpu0, _)), Some((cpu1, _))) = (own0, own1) {
            bots_cpu = Some(percent(cpu0, cpu1, wall));
        }
    }
    // What the relay's resident memory grew by, per connected bot.
    let per_connection = match (rss_before, server) {
        (Some(before), Some((_, after))) if report.bots_connected > 0 => {
            Some(after.saturating_sub(before) as f64 * 1024.0 / report.bots_connected as f64)
        }
        _ => None,
    };
    if args.json {
        let mut value = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        if let Some(bytes) = per_connection {
            value["server_bytes_per_connection"] = bytes.into();
        }
        if let Some((cpu, rss)) = server {
            value["server_cpu_percent"] = cpu.into();
            value["server_rss_kib"] = rss.into();
        }
        if let Some(cpu) = bots_cpu {
            value["bots_cpu_percent"] = cpu.into();
        }
        println!("{value}");
    } else {
        println!("bots connected     {} of {count}", report.bots_connected);
        println!(
            "sent               {} ({:.0}/s)",
            report.sent, report.sent_per_second
        );
        println!(
            "received           {} ({:.0}/s, {:.0} bytes/s, {:.1} bytes on the wire each)",
            report.received,
            report.received_per_second,
            report.bytes_per_second,
            report.wire_bytes_per_delivery
        );
        println!(
            "relay latency ms   p50 {:.2}  p95 {:.2}  p99 {:.2}  max {:.2}",
            report.latency_ms_p50,
            report.latency_ms_p95,
            report.latency_ms_p99,
            report.latency_ms_max
        );
        println!(
            "lost {}  disconnects {}  errors {}  handovers {}",
            report.lost, report.disconnects, report.errors, report.handovers
        );
        if report.before_joining > 0 {
            println!(
                "before joining     {} (sent before the receiver was in the zone)",
                report.before_joining
            );
        }
        if report.datagrams_received > 0 {
            println!("QUIC datagrams     {} received", report.datagrams_received);
        }
        if args.walk {
            println!(
                "walking checks     {} neighbours checked, {} not heard, {} heard from too far",
                report.neighbour_checks, report.unheard_neighbours, report.heard_too_far
            );
        }
        if let Some((cpu, rss)) = server {
            // Idle connections (`--rate 0`) deliver nothing: no cost per delivery.
            let per_delivery = match report.received {
                0 => String::new(),
                _ => format!(
                    ", {:.2} us per delivery",
                    1e4 * cpu / report.received_per_second
                ),
            };
            println!("server             {cpu:.0}% CPU, {rss} KiB resident{per_delivery}");
        }
        if let (Some(before), Some(bytes)) = (rss_before, per_connection) {
            println!(
                "server memory      {before} KiB before the bots, {bytes:.0} bytes per connection"
            );
        }
        if let Some(cpu) = bots_cpu {
            println!("bots (this process) {cpu:.0}% CPU");
        }
    }
    if report.bots_connected == 0 {
        return Err(format!(
            "no bot connected to {}: is a relay there?",
            args.addr
        ));
    }
    Ok(())
}

/// CPU seconds and resident KiB of these processes together; `None` if
/// there are none or one cannot be read.
fn usage_of_all(pids: &[u32]) -> Option<(f64, u64)> {
    if pids.is_empty() {
        return None;
    }
    pids.iter().try_fold((0.0, 0), |(cpu, rss), pid| {
        let (c, r) = process_usage(*pid)?;
        Some((cpu + c, rss + r))
    })
}

/// `requests`: the manager path under load, and the server's CPU per delivery.
pub(crate) fn run_requests(args: RequestsArgs) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    let limit = raise_file_limit();
    let count = args.count.min(limit.saturating_sub(64) as usize);
    let runtime = runtime()?;
    let load = switchboard_server::requests::RequestLoad {
        addr: args.addr,
        quic: args.quic_addr,
        clients: count,
        rate: args.rate,
        duration: Duration::from_secs_f64(args.seconds),
        tls: args.tls.client_for(args.addr.ip()),
    };
    let before = args.server_pid.and_then(process_usage);
    let own_before = process_usage(std::process::id());
    let report = runtime.block_on(switchboard_server::requests::run(load));
    let after = args.server_pid.and_then(process_usage);
    let own_after = process_usage(std::process::id());
    // CPU over the whole run (joining and the drain included: little).
    let server = match (before, after) {
        (Some((cpu0, _)), Some((cpu1, rss))) => Some((cpu1 - cpu0, rss)),
        _ => None,
    };
    let clients_cpu = match (own_before, own_after) {
        (Some((cpu0, _)), Some((cpu1, _))) => Some(100.0 * (cpu1 - cpu0) / report.seconds),
        _ => None,
    };
    let us_per_delivery = |cpu: f64| 1e6 * cpu / report.deliveries.max(1) as f64;
    if args.json {
        let mut value = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        value["clients"] = count.into();
        if let Some((cpu, rss)) = server {
            value["server_cpu_percent"] = (100.0 * cpu / report.seconds).into();
            value["server_rss_kib"] = rss.into();
            value["server_us_per_delivery"] = us_per_delivery(cpu).into();
        }
        if let Some(cpu) = clients_cpu {
            value["clients_cpu_percent"] = cpu.into();
        }
        println!("{value}");
    } else {
        println!("clients welcomed   {} of {count}", report.welcomed);
        println!(
            "requests           {} sent, {} accepted ({:.0}/s), {} refused",
            report.sent, report.accepted, report.accepted_per_second, report.refused
        );
        println!(
            "deliveries         {} ({:.0}/s)",
            report.deliveries, report.deliveries_per_second
        );
        println!(
            "request → accepted p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
            report.latency_ms_p50, report.latency_ms_p99, report.latency_ms_max
        );
        println!("disconnects        {}", report.disconnects);
        if let Some((cpu, rss)) = server {
            println!(
                "server             {:.0}% CPU over the sending time, {rss} KiB resident, {:.2} us per delivery",
                100.0 * cpu / report.seconds,
                us_per_delivery(cpu)
            );
        }
        if let Some(cpu) = clients_cpu {
            println!("clients (this process) {cpu:.0}% CPU");
        }
    }
    if report.welcomed == 0 {
        return Err(format!(
            "no client was welcomed by {}: is a board server there?",
            args.addr
        ));
    }
    Ok(())
}
