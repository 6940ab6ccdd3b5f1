use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use switchboard_hosting::{map_port, MapStatus, Method, PortLease, PortMapConfig, Protocol};

use crate::fake_nat::{self, FakeNatGateway, Speaks};
use crate::fake_upnp::{self, FakeIgd};

const TIMEOUT: Duration = Duration::from_millis(500);

/// Every method, PCP and NAT-PMP asking `gateway`, UPnP searching at `search`.
fn config(gateway: IpAddr, search: SocketAddr) -> PortMapConfig {
    PortMapConfig {
        gateway: Some(gateway),
        upnp_search: search,
        timeout: TIMEOUT,
        description: "switchboard test".into(),
        ..PortMapConfig::default()
    }
}

/// A UDP address that reads searches and answers none (no UPnP here).
async fn silent_search() -> (tokio::net::UdpSocket, SocketAddr) {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    (socket, addr)
}

/// A gateway address where nothing listens: PCP and NAT-PMP are refused at once.
fn no_gateway() -> IpAddr {
    fake_nat::fresh_ip().into()
}

#[tokio::test]
async fn pcp_maps_the_port_and_learns_the_external_address() {
    let gateway = FakeNatGateway::start(fake_nat::Behaviour::default()).await;
    let (_silent, search) = silent_search().await;
    let mapping = map_port(&config(gateway.ip, search), 7100).await.unwrap();
    assert_eq!(mapping.method(), Method::Pcp);
    assert_eq!(mapping.external(), "203.0.113.7:7100".parse().unwrap());
    assert_eq!(mapping.lease(), Duration::from_secs(3600));
    assert_eq!(
        mapping.describe(),
        "reachable at 203.0.113.7:7100 through PCP"
    );
    let asked = fake_nat::Seen::PcpMap {
        internal_port: 7100,
        lifetime: 3600,
    };
    assert_eq!(gateway.seen(), vec![asked]);
    mapping.remove(TIMEOUT).await.unwrap();
    let removed = fake_nat::Seen::PcpMap {
        internal_port: 7100,
        lifetime: 0,
    };
    assert_eq!(gateway.seen().last(), Some(&removed));
}

#[tokio::test]
async fn pcp_lease_is_renewed_before_it_expires_and_removed_on_stop() {
    // The gateway grants 2 s: the lease asks again every second.
    let behaviour = fake_nat::Behaviour {
        max_lifetime: 2,
        ..fake_nat::Behaviour::default()
    };
    let gateway = FakeNatGateway::start(behaviour).await;
    let (_silent, search) = silent_search().await;
    let mut lease = PortLease::start(config(gateway.ip, search), 7101);
    let status = lease.ready().await;
    assert_eq!(status.external(), Some("203.0.113.7:7101".parse().unwrap()));
    let asks = |seen: &[fake_nat::Seen]| {
        seen.iter()
            .filter(|s| matches!(s, fake_nat::Seen::PcpMap { lifetime, .. } if *lifetime > 0))
            .count()
    };
    // Granted at 0 s, renewed at 1 s and 2 s: never expired (a renewal
    // the gateway missed would have let the 2 s grant run out).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while asks(&gateway.seen()) < 3 {
        assert!(std::time::Instant::now() < deadline, "{:?}", gateway.seen());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        lease.status().external(),
        Some("203.0.113.7:7101".parse().unwrap())
    );
    let end = lease.stop().await;
    assert_eq!(
        end,
        MapStatus::Stopped("the PCP mapping of 203.0.113.7:7101 was removed".into())
    );
    let removed = fake_nat::Seen::PcpMap {
        internal_port: 7101,
        lifetime: 0,
    };
    assert_eq!(gateway.seen().last(), Some(&removed));
}

