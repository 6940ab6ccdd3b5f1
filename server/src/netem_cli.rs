//! `switchboard-server netem`: a real network for any command
//! (`docs/NETEM.md`): two network namespaces joined by an emulated link
//! (delay, jitter, loss, bursts, duplication, bandwidth, outages), the
//! command in the server's, and clients run in the client's with
//! `netem exec`. Linux, as root.

use std::time::Duration;

use clap::{Args, Subcommand};
use switchboard_netem::{profile, GilbertElliott, Link, LinkConfig, PROFILES, SERVER_ADDR};

use crate::runtime;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct NetemArgs {
    #[command(subcommand)]
    exec: Option<NetemCommand>,
    #[command(flatten)]
    link: LinkArgs,
    /// The command to run in the server namespace (after `--`).
    #[arg(last = true)]
    command: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum NetemCommand {
    /// Run a command in the client namespace of a running link.
    Exec {
        /// Which link (its name as `netem` printed it); default: the only
        /// one running.
        #[arg(long)]
        link: Option<String>,
        /// The command (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

/// The link, the same both ways; a profile first, then the options given.
#[derive(Debug, Args)]
struct LinkArgs {
    /// A named link: home, wifi, mobile, transatlantic.
    #[arg(long)]
    profile: Option<String>,
    /// One-way delay, each way.
    #[arg(long)]
    delay_ms: Option<u64>,
    /// Up to this much more delay per packet.
    #[arg(long)]
    jitter_ms: Option<u64>,
    /// Let jitter reorder packets.
    #[arg(long)]
    reorder: bool,
    /// Random loss, percent.
    #[arg(long)]
    loss: Option<f64>,
    /// Bursty loss (Gilbert-Elliott): chance in percent a packet starts a
    /// bad stretch...
    #[arg(long)]
    burst_enter: Option<f64>,
    /// ...chance in percent it ends one (default 30)...
    #[arg(long, default_value_t = 30.0)]
    burst_leave: f64,
    /// ...and the loss inside it, percent (default 50).
    #[arg(long, default_value_t = 50.0)]
    burst_loss: f64,
    /// Duplicated packets, percent.
    #[arg(long)]
    duplicate: Option<f64>,
    /// Bandwidth, kilobits a second.
    #[arg(long)]
    bandwidth_kbit: Option<u64>,
    /// Packets waiting for the bandwidth at most.
    #[arg(long)]
    queue: Option<usize>,
    /// The link down: `START_S:SECONDS` from the start (repeat for several).
    #[arg(long = "outage", value_parser = parse_outage)]
    outages: Vec<(Duration, Duration)>,
    /// The seed of every random choice.
    #[arg(long)]
    seed: Option<u64>,
}

fn parse_outage(text: &str) -> Result<(Duration, Duration), String> {
    let (start, long) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: START_S:SECONDS, e.g. 10:12"))?;
    let secs = |s: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("{s:?} is not a number of seconds"))
    };
    Ok((secs(start)?, secs(long)?))
}

fn percent(p: f64) -> Result<f64, String> {
    if (0.0..=100.0).contains(&p) {
        Ok(p / 100.0)
    } else {
        Err(format!("{p} is not a percentage"))
    }
}

impl LinkArgs {
    fn config(&self) -> Result<LinkConfig, String> {
        let mut config = match &self.profile {
            Some(name) => profile(name).ok_or_else(|| {
                let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
                format!("no profile {name:?}; there are {}", names.join(", "))
            })?,
            None => LinkConfig::default(),
        };
        let ms = Duration::from_millis;
        if let Some(d) = self.delay_ms {
            config.delay = ms(d);
        }
        if let Some(j) = self.jitter_ms {
            config.jitter = ms(j);
        }
        config.reorder |= self.reorder;
        if let Some(loss) = self.loss {
            config.loss = percent(loss)?;
        }
        if let Some(enter) = self.burst_enter {
            config.bursts = Some(GilbertElliott {
                p_enter_bad: percent(enter)?,
                p_leave_bad: percent(self.burst_leave)?,
                loss_good: 0.0,
                loss_bad: percent(self.burst_loss)?,
            });
        }
        if let Some(d) = self.duplicate {
            config.duplicate = percent(d)?;
        }
        if let Some(kbit) = self.bandwidth_kbit {
            config.bandwidth = Some(kbit * 1000 / 8);
        }
        if let Some(queue) = self.queue {
            config.queue_packets = queue;
        }
        config.outages.extend(self.outages.iter().copied());
        if let Some(seed) = self.seed {
            config.seed = seed;
        }
        Ok(config)
    }
}

pub(crate) fn run_netem(args: NetemArgs) -> Result<(), String> {
    if let Some(NetemCommand::Exec { link, command }) = args.exec {
        return exec(link, &command);
    }
    if args.command.is_empty() {
        return Err("netem: give the command to run in the server namespace after `--`".into());
    }
    let config = args.link.config()?;
    let link = Link::start(config.clone(), config.clone()).map_err(|e| e.to_string())?;
    let name = link.server_ns().trim_end_matches("-s").to_string();
    eprintln!(
        "netem: link {name}: {} ms each way, {} ms jitter, {:.2} % loss{}; the server side is {SERVER_ADDR} ({}); clients: switchboard-server netem exec --link {name} -- COMMAND",
        config.delay.as_millis(),
        config.jitter.as_millis(),
        config.loss * 100.0,
        if config.bursts.is_some() { " plus bursts" } else { "" },
        link.server_ns(),
    );
    let mut child = link
        .server_command(&args.command[0])
        .args(&args.command[1..])
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", args.command[0]))?;
    let pid = child.id();
    // Ctrl-C or SIGTERM stops the command, then the link goes.
    let watcher = std::thread::spawn(move || {
        if let Ok(runtime) = runtime() {
            runtime.block_on(switchboard::process::wait_for_signal());
            // SAFETY: a signal to our own child's process.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
    });
    let status = child.wait().map_err(|e| e.to_string())?;
    drop(watcher);
    let (up, down) = link.stats();
    eprintln!("netem: client → server {up:?}; server → client {down:?}");
    drop(link);
    if status.success() {
        Ok(())
    } else {
        Err(format!("the command ended with {status}"))
    }
}

/// Runs `command` in the client namespace of the link `name` (or the only
/// one running).
fn exec(name: Option<String>, command: &[String]) -> Result<(), String> {
    let name = match name {
        Some(name) => name,
        None => {
            let out = std::process::Command::new("ip")
                .args(["netns", "list"])
                .output()
                .map_err(|e| format!("cannot run ip: {e}"))?;
            let listed = String::from_utf8_lossy(&out.stdout);
            let links: Vec<String> = listed
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter_map(|n| n.strip_suffix("-c"))
                .filter(|n| n.starts_with("swnet-"))
                .map(str::to_string)
                .collect();
            match links.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(
                        "netem exec: no link is running (start one with `netem -- COMMAND`)".into(),
                    )
                }
                many => {
                    return Err(format!(
                        "netem exec: several links run ({}): say which with --link",
                        many.join(", ")
                    ))
                }
            }
        }
    };
    let status = std::process::Command::new("ip")
        .args(["netns", "exec", &format!("{name}-c")])
        .args(command)
        .status()
        .map_err(|e| format!("cannot run {:?}: {e}", command[0]))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the command ended with {status}"))
    }
}
