//! A fake UPnP Internet Gateway Device on loopback: an SSDP responder (UDP)
//! and an HTTP server with the device description, the WANIPConnection
//! service description and its SOAP control URL. It answers as a home
//! router does (or refuses, as routers do) and records every call.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// How the fake router behaves.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// External ports already taken (AddPortMapping answers 718).
    pub taken: Vec<u16>,
    /// Grants only permanent mappings (a lease other than 0 answers 725).
    pub permanent_only: bool,
    /// Every AddPortMapping answers 606, not authorized.
    pub refuse: bool,
    pub external_ip: Ipv4Addr,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            taken: Vec::new(),
            permanent_only: false,
            refuse: false,
            external_ip: Ipv4Addr::new(203, 0, 113, 9),
        }
    }
}

/// A call the router was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Search,
    Add {
        external_port: u16,
        internal: String,
        internal_port: u16,
        lease: u32,
    },
    AddAny {
        internal_port: u16,
    },
    Delete {
        external_port: u16,
    },
    ExternalIp,
}

pub struct FakeIgd {
    /// Where the SSDP search goes (`PortMapConfig::upnp_search`).
    pub search: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    protocols: Arc<Mutex<Vec<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl FakeIgd {
    pub async fn start(behaviour: Behaviour) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let http_port = http.local_addr().unwrap().port();
        let ssdp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let search = ssdp.local_addr().unwrap();
        let log = seen.clone();
        let ssdp_task = tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = ssdp.recv_from(&mut buf).await {
                if !buf[..n].starts_with(b"M-SEARCH") {
                    continue;
                }
                log.lock().unwrap().push(Seen::Search);
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nCACHE-CONTROL: max-age=120\r\n\
                     ST: urn:schemas-upnp-org:device:InternetGatewayDevice:1\r\n\
                     USN: uuid:fake-igd::urn:schemas-upnp-org:device:InternetGatewayDevice:1\r\n\
                     LOCATION: http://127.0.0.1:{http_port}/rootDesc.xml\r\n\r\n"
                );
                let _ = ssdp.send_to(reply.as_bytes(), from).await;
            }
        });
        let log = seen.clone();
        let protocols = Arc::new(Mutex::new(Vec::new()));
        let asked_for = protocols.clone();
        let http_task = tokio::spawn(async move {
            while let Ok((stream, _)) = http.accept().await {
                let (log, behaviour) = (log.clone(), behaviour.clone());
                let asked_for = asked_for.clone();
                tokio::spawn(async move { serve(stream, &behaviour, &log, &asked_for).await });
            }
        });
        Self {
            search,
            seen,
            protocols,
            tasks: vec![ssdp_task, http_task],
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The `NewProtocol` of each mapping call (add, add any, delete), in
    /// order.
    pub fn protocols(&self) -> Vec<String> {
        self.protocols.lock().unwrap().clone()
    }
}

impl Drop for FakeIgd {
    fn drop(&mut self) {
        self.tasks.iter().for_each(|t| t.abort());
    }
}