#[tokio::test]
async fn nat_pmp_maps_when_the_gateway_does_not_speak_pcp() {
    // A NAT-PMP router whose port 7102 is taken: it gives 7103.
    let behaviour = fake_nat::Behaviour {
        speaks: Speaks::NatPmp,
        port_offset: 1,
        ..fake_nat::Behaviour::default()
    };
    let gateway = FakeNatGateway::start(behaviour).await;
    let (_silent, search) = silent_search().await;
    let config = config(gateway.ip, search);
    // The game's own thread: no tokio on its side.
    let status = tokio::task::spawn_blocking(move || {
        let mapper = PortLease::start_thread(config, 7102);
        let status = mapper.wait_ready(Duration::from_secs(5));
        drop(mapper); // removes the mapping
        status
    })
    .await
    .unwrap();
    assert_eq!(
        status.to_string(),
        "reachable at 203.0.113.7:7103 through NAT-PMP"
    );
    use fake_nat::Seen::*;
    let mapped = NatPmpMap {
        internal_port: 7102,
        lifetime: 3600,
    };
    let removed = NatPmpMap {
        internal_port: 7102,
        lifetime: 0,
    };
    assert_eq!(
        gateway.seen(),
        vec![PcpRefusedVersion, mapped, NatPmpAddress, removed]
    );
}

#[tokio::test]
async fn pcp_and_nat_pmp_refusals_and_no_upnp_say_why_each_failed() {
    let behaviour = fake_nat::Behaviour {
        refuse: 2, // NOT_AUTHORIZED in both protocols
        ..fake_nat::Behaviour::default()
    };
    let gateway = FakeNatGateway::start(behaviour).await;
    let (_silent, search) = silent_search().await;
    let error = map_port(&config(gateway.ip, search), 7107)
        .await
        .unwrap_err();
    let methods: Vec<Method> = error.attempts.iter().map(|(m, _)| *m).collect();
    assert_eq!(methods, vec![Method::Pcp, Method::NatPmp, Method::Upnp]);
    assert!(error.attempts[0].1.contains("not authorized"), "{error}");
    assert!(error.attempts[1].1.contains("not authorized"), "{error}");
    assert!(
        error.attempts[2].1.contains("no gateway answered"),
        "{error}"
    );
    assert!(error
        .to_string()
        .starts_with("no router forwarded the port: PCP: "));
}

#[tokio::test]
async fn upnp_maps_through_an_internet_gateway_device_and_removes_it_on_stop() {
    let igd = FakeIgd::start(fake_upnp::Behaviour::default()).await;
    // No PCP or NAT-PMP on this router: both refused at once, then UPnP.
    let started = Instant::now();
    let mut lease = PortLease::start(config(no_gateway(), igd.search), 7104);
    let status = lease.ready().await;
    assert_eq!(
        status.to_string(),
        "reachable at 203.0.113.9:7104 through UPnP"
    );
    assert!(started.elapsed() < TIMEOUT * 2, "{:?}", started.elapsed());
    let end = lease.stop().await;
    assert_eq!(
        end.to_string(),
        "the UPnP mapping of 203.0.113.9:7104 was removed"
    );
    use fake_upnp::Seen::*;
    let added = Add {
        external_port: 7104,
        internal: "127.0.0.1".into(),
        internal_port: 7104,
        lease: 3600,
    };
    let removed = Delete {
        external_port: 7104,
    };
    assert_eq!(igd.seen(), vec![Search, added, ExternalIp, removed]);
}

#[tokio::test]
async fn upnp_port_taken_on_the_router_gets_another() {
    let behaviour = fake_upnp::Behaviour {
        taken: vec![7105],
        ..fake_upnp::Behaviour::default()
    };
    let igd = FakeIgd::start(behaviour).await;
    let mut config = config(no_gateway(), igd.search);
    config.methods = vec![Method::Upnp];
    let mapping = map_port(&config, 7105).await.unwrap();
    assert_eq!(mapping.external(), "203.0.113.9:7106".parse().unwrap());
    assert!(igd.seen().contains(&fake_upnp::Seen::AddAny {
        internal_port: 7105
    }));
    mapping.remove(TIMEOUT).await.unwrap();
    assert_eq!(
        igd.seen().last(),
        Some(&fake_upnp::Seen::Delete {
            external_port: 7106
        })
    );
}

