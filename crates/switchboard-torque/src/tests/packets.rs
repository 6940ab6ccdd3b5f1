//! The engine's packets, read and written byte for byte: built here from
//! the layouts of `docs/TORQUE.md` (not from the encoder under test).

use super::*;

#[test]
fn every_packet_the_master_reads_parses_from_its_layout() {
    assert_eq!(
        packet::parse(&header(22, 0, 0, 0x1234)),
        Ok(Packet::Heartbeat(Header {
            kind: 22,
            flags: 0,
            key: 0,
            session: 0x1234
        }))
    );
    let Ok(Packet::InfoResponse(h, info)) =
        packet::parse(&info_response(0xBEEF_0042, "FPS", "DM", 5, 3))
    else {
        panic!("an info response");
    };
    assert_eq!((h.key, h.session, h.k()), (0x0042, 0xBEEF, 0xBEEF_0042));
    assert_eq!(
        (
            info.game_type.as_str(),
            info.mission_type.as_str(),
            info.players,
            info.max_players,
            info.bots
        ),
        ("FPS", "DM", 5, 16, 1)
    );
    assert_eq!(
        (info.region_mask, info.version, info.flags, info.cpu_mhz),
        (2, 1500, 3, 2400)
    );
    let Ok(Packet::ListRequest(h, filter)) = packet::parse(&list_request(4, 7, 9, "FPS", 32))
    else {
        panic!("a list request");
    };
    assert_eq!((h.flags, h.key, h.session), (4, 7, 9));
    assert_eq!(
        filter,
        TorqueFilter {
            game_type: "FPS".into(),
            mission_type: "any".into(),
            max_players: 32,
            ..TorqueFilter::default()
        }
    );
    // A re-request of page 3: TGE's u8 index, Torque3D's u16 index
    // (quirk 4), and Torque3D's 44; zeroed filters after each.
    let mut tge = header(6, 0, 8, 9);
    tge.push(3);
    tge.extend(zeroed_filters());
    let mut t3d = header(6, 0, 8, 9);
    t3d.extend_from_slice(&3u16.to_le_bytes());
    t3d.extend(zeroed_filters());
    let mut t44 = header(44, 4, 8, 9);
    t44.push(3);
    t44.extend(zeroed_filters());
    for bytes in [tge, t3d, t44] {
        assert!(
            matches!(packet::parse(&bytes), Ok(Packet::PageRequest(_, 3))),
            "{bytes:?}"
        );
    }
    assert!(matches!(
        packet::parse(&header(2, 0, 1, 1)),
        Ok(Packet::GameTypesRequest(_))
    ));
}

#[test]
fn truncated_and_unknown_packets_are_errors_and_extra_bytes_are_not() {
    let full = info_response(1, "FPS", "DM", 4, 0);
    // Cut anywhere before the player count: truncated.
    let player_count_at = 6 + 4 + 3 + 1 + 4 + 4 + 1 + 1 + 4;
    for cut in 0..=player_count_at {
        assert_eq!(
            packet::parse(&full[..cut]),
            Err(TorqueError::Truncated),
            "cut at {cut}"
        );
    }
    // The GUIDs are not trusted: missing ones are fine (quirk 1).
    assert!(packet::parse(&full[..player_count_at + 1]).is_ok());
    let mut longer = header(22, 0, 0, 5);
    longer.extend_from_slice(b"trailing bytes");
    assert!(matches!(packet::parse(&longer), Ok(Packet::Heartbeat(_))));
    assert_eq!(
        packet::parse(&header(14, 0, 0, 0)),
        Err(TorqueError::Unknown(14))
    );
    assert_eq!(packet::parse(&[6, 0, 1]), Err(TorqueError::Truncated));
}

#[test]
fn the_master_writes_each_reply_byte_for_byte() {
    assert_eq!(
        packet::info_request(0xBEEF_0042),
        vec![10, 0, 0x42, 0x00, 0xEF, 0xBE]
    );
    let request = Header {
        kind: 6,
        flags: 0,
        key: 0x0102,
        session: 0x0304,
    };
    let servers = [addr(1, 28000), SocketAddr::from(([192, 168, 0, 9], 0x1234))];
    let mut expected = vec![8, 0, 0x02, 0x01, 0x04, 0x03, 1, 2, 2, 0];
    expected.extend_from_slice(&[10, 0, 0, 1, 0x60, 0x6D]); // 28000 LE
    expected.extend_from_slice(&[192, 168, 0, 9, 0x34, 0x12]);
    assert_eq!(packet::list_page(&request, 1, 2, &servers), expected);

    let new_style = Header {
        flags: 4,
        ..request
    };
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, 7));
    let mut expected = vec![40, 4, 0x02, 0x01, 0x04, 0x03, 0, 0, 1, 0, 2, 0];
    expected.extend_from_slice(&[0, 10, 0, 0, 1, 0x60, 0x6D]);
    expected.push(1);
    expected.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
    expected.extend_from_slice(&[7, 0]);
    assert_eq!(
        packet::list_page(&new_style, 0, 1, &[servers[0], v6]),
        expected
    );

    let types = packet::game_types(
        &request,
        &["FPS".into(), "RTS".into()],
        &["CTF".into()],
        packet::MAX_REPLY,
    );
    let mut expected = vec![4, 0, 0x02, 0x01, 0x04, 0x03, 2];
    expected.extend(cstring("FPS"));
    expected.extend(cstring("RTS"));
    expected.push(1);
    expected.extend(cstring("CTF"));
    assert_eq!(types, expected);
}

#[test]
fn pages_stay_under_the_datagram_size_and_an_empty_list_is_one_empty_page() {
    let many: Vec<SocketAddr> = (0..1000u32)
        .map(|i| SocketAddr::from(([10, (i >> 8) as u8, i as u8, 1], 28000)))
        .collect();
    for new_style in [false, true] {
        let pages = packet::paginate(&many, new_style, packet::MAX_REPLY);
        assert_eq!(pages.iter().map(Vec::len).sum::<usize>(), 1000);
        let request = Header {
            kind: 6,
            flags: if new_style { 4 } else { 0 },
            key: 1,
            session: 1,
        };
        for (i, page) in pages.iter().enumerate() {
            let bytes = packet::list_page(&request, i, pages.len(), page);
            assert!(bytes.len() <= packet::MAX_REPLY, "{} bytes", bytes.len());
        }
    }
    assert_eq!(
        packet::paginate(&many, false, packet::MAX_REPLY)[0].len(),
        231,
        "(1400 - 10) / 6"
    );
    let empty = packet::paginate(&[], false, packet::MAX_REPLY);
    assert_eq!(empty, vec![Vec::<SocketAddr>::new()]);
    let request = Header {
        kind: 6,
        flags: 0,
        key: 1,
        session: 2,
    };
    assert_eq!(
        packet::list_page(&request, 0, 1, &empty[0]),
        vec![8, 0, 1, 0, 2, 0, 0, 1, 0, 0]
    );
}
