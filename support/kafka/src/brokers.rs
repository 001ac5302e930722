//! Bootstrap brokers as a configuration writes them (`kafka.brokers`, `--kafka`) and as
//! librdkafka takes them (`bootstrap.servers`).

use std::fmt;

use crate::InvalidValue;

/// One Kafka bootstrap broker; displayed as `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BrokerAddr {
    /// Host name or IP address (an IPv6 address keeps its brackets).
    pub host: String,
    /// TCP port, never 0.
    pub port: u16,
}

impl fmt::Display for BrokerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Bootstrap brokers written as `host:port`, comma separated (spaces around an entry ignored, an
/// IPv6 host in brackets); at least one. The first bad entry is refused, naming `key`.
pub fn parse_brokers(key: &str, value: &str) -> Result<Vec<BrokerAddr>, InvalidValue> {
    if value.trim().is_empty() {
        return Err(InvalidValue::new(
            key,
            value,
            "expected at least one host:port",
        ));
    }
    value
        .split(',')
        .map(|entry| {
            let entry = entry.trim();
            let bad = |reason: &str| InvalidValue::new(key, entry, reason);
            let Some((host, port)) = entry.rsplit_once(':') else {
                return Err(bad("expected host:port"));
            };
            let bracketed = host.starts_with('[') && host.ends_with(']');
            if host.is_empty()
                || host.contains(char::is_whitespace)
                || (host.contains(':') && !bracketed)
            {
                return Err(bad("expected host:port, with an IPv6 host in brackets"));
            }
            match port.parse::<u16>() {
                Ok(port) if port != 0 => Ok(BrokerAddr {
                    host: host.to_owned(),
                    port,
                }),
                _ => Err(bad("expected a port from 1 to 65535")),
            }
        })
        .collect()
}

/// Brokers as librdkafka's `bootstrap.servers`: `host:port` joined with commas.
pub fn bootstrap_servers(brokers: &[BrokerAddr]) -> String {
    let brokers: Vec<String> = brokers.iter().map(ToString::to_string).collect();
    brokers.join(",")
}