#[tokio::test]
async fn upnp_router_granting_only_permanent_leases_gets_one_and_it_is_removed() {
    let behaviour = fake_upnp::Behaviour {
        permanent_only: true,
        ..fake_upnp::Behaviour::default()
    };
    let igd = FakeIgd::start(behaviour).await;
    let mut config = config(no_gateway(), igd.search);
    config.methods = vec![Method::Upnp];
    let mapping = map_port(&config, 7108).await.unwrap();
    assert_eq!(mapping.lease(), Duration::ZERO);
    assert_eq!(mapping.renew_in(), None);
    let leases: Vec<u32> = igd
        .seen()
        .iter()
        .filter_map(|s| match s {
            fake_upnp::Seen::Add { lease, .. } => Some(*lease),
            _ => None,
        })
        .collect();
    assert_eq!(leases, vec![3600, 0]);
    mapping.remove(TIMEOUT).await.unwrap();
    assert_eq!(
        igd.seen().last(),
        Some(&fake_upnp::Seen::Delete {
            external_port: 7108
        })
    );
}

#[tokio::test]
async fn upnp_refusal_is_reported_with_the_routers_reason() {
    let behaviour = fake_upnp::Behaviour {
        refuse: true,
        ..fake_upnp::Behaviour::default()
    };
    let igd = FakeIgd::start(behaviour).await;
    let error = map_port(&config(no_gateway(), igd.search), 7109)
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("PCP: nothing answers on the gateway's port 5351"),
        "{text}"
    );
    assert!(
        text.contains("UPnP: the gateway 127.0.0.1 refused"),
        "{text}"
    );
    assert!(!igd
        .seen()
        .iter()
        .any(|s| matches!(s, fake_upnp::Seen::ExternalIp)));
}

#[tokio::test]
async fn pcp_nat_pmp_upnp_gateways_that_never_answer_cost_at_most_the_timeout_each() {
    let behaviour = fake_nat::Behaviour {
        speaks: Speaks::Nothing,
        ..fake_nat::Behaviour::default()
    };
    let gateway = FakeNatGateway::start(behaviour).await;
    let (_silent, search) = silent_search().await;
    let started = Instant::now();
    let error = map_port(&config(gateway.ip, search), 7110)
        .await
        .unwrap_err();
    let took = started.elapsed();
    // Three methods, each waited for (PCP and NAT-PMP their first 250 ms
    // try, UPnP its search: 60 % of the bound), none past its bound.
    assert!(took >= Duration::from_millis(700), "{took:?}");
    assert!(took < TIMEOUT * 3 + Duration::from_millis(500), "{took:?}");
    assert_eq!(error.attempts.len(), 3, "{error}");
    for (method, why) in &error.attempts[..2] {
        let silent = why.contains("did not answer") || why.contains("no answer within");
        assert!(silent, "{method}: {why}");
    }
    assert!(
        error.attempts[2]
            .1
            .contains("no gateway answered the search"),
        "{error}"
    );
    // Both protocols were asked (within 0.5 s there is no time to ask
    // again: the first retry would come after 0.75 s).
    assert!(gateway.seen().len() >= 2, "{:?}", gateway.seen());
}

#[tokio::test]
async fn pcp_gateway_that_comes_later_is_found_when_the_lease_tries_again() {
    let ip = fake_nat::fresh_ip();
    let (_silent, search) = silent_search().await;
    let mut config = config(ip.into(), search);
    config.retry = Duration::from_millis(300);
    let mut lease = PortLease::start(config, 7111);
    let status = lease.ready().await;
    assert!(matches!(status, MapStatus::Failed(_)), "{status}");
    assert!(status
        .to_string()
        .starts_with("not reachable from the internet: "));
    // The router comes up (rebooted, or UPnP turned on).
    let _gateway = FakeNatGateway::start_at(ip, fake_nat::Behaviour::default()).await;
    let mut changes = lease.watch();
    // (A watch's borrow must not outlive the check: it holds the lock.)
    let mapped = tokio::time::timeout(Duration::from_secs(5), async {
        changes.wait_for(|s| s.external().is_some()).await.is_ok()
    })
    .await;
    assert_eq!(mapped, Ok(true), "{}", lease.status());
    lease.stop().await;
}

