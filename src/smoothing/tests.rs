//! The interpolation measured through the simulated network (the tests
//! named `interpolation_...` print their figures with `--nocapture`; they
//! are in `docs/SMOOTHING.md`), and the parts on their own.

use std::time::Duration;

use super::*;
use switchboard_proto::harness::netsim::{Link, NetSimConfig};

/// Where the sender truly is at server time `ms`: a circle of radius 10,
/// one radian a second (10 units a second).
fn truth(ms: f64) -> [f32; 3] {
    let a = ms / 1000.0;
    [(10.0 * a.cos()) as f32, 0.0, (10.0 * a.sin()) as f32]
}

fn distance(a: [f32; 3], b: [f32; 3]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// What one run saw, after its first two seconds.
#[derive(Debug, Default)]
struct Figures {
    frames: u64,
    interpolated: u64,
    mean_error: f32,
    worst_error: f32,
    /// The largest move from one frame to the next (the path itself moves
    /// 0.17 a frame at 60 Hz).
    worst_step: f32,
    mean_delay_ms: f64,
    /// Drawing each snapshot as it arrives: the largest move between
    /// frames, and the frames where nothing moved.
    raw_worst_step: f32,
    raw_still: u64,
}

/// The sender at `send_hz` through `net`, drawn at 60 Hz for `seconds`.
fn run(net: NetSimConfig, send_hz: f64, seconds: u64) -> Figures {
    let mut link: Link<(f64, [f32; 3])> = Link::new(net);
    let mut buffer = SnapshotBuffer::new(SmoothingConfig::default());
    let mut figures = Figures::default();
    let send_every = 1000.0 / send_hz;
    let (mut next_send, mut raw, mut last, mut last_raw) = (0.0, None, None, None);
    let (mut error_sum, mut delay_sum) = (0.0f64, 0.0f64);
    let frames = seconds * 60;
    for frame in 0..frames {
        let now_ms = frame as f64 * 1000.0 / 60.0;
        while next_send <= now_ms {
            let at = Duration::from_secs_f64(next_send / 1000.0);
            link.send(at, (next_send, truth(next_send)), 40);
            next_send += send_every;
        }
        let now = Duration::from_secs_f64(now_ms / 1000.0);
        while let Some((server_ms, position)) = link.poll(now) {
            buffer.push(server_ms, now, position);
            raw = Some(position);
        }
        let Some(sample) = buffer.sample(now) else {
            continue;
        };
        if now_ms < 2000.0 {
            last = Some(sample.value);
            last_raw = raw;
            continue;
        }
        figures.frames += 1;
        if sample.kind == SampleKind::Interpolated {
            figures.interpolated += 1;
        }
        let error = distance(sample.value, truth(sample.server_ms));
        error_sum += f64::from(error);
        figures.worst_error = figures.worst_error.max(error);
        delay_sum += sample.delay_ms;
        if let Some(before) = last {
            figures.worst_step = figures.worst_step.max(distance(before, sample.value));
        }
        last = Some(sample.value);
        if let (Some(before), Some(now_raw)) = (last_raw, raw) {
            let step = distance(before, now_raw);
            figures.raw_worst_step = figures.raw_worst_step.max(step);
            figures.raw_still += (step == 0.0) as u64;
        }
        last_raw = raw;
    }
    figures.mean_error = (error_sum / figures.frames as f64) as f32;
    figures.mean_delay_ms = delay_sum / figures.frames as f64;
    figures
}

/// A jump: more than three frames' worth of the path's own motion.
const JUMP: f32 = 0.5;

#[test]
fn interpolation_through_150_ms_rtt_20_ms_jitter_and_stalls_is_smooth() {
    let figures = run(NetSimConfig::default(), 20.0, 60);
    let share = figures.interpolated as f64 / figures.frames as f64;
    println!(
        "interpolation, 20 Hz through 75 ms one way, 20 ms jitter, a 200 ms stall every 3 s, drawn at 60 Hz for 58 s: \
         {:.2} % of {} frames interpolated; position error mean {:.3}, worst {:.3}; worst frame-to-frame step {:.3} \
         (the path: 0.167); added delay {:.0} ms; drawing arrivals raw: worst step {:.3}, {} of the frames still",
        share * 100.0,
        figures.frames,
        figures.mean_error,
        figures.worst_error,
        figures.worst_step,
        figures.mean_delay_ms,
        figures.raw_worst_step,
        figures.raw_still,
    );
    assert!(share >= 0.99, "{figures:?}");
    assert!(figures.worst_step < JUMP, "a jump: {figures:?}");
    assert!(figures.worst_error < 0.05, "off the path: {figures:?}");
    // The same run drawn raw jumps after every stall: what this is for.
    assert!(figures.raw_worst_step > JUMP, "{figures:?}");
}

#[test]
fn interpolation_on_a_clean_network_adds_about_two_send_intervals() {
    let clean = NetSimConfig {
        jitter: Duration::ZERO,
        stall_every: Duration::ZERO,
        ..NetSimConfig::default()
    };
    let figures = run(clean, 20.0, 20);
    println!(
        "interpolation, clean network: {} of {} frames interpolated, added delay {:.0} ms",
        figures.interpolated, figures.frames, figures.mean_delay_ms
    );
    assert_eq!(figures.interpolated, figures.frames);
    assert!(
        (95.0..=110.0).contains(&figures.mean_delay_ms),
        "{figures:?}"
    );
}

#[test]
fn when_snapshots_stop_it_extrapolates_for_a_bounded_time_then_holds() {
    let mut buffer = SnapshotBuffer::new(SmoothingConfig::default());
    let at = |ms: u64| Duration::from_millis(ms);
    for i in 0..10u64 {
        buffer.push(i as f64 * 50.0, at(i * 50 + 75), [i as f32, 0.0, 0.0]);
    }
    let mut kinds = Vec::new();
    for ms in (475..2000).step_by(50) {
        kinds.push(buffer.sample(at(ms)).unwrap().kind);
    }
    let first_hold = kinds.iter().position(|k| *k == SampleKind::Held).unwrap();
    assert!(kinds[..first_hold].contains(&SampleKind::Extrapolated));
    assert!(
        kinds[first_hold..].iter().all(|k| *k == SampleKind::Held),
        "{kinds:?}"
    );
    // Held at the last snapshot, not beyond.
    assert_eq!(buffer.sample(at(3000)).unwrap().value, [9.0, 0.0, 0.0]);
}

#[test]
fn late_and_duplicate_snapshots_change_nothing() {
    let mut clean = SnapshotBuffer::new(SmoothingConfig::default());
    clean.push(100.0, Duration::from_millis(200), 1.0f32);
    clean.push(150.0, Duration::from_millis(250), 2.0);
    let mut noisy = clean.clone();
    noisy.push(120.0, Duration::from_millis(260), 99.0);
    noisy.push(150.0, Duration::from_millis(261), 99.0);
    for ms in [260, 300, 400] {
        let at = Duration::from_millis(ms);
        assert_eq!(noisy.sample(at), clean.sample(at));
    }
}

#[test]
fn a_drift_past_the_limit_jumps_once_and_smaller_ones_are_caught_up() {
    let mut buffer = SnapshotBuffer::new(SmoothingConfig::default());
    for i in 0..40u64 {
        buffer.push(
            i as f64 * 50.0,
            Duration::from_millis(i * 50 + 75),
            i as f32,
        );
        buffer.sample(Duration::from_millis(i * 50 + 80));
    }
    assert_eq!(buffer.stats().snaps, 0);
    // The server's clock leaps 5 s ahead (a new server took over).
    for i in 40..80u64 {
        buffer.push(
            5000.0 + i as f64 * 50.0,
            Duration::from_millis(i * 50 + 75),
            i as f32,
        );
        buffer.sample(Duration::from_millis(i * 50 + 80));
    }
    assert_eq!(buffer.stats().snaps, 1);
}

#[test]
fn angles_take_the_short_way_round() {
    let half = Degrees(350.0).lerp(&Degrees(10.0), 0.5).0;
    assert!(half.abs() < 1e-3 || (half - 360.0).abs() < 1e-3, "{half}");
    assert!((Degrees(10.0).lerp(&Degrees(350.0), 0.25).0 - 5.0).abs() < 1e-3);
    let pose = Pose {
        position: [0.0; 3],
        rotation: [170.0, 0.0, 0.0],
    };
    let turned = Pose {
        position: [2.0, 0.0, 0.0],
        rotation: [-170.0, 0.0, 0.0],
    };
    let mid = pose.lerp(&turned, 0.5);
    assert_eq!(mid.position, [1.0, 0.0, 0.0]);
    assert!((mid.rotation[0] - 180.0).abs() < 1e-3, "{mid:?}");
}

#[test]
fn the_simulated_link_keeps_order_repeats_with_its_seed_and_stalls() {
    let arrivals = |seed| {
        let mut link = Link::new(NetSimConfig {
            seed,
            ..NetSimConfig::default()
        });
        for i in 0..400u64 {
            link.send(Duration::from_millis(i * 10), i, 10);
        }
        let mut got = Vec::new();
        for ms in 0..5000u64 {
            while let Some(i) = link.poll(Duration::from_millis(ms)) {
                got.push((ms, i));
            }
        }
        got
    };
    let one = arrivals(7);
    assert_eq!(one, arrivals(7), "the same seed, the same run");
    assert_ne!(one, arrivals(8));
    assert!(one.windows(2).all(|w| w[0].1 < w[1].1), "in order");
    // Nothing arrives inside a stall (3000..3200 ms); a burst at its end.
    assert!(!one.iter().any(|(ms, _)| (3000..3200).contains(ms)));
    assert!(one.iter().filter(|(ms, _)| *ms == 3200).count() > 5);
    // A cap of 1,000 bytes a second: 10-byte items leave 10 ms apart.
    let mut capped = Link::new(NetSimConfig {
        bandwidth: 1000,
        jitter: Duration::ZERO,
        stall_every: Duration::ZERO,
        ..NetSimConfig::default()
    });
    for i in 0..3u64 {
        capped.send(Duration::ZERO, i, 10);
    }
    assert_eq!(capped.next_arrival(), Some(Duration::from_millis(85)));
}

/// A player walks at 10 units a second (an input a frame at 60 Hz) into a
/// wall at x = 5 that only the server knows of, through 75 ms each way
/// (inputs up, states down at 20 Hz); then stops. Returns the largest move
/// of the drawn position from one frame to the next, and where it ended
/// against where the server has it.
fn predicted_walk_into_a_wall(correction: Duration) -> (f32, [f32; 3], [f32; 3]) {
    let client_step = |s: &[f32; 3], i: &[f32; 3]| [s[0] + i[0], s[1] + i[1], s[2] + i[2]];
    let server_step =
        |s: &[f32; 3], i: &[f32; 3]| [(s[0] + i[0]).min(5.0), s[1] + i[1], s[2] + i[2]];
    let net = NetSimConfig {
        jitter: Duration::ZERO,
        stall_every: Duration::ZERO,
        ..NetSimConfig::default()
    };
    let mut up: Link<(u32, [f32; 3])> = Link::new(net.clone());
    let mut down: Link<Acked<[f32; 3]>> = Link::new(net);
    let mut player = Predictor::new([0.0f32; 3], correction, 256);
    let (mut server, mut server_last) = ([0.0f32; 3], 0u32);
    let mut drawn = player.drawn();
    let mut worst = 0.0f32;
    let frame = Duration::from_secs_f64(1.0 / 60.0);
    for n in 0..240u32 {
        let now = frame * n;
        // Walking for the first two seconds, then standing.
        if n < 120 {
            let input = [10.0 / 60.0, 0.0, 0.0];
            let number = player.input(input, client_step);
            up.send(now, (number, input), 16);
        }
        while let Some((number, input)) = up.poll(now) {
            server = server_step(&server, &input);
            server_last = number;
        }
        if n % 3 == 0 {
            let acked = Acked {
                state: server,
                last_input: server_last,
            };
            down.send(now, acked, 20);
        }
        while let Some(acked) = down.poll(now) {
            player.reconcile(acked, client_step);
        }
        player.advance(frame);
        let next = player.drawn();
        worst = worst.max(distance(drawn, next));
        drawn = next;
    }
    (worst, drawn, server)
}

#[test]
fn prediction_corrected_by_the_server_converges_without_a_jump() {
    let (blended, end, server) = predicted_walk_into_a_wall(Duration::from_millis(100));
    let (raw, _, _) = predicted_walk_into_a_wall(Duration::ZERO);
    println!(
        "prediction into a wall only the server knows, 75 ms each way: largest frame-to-frame move \
         {blended:.3} blended over 100 ms, {raw:.3} snapped (walking: 0.167 a frame)"
    );
    // Blended, nothing moves faster than walking does (0.167 a frame);
    // snapped, every correction moves three frames' worth in one (the
    // server undoes the three inputs it saw since its last state).
    assert!(blended < 0.2, "blended: {blended}");
    assert!(raw > 0.45, "snapped: {raw}");
    assert!(
        distance(end, server) < 1e-4,
        "converged: {end:?} against {server:?}"
    );
    assert_eq!(server[0], 5.0);
}

#[test]
fn prediction_moves_at_once_and_replays_what_the_server_has_not_seen() {
    let step = |s: &f32, i: &f32| s + i;
    let mut player = Predictor::new(0.0f32, Duration::ZERO, 16);
    let first = player.input(1.0, step);
    player.input(2.0, step);
    player.input(3.0, step);
    assert_eq!(*player.predicted(), 6.0, "no round trip before it moves");
    // The server saw the first input only, and disagrees with it.
    player.reconcile(
        Acked {
            state: 0.5,
            last_input: first,
        },
        step,
    );
    assert_eq!(
        *player.predicted(),
        5.5,
        "0.5, then the two it has not seen"
    );
    assert_eq!(player.unacknowledged(), 2);
    assert_eq!(player.corrections(), 1);
}
