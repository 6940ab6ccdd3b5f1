use super::*;

#[test]
fn ws_url_takes_host_and_port() {
    let url = WsUrl::parse("ws://127.0.0.1:7000/").unwrap();
    assert_eq!((url.host.as_str(), url.port), ("127.0.0.1", 7000));
    let url = WsUrl::parse("ws://game.example/play?room=3").unwrap();
    assert_eq!((url.host.as_str(), url.port), ("game.example", 80));
    let url = WsUrl::parse("ws://[::1]:9000").unwrap();
    assert_eq!((url.host.as_str(), url.port), ("::1", 9000));
    let url = WsUrl::parse("ws://[::1]/").unwrap();
    assert_eq!((url.host.as_str(), url.port), ("::1", 80));
    let url = WsUrl::parse("wss://game.example/play").unwrap();
    assert_eq!(url.authority(), "game.example:443");
    assert_eq!(
        WsUrl::parse("wss://[::1]:9").unwrap().authority(),
        "[::1]:9"
    );
}

#[test]
fn ws_url_refuses_what_it_cannot_speak() {
    for bad in ["http://x/", "ws://", "ws://host:port/", "ws://[::1/"] {
        assert!(WsUrl::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn one_frame_per_message_is_checked() {
    assert!(check_one_frame(&[0, 0, 0, 1, 0]).is_ok());
    assert!(check_one_frame(&[0, 0, 0, 3, 0, 16, 1]).is_ok());
    for bad in [
        &[][..],
        &[0, 0, 0, 1][..],
        &[0, 0, 0, 2, 0][..],
        &[0, 0, 0, 1, 0, 0, 0, 0, 1, 0][..],
        &[0xff, 0xff, 0xff, 0xff, 0][..],
    ] {
        let err = check_one_frame(bad).unwrap_err();
        assert!(TransportViolation::of(&err).is_some(), "{bad:?}");
    }
}