#[tokio::test]
async fn a_gateway_gone_or_silent_after_mapping_says_which_on_renew() {
    use switchboard_hosting::GatewayError;
    let gateway = FakeNatGateway::start(fake_nat::Behaviour::default()).await;
    let ip = gateway.ip;
    let (_silent, search) = silent_search().await;
    let mut mapping = map_port(&config(ip, search), 7100).await.unwrap();
    // Gone: nothing listens on its port any more, and the system says so.
    drop(gateway);
    let started = Instant::now();
    let refused = mapping.renew(TIMEOUT).await.unwrap_err();
    assert!(
        matches!(&refused, GatewayError::Refused(why) if why.contains("nothing answers")),
        "{refused:?}"
    );
    assert!(
        started.elapsed() < TIMEOUT,
        "told at once, not at the timeout"
    );
    // Silent: something reads the requests and answers none.
    let _silent_gateway = tokio::net::UdpSocket::bind((ip, 5351)).await.unwrap();
    let started = Instant::now();
    let refused = mapping.renew(TIMEOUT).await.unwrap_err();
    assert_eq!(refused, GatewayError::NoAnswer(TIMEOUT));
    // The PCP client's own retries fit in the timeout: the bound is the
    // thing tested (a silent router costs a lease renewal no more).
    assert!(started.elapsed() < 2 * TIMEOUT, "{:?}", started.elapsed());
    assert_eq!(refused.to_string(), "no answer within 0.5 s");
}

#[tokio::test]
async fn a_lease_on_its_own_thread_is_stopped_from_async_code_and_removes_its_mapping() {
    let gateway = FakeNatGateway::start(fake_nat::Behaviour::default()).await;
    let (_silent, search) = silent_search().await;
    let mut lease = PortLease::start_thread(config(gateway.ip, search), 7105);
    let status = lease.ready().await;
    assert_eq!(status.external(), Some("203.0.113.7:7105".parse().unwrap()));
    let end = lease.stop().await;
    assert_eq!(
        end,
        MapStatus::Stopped("the PCP mapping of 203.0.113.7:7105 was removed".into())
    );
    let removed = fake_nat::Seen::PcpMap {
        internal_port: 7105,
        lifetime: 0,
    };
    assert_eq!(gateway.seen().last(), Some(&removed));
}

#[tokio::test]
async fn a_udp_port_for_quic_is_mapped_as_udp_by_pcp_nat_pmp_and_upnp() {
    let udp = |config: PortMapConfig| PortMapConfig {
        protocol: Protocol::Udp,
        ..config
    };
    let (_silent, search) = silent_search().await;
    // PCP.
    let pcp = FakeNatGateway::start(fake_nat::Behaviour::default()).await;
    let mapping = map_port(&udp(config(pcp.ip, search)), 7120).await.unwrap();
    assert_eq!(mapping.method(), Method::Pcp);
    mapping.remove(TIMEOUT).await.unwrap();
    assert_eq!(pcp.protocols(), ["UDP", "UDP"], "mapped and removed");
    // NAT-PMP.
    let nat_pmp = FakeNatGateway::start(fake_nat::Behaviour {
        speaks: fake_nat::Speaks::NatPmp,
        ..fake_nat::Behaviour::default()
    })
    .await;
    let mapping = map_port(&udp(config(nat_pmp.ip, search)), 7121)
        .await
        .unwrap();
    assert_eq!(mapping.method(), Method::NatPmp);
    mapping.remove(TIMEOUT).await.unwrap();
    assert_eq!(
        nat_pmp.protocols(),
        ["UDP", "UDP", "UDP"],
        "PCP asked first, then NAT-PMP mapped and removed"
    );
    // UPnP.
    let igd = FakeIgd::start(fake_upnp::Behaviour::default()).await;
    let mapping = map_port(&udp(config(no_gateway(), igd.search)), 7122)
        .await
        .unwrap();
    assert_eq!(mapping.method(), Method::Upnp);
    mapping.remove(TIMEOUT).await.unwrap();
    assert_eq!(igd.protocols(), ["UDP", "UDP"], "added and deleted");
    // And a TCP port is still TCP.
    let tcp = FakeNatGateway::start(fake_nat::Behaviour::default()).await;
    let mapping = map_port(&config(tcp.ip, search), 7123).await.unwrap();
    mapping.remove(TIMEOUT).await.unwrap();
    assert_eq!(tcp.protocols(), ["TCP", "TCP"]);
}
