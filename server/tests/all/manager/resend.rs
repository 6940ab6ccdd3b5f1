//! Requests through a dropped connection: kept while it is down, sent
//! again when the session resumes, applied at most once, one verdict each
//! (issue 52: a request a second through a 12 s outage ended as
//! `ConnectionLost` or `Timeout`, and a timed-out one may have been
//! applied).

use super::*;
use switchboard::message::TypedMessage;

#[test]
fn a_request_made_while_the_connection_is_down_goes_when_the_session_resumes() {
    let mut net = board(ManagerRules::default());
    let (ann, bob) = (net.join(named("ann")), net.join(named("bob")));
    heard(&mut net, ann);
    heard(&mut net, bob);
    net.set_reachable(ann, false);
    net.cut(ann);
    // Down, and its first attempts fail: the requests are kept.
    net.advance(Duration::from_millis(200));
    let tickets: Vec<_> = (0..3)
        .map(|i| {
            net.request(ann, Board::Say(format!("while down {i}")))
                .unwrap()
        })
        .collect();
    assert!(tickets
        .iter()
        .all(|t| net.verdict(ann, *t) == RequestStatus::Pending));
    assert!(
        heard(&mut net, bob).lines.is_empty(),
        "nothing reached the server"
    );
    // Back: each goes once, in order, and gets one verdict.
    net.set_reachable(ann, true);
    net.advance(Duration::from_secs(6));
    let back = heard(&mut net, ann);
    assert_eq!(back.welcomed.len(), 1);
    assert!(back.welcomed[0].resumed);
    assert_eq!(back.verdicts.len(), 3, "{:?}", back.verdicts);
    assert!(back
        .verdicts
        .iter()
        .all(|(_, s)| *s == RequestStatus::Accepted));
    let lines: Vec<String> = heard(&mut net, bob)
        .lines
        .into_iter()
        .map(|l| l.text)
        .collect();
    assert_eq!(lines, ["while down 0", "while down 1", "while down 2"]);
}

#[test]
fn a_request_whose_verdict_was_lost_with_the_connection_is_answered_again_not_applied_twice() {
    let mut net = board(ManagerRules::default());
    let bob = net.join(named("bob"));
    heard(&mut net, bob);
    // A client played by hand: joins, sends request 1, is answered.
    let first = net.open_raw();
    net.send_raw(first, hello(None));
    let welcome: Welcome = session_replies(&mut net, first)[0].1.content().unwrap();
    let say = Board::Say("once".into());
    let mut content = Vec::new();
    say.encode_content(&mut content).unwrap();
    let frame = RequestFrame {
        id: 1,
        channel: say.channel_id(),
        action: say.action_id(),
        content,
    };
    let request = protocol::session_message(protocol::REQUEST, &frame);
    net.send_raw(first, request.clone());
    let answer = session_replies(&mut net, first);
    assert_eq!(answer[0].0, protocol::ACCEPTED);
    assert_eq!(heard(&mut net, bob).lines.len(), 1, "applied");
    // Its connection drops before it read the answer; it resumes on a new
    // one and sends request 1 again, as the client does.
    let second = net.open_raw();
    net.send_raw(
        second,
        hello(Some(Resume {
            client: welcome.client,
            token: welcome.token,
        })),
    );
    let resumed: Welcome = session_replies(&mut net, second)[0].1.content().unwrap();
    assert!(resumed.resumed);
    let again = protocol::session_message(protocol::REQUEST_AGAIN, &frame);
    net.send_raw(second, again);
    let answer = session_replies(&mut net, second);
    assert_eq!(answer.len(), 1);
    assert_eq!(
        (answer[0].0, answer[0].1.content::<u64>().unwrap()),
        (protocol::ACCEPTED, 1)
    );
    assert!(heard(&mut net, bob).lines.is_empty(), "not applied twice");
    assert_eq!(net.stats().repeated_requests_total, 1);
    // A client that numbers its requests per connection (the AxisPy
    // bridge does) and sends id 1 again, unmarked, is a new request.
    net.send_raw(second, request);
    assert_eq!(session_replies(&mut net, second)[0].0, protocol::ACCEPTED);
    assert_eq!(
        heard(&mut net, bob).lines.len(),
        1,
        "an unmarked request is applied"
    );
}

#[test]
fn a_request_kept_past_its_expiry_fails_once_as_a_timeout() {
    let mut net = board(ManagerRules::default());
    let config = ClientConfig {
        request_timeout: Duration::from_secs(2),
        ..named("ann")
    };
    let ann = net.join(config);
    net.set_reachable(ann, false);
    net.cut(ann);
    net.advance(Duration::from_millis(100));
    let ticket = net.request(ann, Board::Say("too late".into())).unwrap();
    net.advance(Duration::from_secs(3));
    assert_eq!(
        net.verdict(ann, ticket),
        RequestStatus::Failed(switchboard::RequestError::Timeout)
    );
    heard(&mut net, ann);
    // Once back, it is not sent: the game had its one verdict.
    net.set_reachable(ann, true);
    net.advance(Duration::from_secs(6));
    let back = heard(&mut net, ann);
    assert!(
        back.verdicts.iter().all(|(t, _)| *t != ticket),
        "{:?}",
        back.verdicts
    );
}