/// One request on a connection, answered, then the connection closed.
async fn serve(
    mut stream: TcpStream,
    b: &Behaviour,
    log: &Mutex<Vec<Seen>>,
    protocols: &Mutex<Vec<String>>,
) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let (head, body) = loop {
        let Ok(n) = stream.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = header(&text[..end], "content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                break (text[..end].to_string(), text[end + 4..].to_string());
            }
        }
    };
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    let (status, reply) = match path.as_str() {
        "/rootDesc.xml" => (200, ROOT_DESCRIPTION.to_string()),
        "/WANIPCn.xml" => (200, SERVICE_DESCRIPTION.to_string()),
        "/ctl/IPConn" => {
            let action = header(&head, "soapaction")
                .and_then(|v| v.trim_matches('"').split('#').nth(1).map(str::to_string))
                .unwrap_or_default();
            if let Some(at) = body.find("<NewProtocol>") {
                let rest = &body[at + "<NewProtocol>".len()..];
                let end = rest.find('<').unwrap_or(rest.len());
                protocols.lock().unwrap().push(rest[..end].to_string());
            }
            soap(&action, &body, b, log)
        }
        _ => (404, String::new()),
    };
    let reason = if status == 200 { "OK" } else { "Error" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/xml; charset=\"utf-8\"\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        reply.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn soap(action: &str, body: &str, b: &Behaviour, log: &Mutex<Vec<Seen>>) -> (u16, String) {
    let arg = |name: &str| -> String {
        let open = format!("<{name}>");
        body.find(&open)
            .and_then(|at| {
                let rest = &body[at + open.len()..];
                rest.find('<').map(|end| rest[..end].to_string())
            })
            .unwrap_or_default()
    };
    let number = |name: &str| arg(name).parse::<u32>().unwrap_or(u32::MAX);
    match action {
        "GetExternalIPAddress" => {
            log.lock().unwrap().push(Seen::ExternalIp);
            let out = format!(
                "<NewExternalIPAddress>{}</NewExternalIPAddress>",
                b.external_ip
            );
            (200, envelope(action, &out))
        }
        "AddPortMapping" => {
            let external_port = number("NewExternalPort") as u16;
            let lease = number("NewLeaseDuration");
            log.lock().unwrap().push(Seen::Add {
                external_port,
                internal: arg("NewInternalClient"),
                internal_port: number("NewInternalPort") as u16,
                lease,
            });
            if b.refuse {
                fault(606, "Action not authorized")
            } else if b.permanent_only && lease != 0 {
                fault(725, "OnlyPermanentLeasesSupported")
            } else if b.taken.contains(&external_port) {
                fault(718, "ConflictInMappingEntry")
            } else {
                (200, envelope(action, ""))
            }
        }
        "AddAnyPortMapping" => {
            let internal_port = number("NewInternalPort") as u16;
            log.lock().unwrap().push(Seen::AddAny { internal_port });
            let free = (internal_port..=u16::MAX)
                .find(|p| !b.taken.contains(p))
                .unwrap_or(0);
            (
                200,
                envelope(
                    action,
                    &format!("<NewReservedPort>{free}</NewReservedPort>"),
                ),
            )
        }
        "DeletePortMapping" => {
            let external_port = number("NewExternalPort") as u16;
            log.lock().unwrap().push(Seen::Delete { external_port });
            (200, envelope(action, ""))
        }
        _ => fault(401, "Invalid Action"),
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// A SOAP envelope around `body`.
fn soap_envelope(body: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\r\n<s:Envelope xmlns:s=\"http://schemas.xmlsoap.org/soap/envelope/\" \
         s:encodingStyle=\"http://schemas.xmlsoap.org/soap/encoding/\"><s:Body>{body}</s:Body></s:Envelope>"
    )
}

fn envelope(action: &str, inner: &str) -> String {
    soap_envelope(&format!(
        "<u:{action}Response xmlns:u=\"urn:schemas-upnp-org:service:WANIPConnection:1\">{inner}</u:{action}Response>"
    ))
}

fn fault(code: u16, description: &str) -> (u16, String) {
    let body = soap_envelope(&format!(
        "<s:Fault><faultcode>s:Client</faultcode><faultstring>UPnPError</faultstring><detail>\
         <UPnPError xmlns=\"urn:schemas-upnp-org:control-1-0\"><errorCode>{code}</errorCode>\
         <errorDescription>{description}</errorDescription></UPnPError></detail></s:Fault>"
    ));
    (500, body)
}

const ROOT_DESCRIPTION: &str = r#"<?xml version="1.0"?>
<root xmlns="urn:schemas-upnp-org:device-1-0">
<specVersion><major>1</major><minor>0</minor></specVersion>
<device>
<deviceType>urn:schemas-upnp-org:device:InternetGatewayDevice:1</deviceType>
<friendlyName>Fake router</friendlyName>
<deviceList><device>
<deviceType>urn:schemas-upnp-org:device:WANDevice:1</deviceType>
<deviceList><device>
<deviceType>urn:schemas-upnp-org:device:WANConnectionDevice:1</deviceType>
<serviceList><service>
<serviceType>urn:schemas-upnp-org:service:WANIPConnection:1</serviceType>
<serviceId>urn:upnp-org:serviceId:WANIPConn1</serviceId>
<SCPDURL>/WANIPCn.xml</SCPDURL>
<controlURL>/ctl/IPConn</controlURL>
<eventSubURL>/evt/IPConn</eventSubURL>
</service></serviceList>
</device></deviceList>
</device></deviceList>
</device>
</root>"#;

const SERVICE_DESCRIPTION: &str = r#"<?xml version="1.0"?>
<scpd xmlns="urn:schemas-upnp-org:service-1-0">
<specVersion><major>1</major><minor>0</minor></specVersion>
<actionList>
<action><name>AddPortMapping</name><argumentList>
<argument><name>NewRemoteHost</name><direction>in</direction></argument>
<argument><name>NewExternalPort</name><direction>in</direction></argument>
<argument><name>NewProtocol</name><direction>in</direction></argument>
<argument><name>NewInternalPort</name><direction>in</direction></argument>
<argument><name>NewInternalClient</name><direction>in</direction></argument>
<argument><name>NewEnabled</name><direction>in</direction></argument>
<argument><name>NewPortMappingDescription</name><direction>in</direction></argument>
<argument><name>NewLeaseDuration</name><direction>in</direction></argument>
</argumentList></action>
<action><name>AddAnyPortMapping</name><argumentList>
<argument><name>NewRemoteHost</name><direction>in</direction></argument>
<argument><name>NewExternalPort</name><direction>in</direction></argument>
<argument><name>NewProtocol</name><direction>in</direction></argument>
<argument><name>NewInternalPort</name><direction>in</direction></argument>
<argument><name>NewInternalClient</name><direction>in</direction></argument>
<argument><name>NewEnabled</name><direction>in</direction></argument>
<argument><name>NewPortMappingDescription</name><direction>in</direction></argument>
<argument><name>NewLeaseDuration</name><direction>in</direction></argument>
<argument><name>NewReservedPort</name><direction>out</direction></argument>
</argumentList></action>
<action><name>DeletePortMapping</name><argumentList>
<argument><name>NewRemoteHost</name><direction>in</direction></argument>
<argument><name>NewExternalPort</name><direction>in</direction></argument>
<argument><name>NewProtocol</name><direction>in</direction></argument>
</argumentList></action>
<action><name>GetExternalIPAddress</name><argumentList>
<argument><name>NewExternalIPAddress</name><direction>out</direction></argument>
</argumentList></action>
</actionList>
</scpd>"#;
